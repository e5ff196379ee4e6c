"""The crew planner: one LLM call drafts numbered steps for every task (ENGINE.md §1)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.engine.llm import LLMRequest, LLMResponse, Message
from agents.engine.plan_parsing import extract_json_object
from agents.engine.prompts import PromptBook
from agents.engine.runtime import RunContext
from agents.engine.specs import LLMSpec
from agents.engine.tools import ToolRegistry, default_registry
from crews.engine.specs import CrewSpec, CrewTaskSpec

SUBMIT_TOOL = "submit_crew_plan"
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "plans": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "task_number": {"type": "integer", "minimum": 1},
                    "steps": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["task_number", "steps"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["plans"],
    "additionalProperties": False,
}


class CrewPlanError(Exception):
    """The planner did not produce a usable plan, even after one repair attempt."""


@dataclass
class CrewPlanDraft:
    steps: dict[str, list[str]]  # task key -> steps, for the tasks that got a plan
    warnings: list[str] = field(default_factory=list)


def task_summary(
    crew: CrewSpec, task: CrewTaskSpec, tools: ToolRegistry | None, book: PromptBook | None = None
) -> str:
    """One task as the planner sees it: texts, agent persona, tools with schemas, context tasks."""
    book = book or PromptBook()
    agent = crew.agent(task.agent_key)
    name = task.name or book.render("crew_plan_task_unnamed", number=task.number)
    lines = [
        book.render(
            "crew_plan_task",
            number=task.number,
            name=name,
            description=task.description,
            expected_output=task.expected_output,
        )
    ]
    if agent is not None:
        lines.append(book.render("crew_plan_task_agent", role=agent.role, goal=agent.goal))
        if agent.backstory:
            lines.append(book.render("crew_plan_task_backstory", backstory=agent.backstory))
        names = [t.name for t in agent.tools]
        if names and tools is not None:
            lines.append(book.render("crew_plan_task_tools", tools=tools.describe(names)))
        else:
            lines.append(book.render("crew_plan_task_no_tools"))
    else:
        lines.append(book.render("crew_plan_task_manager"))
    if task.context_keys:
        numbers = [str(t.number) for t in crew.tasks if t.key in task.context_keys]
        lines.append(book.render("crew_plan_task_context", tasks=", ".join(numbers)))
    return "\n".join(lines)


def _messages(
    crew: CrewSpec,
    tasks: Sequence[CrewTaskSpec],
    book: PromptBook,
    tools: ToolRegistry | None,
    feedback: str | None,
    keep: Mapping[str, Sequence[str]] | None,
) -> list[Message]:
    blocks = [task_summary(crew, t, tools, book) for t in tasks]
    text = book.render("crew_plan", tasks="\n\n".join(blocks))
    for task in tasks:
        kept = (keep or {}).get(task.key) or ()
        if kept:
            listing = "\n".join(f"- {s}" for s in kept)
            text += "\n\n" + book.render("crew_plan_keep", number=task.number, steps=listing)
    if feedback:
        text += "\n\n" + book.render("crew_plan_feedback", feedback=feedback)
    return [{"role": "user", "content": text}]


def _submit_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": SUBMIT_TOOL,
            "description": "Submit the step-by-step plan for every task.",
            "parameters": PLAN_SCHEMA,
        },
    }


def parse_plan(response: LLMResponse) -> list[dict[str, Any]]:
    """The ``plans`` list from a tool call or from JSON in text; ValueError says what is wrong."""
    data: Any = None
    for call in response.tool_calls:
        if call.name == SUBMIT_TOOL:
            try:
                data = json.loads(call.arguments or "{}")
            except json.JSONDecodeError:
                data = extract_json_object(call.arguments or "", "plans")
            break
    if data is None:
        data = extract_json_object(response.content or "", "plans")
    if not isinstance(data, dict) or not isinstance(data.get("plans"), list):
        raise ValueError('expected an object {"plans": [{"task_number": 1, "steps": ["..."]}]}')
    plans: list[dict[str, Any]] = []
    for index, item in enumerate(data["plans"], start=1):
        if not isinstance(item, dict):
            raise ValueError(f"plans[{index}] is not an object")
        number, steps = item.get("task_number"), item.get("steps")
        if isinstance(number, str) and number.strip().isdigit():
            number = int(number)
        if not isinstance(number, int) or isinstance(number, bool):
            raise ValueError(f"plans[{index}].task_number is not a whole number")
        if isinstance(steps, str):
            steps = [s.strip(" -*\t") for s in steps.splitlines() if s.strip(" -*\t")]
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise ValueError(f"plans[{index}].steps is not a list of texts")
        plans.append({"task_number": number, "steps": [s.strip() for s in steps if s.strip()]})
    return plans


def map_plans(
    plans: Iterable[dict[str, Any]], tasks: Sequence[CrewTaskSpec]
) -> tuple[dict[str, list[str]], list[str]]:
    """Plans by task number: duplicates keep the first, out-of-range ones are ignored."""
    by_number = {t.number: t for t in tasks}
    steps: dict[str, list[str]] = {}
    warnings: list[str] = []
    for plan in plans:
        task = by_number.get(plan["task_number"])
        if task is None:
            warnings.append(f"The planner wrote steps for task {plan['task_number']}, which does not exist; ignored.")
            continue
        if task.key in steps:
            warnings.append(f"The planner wrote task {task.number} twice; the first version is kept.")
            continue
        steps[task.key] = plan["steps"]
    for task in tasks:
        if task.key not in steps:
            warnings.append(f"The planner wrote no steps for task {task.number}; it will run without a plan.")
    return steps, warnings


async def draft_crew_plan(
    ctx: RunContext,
    crew: CrewSpec,
    *,
    llm: LLMSpec,
    only_tasks: Iterable[str] | None = None,
    feedback: str | None = None,
    keep: Mapping[str, Sequence[str]] | None = None,
) -> CrewPlanDraft:
    """Draft steps for the crew's tasks (or ``only_tasks``), emitting crew_plan.* events.

    An answer that is not valid JSON for the schema gets one repair request; a second failure
    raises ``CrewPlanError`` after ``crew_plan.failed``. ``keep`` lists steps (pinned by a person)
    the planner must not repeat. ``crew_plan.completed`` is the caller's: it knows the saved plan.
    """
    book = ctx.prompts or PromptBook()
    tools = ctx.tools if isinstance(ctx.tools, ToolRegistry) else default_registry()
    wanted = set(only_tasks) if only_tasks is not None else None
    tasks = [t for t in crew.tasks if wanted is None or t.key in wanted]
    await ctx.emit("crew_plan.started", {"tasks": [t.number for t in tasks]})
    messages = _messages(crew, tasks, book, tools, feedback, keep)
    native = llm.supports_tools
    request_kwargs: dict[str, Any] = (
        {"tools": [_submit_tool()], "tool_choice": {"type": "function", "function": {"name": SUBMIT_TOOL}}}
        if native
        else {"response_schema": PLAN_SCHEMA}
    )
    error = ""
    for attempt in (1, 2):
        response = await ctx.llm.call(
            LLMRequest(llm=llm, messages=messages, purpose="crew_plan", **request_kwargs)
        )
        try:
            plans = parse_plan(response)
        except ValueError as exc:
            error = str(exc)
            if attempt == 2:
                break
            messages = [
                *messages,
                {"role": "assistant", "content": response.content or _tool_args(response, book)},
                {"role": "user", "content": book.render("crew_plan_repair", error=error)},
            ]
            continue
        steps, warnings = map_plans(plans, tasks)
        for warning in warnings:
            await ctx.emit("crew_plan.warning", {"message": warning})
        return CrewPlanDraft(steps=steps, warnings=warnings)
    message = f"The planner's answer could not be used: {error}."
    await ctx.emit("crew_plan.failed", {"error": message})
    raise CrewPlanError(message)


def _tool_args(response: LLMResponse, book: PromptBook) -> str:
    return "\n".join(c.arguments for c in response.tool_calls) or book.render("empty_answer")
