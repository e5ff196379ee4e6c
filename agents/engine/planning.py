"""Agent-level Plan-and-Act (ENGINE.md §2): plan, run steps in isolation, observe, decide, replan.

``PlanAndAct`` is the loop; it drafts its plan with ``drafting.Drafting`` and keeps to an approved
crew plan with ``bound.ApprovedPlan``. The plan's data and the tolerant reading of the planner's
replies are in ``plan_parsing`` (their names are importable from here too).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.engine.bound import ApprovedPlan
from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.drafting import Drafting
from agents.engine.llm import LLMError, LLMRequest, LLMResponse, Message
from agents.engine.plan_parsing import (
    OBSERVATION_SCHEMA,
    PLAN_SCHEMA,
    PLAN_TOOL,
    PLAN_TOOL_NAME,
    DraftPlan,
    DraftStep,
    Observation,
    PlanStep,
    StepOutcome,
    StepStatus,
    draft_from_dict,
    extract_json_array,
    extract_json_object,
    is_full_answer,
    parse_observation,
    parse_plan_response,
    parse_plan_text,
    plan_as_text,
    read_verdict,
    result_block,
    steps_as_text,
)
from agents.engine.prompts import PromptBook, PromptError
from agents.engine.react import run_react_loop
from agents.engine.react_text import build_task_messages, task_description
from agents.engine.runtime import Cancelled, RunContext, Usage
from agents.engine.specs import (
    AgentSpec,
    Budget,
    PlanningConfigSpec,
    TaskSpec,
    ToolRef,
)
from agents.engine.structured import Shape, ask_structured
from agents.engine.tools import default_registry

# The plan's data and parsing live in plan_parsing; tests, bench/ and the other engines import
# them from here too.
__all__ = [
    "OBSERVATION_SCHEMA",
    "PLAN_SCHEMA",
    "PLAN_TOOL",
    "PLAN_TOOL_NAME",
    "DraftPlan",
    "DraftStep",
    "Observation",
    "PlanStep",
    "StepOutcome",
    "StepStatus",
    "draft_from_dict",
    "extract_json_array",
    "extract_json_object",
    "is_full_answer",
    "parse_observation",
    "parse_plan_response",
    "parse_plan_text",
    "plan_as_text",
    "read_verdict",
    "MAX_PARALLEL_STEPS",
    "PlanAndAct",
    "agent_scope",
    "run_approved_steps",
    "run_plan_and_act",
]

MAX_PARALLEL_STEPS = 4  # ours: upstream runs every ready step at once


# --- the loop ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Decision:
    goal_achieved: bool = False
    replan_reason: str | None = None


class PlanAndAct(Drafting, ApprovedPlan):
    """One execution of one task by one agent with planning on; state lives only here."""

    def __init__(
        self,
        ctx: RunContext,
        agent: AgentSpec,
        task: TaskSpec,
        config: PlanningConfigSpec,
        scope: BudgetScope | None,
    ) -> None:
        self.ctx = ctx
        self.agent = agent
        self.task = task
        self.config = config
        self.scope = scope
        self.book: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
        self.plan_llm = config.llm or agent.llm
        self.steps: list[PlanStep] = []
        self.replans = 0
        self.tools: dict[str, ToolRef] = {t.name: t for t in agent.tools}
        self.semaphore = asyncio.Semaphore(MAX_PARALLEL_STEPS)
        # A ReAct or plan-execute agent bound to approved steps answers in its last step, as it
        # would have answered in its one loop: no synthesis call after a plan that ran through.
        self.last_step_answers = False

    # -- prompt values -------------------------------------------------------------------------

    @property
    def persona(self) -> dict[str, str]:
        a = self.agent
        return {"role": a.role, "goal": a.goal, "backstory": a.backstory}

    @property
    def description(self) -> str:
        # An approved crew plan travels with the task; every step sees the whole plan as context:
        # the plan as it stands (a deviation's new steps, not the ones they replaced).
        if self.task.plan_steps and self.steps:
            current = [s.description for s in self.steps if s.status != "skipped"]
            numbered = "\n".join(f"{i}. {text}" for i, text in enumerate(current, 1))
            return self.book.render("task_plan", description=self.task.description, steps=numbered)
        return task_description(self.task, self.book)

    def tools_text(self) -> str:
        """Names, descriptions and argument schemas (ours: upstream sends names only)."""
        if not self.tools:
            return self.book.render("no_tools")
        registry = self.ctx.tools if self.ctx.tools is not None else default_registry()
        return registry.describe(self.tools)

    # -- events --------------------------------------------------------------------------------

    async def emit(self, type_: str, data: dict[str, Any], *, step_id: str | None = None) -> None:
        await self.ctx.emit(type_, data, step_id=step_id)

    async def warn(self, message: str) -> None:
        await self.emit("agent_plan.warning", {"message": message})


    async def run(self) -> str:
        if self.task.plan_steps:
            return await self.run_bound()
        try:
            first = self.plan_message()
            self.system_message()  # a broken system template fails here, before any call
        except PromptError as exc:
            await self.emit("agent_plan.failed", {"error": f"plan_prompt: {exc}"})
            return await self.fallback("")
        draft, steps = await self.make_plan(first, purpose="agent_plan")
        if draft is None:
            return await self.fallback("")
        if not draft.ready or not steps:
            return await self.fallback(plan_as_text(draft, self.book))
        self.steps = steps
        try:
            stopped_because = await self.execute()
        except (Cancelled, BudgetExceeded) as exc:
            await self.skip_unfinished("cancelled" if isinstance(exc, Cancelled) else str(exc))
            raise
        await self.skip_unfinished(stopped_because)
        return await self.answer()

    async def fallback(self, plan_text: str) -> str:
        """The plain ReAct loop, with the plan text kept in the prompt (ours)."""
        extra = self.book.render("fallback_plan", plan=plan_text) if plan_text else ""
        messages = build_task_messages(self.ctx, self.agent, self.task, extra=extra)
        result = await run_react_loop(
            self.ctx, self.agent, messages, max_iter=self.agent.max_iter, scope=self.scope
        )
        return result.output

    # -- execution -----------------------------------------------------------------------------

    def ready_steps(self) -> list[PlanStep]:
        # A failed dependency unblocks its dependents: the observer already judged it.
        done = {s.number for s in self.steps if s.done}
        return [
            s for s in self.steps if s.status == "pending" and all(d in done for d in s.depends_on)
        ]

    def exclusive(self, step: PlanStep) -> bool:
        """Steps whose tool asks a person or has a shared cap run alone, not side by side."""
        ref = self.tools.get(step.tool) if step.tool else None
        return ref is not None and (
            ref.needs_approval or ref.max_usage is not None or ref.result_as_answer
        )

    def next_batch(self) -> list[PlanStep]:
        ready = self.ready_steps()
        if not ready or self.exclusive(ready[0]):
            return ready[:1]
        return [s for s in ready if not self.exclusive(s)]

    async def execute(self) -> str:
        """Run batches of ready steps until none is left; returns why the rest is not run."""
        while batch := self.next_batch():
            if len(batch) == 1:
                await self.run_step(batch[0])
            else:
                await _gather(self.run_step(s) for s in batch)
            decision = Decision()
            for step in batch:
                await self.observe_and_decide(step, decision)
            if decision.goal_achieved:
                done = sum(1 for s in self.steps if s.done)
                left = sum(1 for s in self.steps if s.status == "pending")
                if self.task.plan_steps:
                    pending = [s.description for s in self.steps if s.status == "pending"]
                    await self.deviated("the goal was achieved early", pending, [])
                await self.emit(
                    "agent_plan.goal_achieved", {"steps_done": done, "steps_left": left}
                )
                return "the goal was already achieved"
            if decision.replan_reason is not None:
                if self.replans >= self.config.max_replans:
                    if self.task.plan_steps:
                        await self.warn(
                            f"a new plan was wanted ({decision.replan_reason}) but max_replans "
                            f"({self.config.max_replans}) is reached: the approved steps go on"
                        )
                        continue
                    await self.warn(
                        f"a replan was asked for ({decision.replan_reason}) but max_replans "
                        f"({self.config.max_replans}) is reached: finishing with what exists"
                    )
                    return "max_replans reached"
                if self.task.plan_steps and self.task.on_step_failure == "ask":
                    await self.ask_for_new_steps(decision.replan_reason)
                else:
                    await self.replan(decision.replan_reason)
        return "not executed"

    async def run_step(self, step: PlanStep) -> None:
        async with self.semaphore:
            step.status = "running"
            await self.emit(
                "step.started",
                {"step_id": step.id, "number": step.number, "description": step.description},
                step_id=step.id,
            )
            timeout = self.config.step_timeout
            deadline = self.ctx.clock.monotonic() + timeout if timeout is not None else None
            limit = self.config.max_step_iterations
            outcome: StepOutcome
            error: str | None = None
            context: Sequence[str] = self.task.context
            if self.ctx.knowledge is not None:
                # The task's sources searched again for this step (issue #19).
                context = await self.ctx.knowledge.for_step(
                    self.ctx, step_id=step.id, text=step.description, context=context
                )
            try:
                result = await run_react_loop(
                    self.ctx,
                    self.agent,
                    self.step_messages(step, context),
                    max_iter=limit,
                    purpose="step",
                    step_id=step.id,
                    scope=self.scope,
                    deadline=deadline,
                    force_final_answer=False,
                )
            except LLMError as exc:
                outcome, output, error = "failed", "", str(exc)
            else:
                outcome, output = result.outcome, result.output
                if outcome == "timed_out":
                    error = f"step timed out after {timeout:g}s" if timeout else "step timed out"
                elif outcome == "iteration_exhausted":
                    error = f"step used all {limit} iterations without a final answer"
                elif outcome == "failed":  # e.g. stuck on one reply: the loop says why
                    error = result.error or "the step failed"
                elif step.tool and step.tool not in result.tools_used:
                    outcome = "failed"
                    error = f"expected tool {step.tool!r} was not called for step {step.number}"
            step.outcome, step.result, step.error = outcome, output, error
            await self.emit(
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

    @functools.cached_property
    def system_for_steps(self) -> Message:
        return build_task_messages(self.ctx, self.agent, self.task)[0]

    def step_messages(self, step: PlanStep, context: Sequence[str] | None = None) -> list[Message]:
        """A fresh conversation: persona, task, earlier tasks' outputs (``context``: the task's,
        unless the step's search widened it), the step, its inputs."""
        book = self.book
        context = self.task.context if context is None else context
        by_number = {s.number: s for s in self.steps}
        blocks = []
        for number in step.depends_on:
            dep = by_number[number]
            values = {
                "number": number,
                "description": dep.description,
                "error": dep.error or dep.outcome,
                "result": dep.result or book.render("nothing"),
            }
            key = "step_result" if dep.status == "completed" else "step_dependency_failed"
            blocks.append(book.render(key, **values))
        current = book.render("step_current", number=step.number, description=step.description)
        if step.tool:
            current += "\n" + book.render("step_tool", tool=step.tool)
        if self.last_step_answers and step is self.steps[-1]:
            current += "\n\n" + book.render("step_last")
        none = book.render("none")
        text = book.render(
            "step_executor",
            **self.persona,
            description=self.description,
            expected_output=self.task.expected_output,
            context="\n\n".join(context) if context else none,
            dependency_results="\n\n".join(blocks) if blocks else none,
            step=current,
        )
        # ReAct's system prompt: the answer format, and the tool protocol in text mode.
        return [self.system_for_steps, {"role": "user", "content": text}]

    # -- observation and decision ----------------------------------------------------------------

    def observed_step(self, step: PlanStep, outcome: str) -> str:
        """The step under review; with its outcome when the template has no ``{outcome}`` of its
        own (one an admin edited before the placeholder existed must still hear of a failure)."""
        text = self.book.render("step_current", number=step.number, description=step.description)
        if "{outcome}" in self.book.text("observe"):
            return text
        return f"{text}\n{self.book.render('step_outcome', outcome=outcome)}"

    async def observe(self, step: PlanStep) -> Observation:
        heuristic = Observation(success=step.outcome == "completed", learned=step.error or "")
        if not self.config.llm_observes:
            return heuristic
        book = self.book
        remaining = [s for s in self.steps if s.status == "pending"]
        done = sorted((s for s in self.steps if s.done and s is not step), key=lambda s: s.number)
        outcome = step.outcome if step.error is None else f"{step.outcome} — {step.error}"
        try:
            prompt = book.render(
                "observe",
                description=self.description,
                expected_output=self.task.expected_output,
                # Upstream's cut: earlier results in short, the step under review in full.
                completed_steps="\n\n".join(result_block(s, book, clip=200) for s in done)
                or book.render("none"),
                step=self.observed_step(step, outcome),
                outcome=outcome,
                result=step.result or book.render("no_result"),
                remaining_steps=steps_as_text(remaining, book) or book.render("none"),
            )
            request = LLMRequest(
                llm=self.plan_llm, messages=[{"role": "user", "content": prompt}], purpose="observe"
            )
            shape = Shape(name="step_review", schema=OBSERVATION_SCHEMA)
            answer = await ask_structured(self.ctx.llm, request, shape, step_id=step.id, scope=self.scope)
            response = answer.response
        except (LLMError, PromptError) as exc:
            # Upstream's policy, made visible: a failed review assumes the step went well.
            return Observation(
                success=True, learned=f"review failed: {exc}", reviewed=True, review_failed=True
            )
        parsed = parse_observation(response.content)
        if parsed is None:
            return Observation(
                success=False, learned=response.content, plan_valid=False, reviewed=True
            )
        return parsed

    async def observe_and_decide(self, step: PlanStep, decision: Decision) -> None:
        seen = await self.observe(step)
        step.status = "completed" if seen.success else "failed"
        if not seen.success and step.error is None:
            step.error = seen.learned or "the review judged the step unsuccessful"
        await self.emit(
            "step.observed",
            {"step_id": step.id, "number": step.number, **seen.as_data()},
            step_id=step.id,
        )
        if self.task.plan_steps:
            await self.decide_bound(step, seen, decision)
            return
        effort = self.config.reasoning_effort
        if effort == "low" and self.config.observe_steps is True and not decision.goal_achieved:
            # Seed 002: an LLM review that judges a failed step in need of a new plan is heeded
            # at low effort too; low never replans on its own judgement.
            if not seen.success and seen.needs_replan and decision.replan_reason is None:
                decision.replan_reason = (
                    seen.replan_reason or f"step {step.number} did not complete successfully"
                )
            return
        if effort == "low" or decision.goal_achieved:
            return
        reason = seen.replan_reason or f"step {step.number} did not complete successfully"
        if effort == "medium":
            if not seen.success and seen.needs_replan and decision.replan_reason is None:
                decision.replan_reason = reason
            return
        if seen.goal_achieved:
            decision.goal_achieved = True
        elif not seen.success or seen.needs_replan:
            if decision.replan_reason is None:
                decision.replan_reason = reason
        elif seen.refinements:
            await self.refine_pending(seen.refinements, step)

    async def replace_pending(self, steps: list[PlanStep], reason: str) -> None:
        for old in self.steps:
            if old.status == "pending":
                old.status = "skipped"
                await self.emit(
                    "step.skipped",
                    {"step_id": old.id, "number": old.number, "reason": reason},
                    step_id=old.id,
                )
        self.steps.extend(steps)

    async def refine_pending(
        self, refinements: Sequence[Mapping[str, Any]], after: PlanStep
    ) -> None:
        """Rewrite pending steps' text in place: no LLM call, done or running steps untouched."""
        pending = {s.number: s for s in self.steps if s.status == "pending"}
        applied = []
        for item in refinements:
            target = pending.get(item["number"])
            if target is not None:
                target.description = item["text"]
                applied.append(
                    {"step_id": target.id, "number": target.number, "text": target.description}
                )
        if applied:
            await self.emit(
                "agent_plan.refined", {"refinements": applied, "after_step": after.number}
            )

    async def replan(self, reason: str) -> None:
        before = [s.description for s in self.steps if s.status == "pending"]
        steps = await self.propose_steps(reason)
        if steps is None:
            await self.warn("replanning gave no usable plan: the current plan goes on")
            return
        if self.task.plan_steps:
            # An approved plan's steps run in order, each seeing every result before it: so do
            # the ones that replace its rest.
            done = tuple(s.number for s in self.steps if s.done)
            for i, new in enumerate(steps):
                new.depends_on = done + tuple(s.number for s in steps[:i])
        await self.replace_pending(steps, "replaced by a new plan")
        if self.task.plan_steps:
            await self.deviated(reason, before, [s.description for s in steps], steps=steps)

    # -- the answer ----------------------------------------------------------------------------

    async def skip_unfinished(self, reason: str) -> None:
        for step in self.steps:
            # A step that reported step.completed but was stopped before its review stays as is.
            if step.status == "pending" or (step.status == "running" and step.outcome is None):
                step.status = "skipped"
                await self.emit(
                    "step.skipped",
                    {"step_id": step.id, "number": step.number, "reason": reason},
                    step_id=step.id,
                )

    async def answer(self) -> str:
        executed = [s for s in self.steps if s.done]
        last = max(executed, key=lambda s: s.number, default=None)
        if (
            last is not None
            and last.status == "completed"
            and self.task.output_json_schema is None
            and (is_full_answer(last) or (self.last_step_answers and last is self.steps[-1]))
        ):
            return last.result
        ordered = sorted(executed, key=lambda s: s.number)
        blocks = "\n\n".join(result_block(s, self.book) for s in ordered)
        purpose = "synthesis"
        if self.agent.agent_type == "plan_execute":
            # ENGINE.md §4: one aggregation call keeps finished artefacts verbatim.
            purpose = "aggregate"
            prompt = self.book.render("plan_execute_aggregate", description=self.description,
                                      step_outputs=blocks or self.book.render("no_step_results"))
        else:
            prompt = self.book.render(
                "synthesis",
                **self.persona,
                description=self.description,
                expected_output=self.task.expected_output,
                step_results=blocks or self.book.render("no_step_results"),
            )
        request = LLMRequest(
            llm=self.agent.llm,
            messages=[{"role": "user", "content": prompt}],
            purpose=purpose,
            stream=self.agent.llm.stream,
        )
        schema = self.task.output_json_schema
        try:
            if schema is None:
                response: LLMResponse = await self.ctx.llm.call(request, scope=self.scope)
            else:  # the answer's form negotiated with the LLM, the schema in words where needed
                text = self.book.render("json_answer", schema=json.dumps(schema, ensure_ascii=False))
                shape = Shape(name=purpose, schema=schema, instructions=text)
                response = (await ask_structured(self.ctx.llm, request, shape, scope=self.scope)).response
        except LLMError as exc:
            await self.warn(f"synthesis failed ({exc}): returning the step results as they are")
            return blocks
        return response.content


