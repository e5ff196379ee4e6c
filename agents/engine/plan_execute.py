"""The plan-execute agent type (ENGINE.md §4): one JSON plan, a ReAct sub-loop per step, one merge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.llm import LLMError, LLMRequest, LLMResponse, Message
from agents.engine.plan_parsing import extract_json_array
from agents.engine.planning import agent_scope
from agents.engine.prompts import PromptBook
from agents.engine.react import run_react_loop
from agents.engine.react_text import build_task_messages, registry_for, task_description
from agents.engine.runtime import Cancelled, RunContext
from agents.engine.specs import AgentSpec, TaskSpec


class PlanExecuteError(Exception):
    """The agent failed: its plan could not be read, or one of its steps failed."""


@dataclass(frozen=True, slots=True)
class PlanExecuteStep:
    id: str
    number: int
    action: str


def parse_plan_array(text: str, *, task_key: str) -> list[PlanExecuteStep]:
    """Steps from the first JSON array of ``[{"step": 1, "action": "..."}]`` in ``text``."""
    # A citation such as "[1]" in the prose before the plan is not the plan.
    items = extract_json_array(text, lambda v: not v or any(isinstance(i, (dict, str)) for i in v))
    if items is None:
        raise PlanExecuteError("plan-execute: failed to parse plan: the reply holds no JSON array")
    if not items:
        raise PlanExecuteError("plan-execute: planner returned empty plan")
    actions: list[str] = []
    for item in items:
        if isinstance(item, str):
            action: Any = item
        elif isinstance(item, dict):
            action = item.get("action", item.get("description", item.get("task")))
        else:
            action = None
        if isinstance(action, str) and action.strip():
            actions.append(action.strip())
    if not actions:
        raise PlanExecuteError('plan-execute: failed to parse plan: no item has an "action" text')
    # Numbered by position: the model's own numbers may repeat or skip.
    return [
        PlanExecuteStep(id=f"{task_key}.s{n}", number=n, action=a)
        for n, a in enumerate(actions, start=1)
    ]


async def run_plan_execute(
    ctx: RunContext, agent: AgentSpec, task: TaskSpec, *, scope: BudgetScope | None = None
) -> str:
    """Plan once, run every step in order (any failure fails the agent), then aggregate."""
    scope = scope or agent_scope(agent)
    book: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
    task_messages = build_task_messages(ctx, agent, task)
    system, user = _persona_and_task(task_messages)

    await ctx.emit("agent_plan.started", {"attempt": 1})
    # One format per prompt: the plan call asks for the JSON array only, so the persona goes
    # without the ReAct format that the steps' system prompt explains.
    persona = book.render(
        "react_system_no_tools", role=agent.role, goal=agent.goal, backstory=agent.backstory
    )
    # The tools, named and described without the ReAct format, so that steps can name them.
    registry = registry_for(ctx)
    names = [ref.name for ref in agent.tools if ref.name in registry]
    tools = book.render("crew_plan_task_tools", tools=registry.describe(names)) if names else ""
    plan_system = "\n\n".join(p for p in (persona, tools, book.render("plan_execute_plan")) if p).strip()
    request = LLMRequest(
        llm=agent.llm,
        messages=[{"role": "system", "content": plan_system}, user],
        purpose="agent_plan",
    )
    reply = await ctx.llm.call(request, scope=scope)
    try:
        steps = parse_plan_array(reply.content, task_key=task.key)
    except PlanExecuteError as exc:
        await ctx.emit("agent_plan.failed", {"error": str(exc)})
        raise
    await ctx.emit(
        "agent_plan.completed",
        {
            "attempt": 1,
            "plan": "\n".join(f"{s.number}. {s.action}" for s in steps),
            "ready": True,
            "steps": [
                {"step_id": s.id, "number": s.number, "description": s.action} for s in steps
            ],
        },
    )

    log = ""
    for index, step in enumerate(steps):
        try:
            output = await _run_step(ctx, agent, task, book, system, step, log, scope)
        except (PlanExecuteError, Cancelled, BudgetExceeded) as exc:
            reason = "cancelled" if isinstance(exc, Cancelled) else str(exc)
            # A failed step has its step.completed; one stopped midway ends skipped with the rest.
            first_unfinished = index + 1 if isinstance(exc, PlanExecuteError) else index
            for later in steps[first_unfinished:]:
                await ctx.emit(
                    "step.skipped",
                    {"step_id": later.id, "number": later.number, "reason": reason},
                    step_id=later.id,
                )
            raise
        block = book.render(
            "step_result", number=step.number, description=step.action, result=output
        )
        log += f"{block}\n\n"

    aggregate = book.render(
        "plan_execute_aggregate", description=task.description, step_outputs=log.rstrip()
    )
    request = LLMRequest(
        llm=agent.llm,
        # No ReAct system prompt here: its answer format would leak into the merged answer.
        messages=[{"role": "user", "content": aggregate}],
        purpose="aggregate",
        response_schema=task.output_json_schema,
        stream=agent.llm.stream,
    )
    merged: LLMResponse = await ctx.llm.call(request, scope=scope)
    return merged.content


async def _run_step(
    ctx: RunContext,
    agent: AgentSpec,
    task: TaskSpec,
    book: PromptBook,
    system: str,
    step: PlanExecuteStep,
    log: str,
    scope: BudgetScope | None,
) -> str:
    await ctx.emit(
        "step.started",
        {"step_id": step.id, "number": step.number, "description": step.action},
        step_id=step.id,
    )
    context: Sequence[str] = task.context
    if ctx.knowledge is not None:  # the task's sources searched again for this step (issue #19)
        context = await ctx.knowledge.for_step(ctx, step_id=step.id, text=step.action, context=context)
    # The seed keeps the task in its conversation memory; a fresh conversation restates it.
    text = book.render(
        "plan_execute_step",
        description=task_description(task, book),
        expected_output=task.expected_output,
        context="\n\n".join(context) if context else book.render("none"),
        number=step.number,
        action=step.action,
        log=log.rstrip() or book.render("nothing"),
    )
    messages: list[Message] = [{"role": "user", "content": text}]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    error: str | None = None
    try:
        result = await run_react_loop(
            ctx,
            agent,
            messages,
            max_iter=agent.max_iter,
            purpose="step",
            step_id=step.id,
            scope=scope,
            force_final_answer=False,
        )
    except LLMError as exc:
        outcome, output, error = "failed", "", str(exc)
    else:
        outcome, output = result.outcome, result.output
        if outcome == "timed_out":
            error = "the step ran out of time"
        elif outcome == "iteration_exhausted":
            error = f"the step used all {agent.max_iter} iterations without a final answer"
        elif outcome == "failed":
            error = result.error or "the step failed"
    await ctx.emit(
        "step.completed",
        {
            "step_id": step.id,
            "number": step.number,
            "outcome": outcome,
            "result": output,
            "error": error,
        },
        step_id=step.id,
    )
    if error is not None:
        raise PlanExecuteError(f"plan-execute: step {step.number} failed: {error}")
    return output


def _persona_and_task(messages: list[Message]) -> tuple[str, Message]:
    """Split ReAct's task messages into the agent's system prompt and the task message."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    users = [m for m in messages if m.get("role") == "user"]
    return system, users[-1] if users else {"role": "user", "content": ""}