async def _gather(coros: Iterable[Coroutine[Any, Any, None]]) -> None:
    """Run step coroutines together; the first Cancelled or BudgetExceeded stops the others."""
    try:
        async with asyncio.TaskGroup() as group:
            for coro in coros:
                group.create_task(coro)
    except BaseExceptionGroup as group_error:
        # Callers expect the engine's own exceptions, not a group; cancellation wins over a budget.
        errors = list(group_error.exceptions)
        first = next((e for e in errors if isinstance(e, Cancelled)), errors[0])
        raise first from None


async def run_plan_and_act(
    ctx: RunContext,
    agent: AgentSpec,
    task: TaskSpec,
    config: PlanningConfigSpec,
    *,
    scope: BudgetScope | None = None,
) -> str:
    """Plan the task, execute and observe its steps, replan when the effort level says so."""
    return await PlanAndAct(ctx, agent, task, config, scope or agent_scope(agent)).run()


async def run_approved_steps(
    ctx: RunContext, agent: AgentSpec, task: TaskSpec, *, scope: BudgetScope | None = None
) -> str:
    """Carry out ``task.plan_steps``, an approved crew plan, for any agent kind (ENGINE.md §2b).

    A Plan-and-Act agent keeps its observation and effort; a ReAct or plan-execute agent runs
    each step with its own iteration limit and judges a step by its outcome, replanning only as
    ``on_step_failure`` allows (within ``max_replans``, default 3).
    """
    config = agent.effective_planning
    if config is None or agent.agent_type == "plan_execute":
        config = PlanningConfigSpec(
            reasoning_effort="low", observe_steps=False, max_step_iterations=agent.max_iter
        )
    runner = PlanAndAct(ctx, agent, task, config, scope or agent_scope(agent))
    # A ReAct agent answers in its last step; plan-execute merges its steps (ENGINE.md §4).
    runner.last_step_answers = agent.effective_planning is None and agent.agent_type != "plan_execute"
    return await runner.run_bound()


def agent_scope(agent: AgentSpec) -> BudgetScope | None:
    """The agent's own budget when a caller passed none (``run_agent`` always passes one)."""
    if agent.budget == Budget():
        return None
    return BudgetScope(agent.budget, Usage(), "agent")
