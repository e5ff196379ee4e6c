"""The crew planner: one LLM call drafts numbered steps for every task (ENGINE.md §1)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.engine.guardrails import describe_checks
from agents.engine.llm import LLMRequest, LLMResponse, Message
from agents.engine.plan_parsing import extract_json_array, extract_json_object, is_placeholder_step
from agents.engine.prompts import PromptBook
from agents.engine.runtime import RunContext
from agents.engine.specs import LLMSpec
from agents.engine.structured import Shape, ask_structured
from agents.engine.tools import ToolRegistry, default_registry
from crews.engine.knowledge import KnowledgeBase, planner_view
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
    # The warnings about one task, by its key: what the plan page shows at that task.
    task_warnings: dict[str, list[str]] = field(default_factory=dict)


def task_summary(
    crew: CrewSpec, task: CrewTaskSpec, tools: ToolRegistry | None, book: PromptBook | None = None,
    knowledge: str | None = None,
) -> str:
    """One task as the planner sees it: texts, agent persona, tools with schemas, context tasks,
    and ``knowledge``, its sources' titles and the crew's best passages (``knowledge.planner_view``)."""
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
    if task.output_schema is not None:
        schema = json.dumps(task.output_schema, ensure_ascii=False)
        lines.append(book.render("crew_plan_task_output_schema", schema=schema))
    if task.guardrails.active:
        lines.append(book.render("crew_plan_task_checks", checks=describe_checks(task.guardrails)))
    if knowledge:
        lines.append(knowledge)
    return "\n".join(lines)


def _messages(
    crew: CrewSpec,
    tasks: Sequence[CrewTaskSpec],
    book: PromptBook,
    tools: ToolRegistry | None,
    feedback: str | None,
    keep: Mapping[str, Sequence[str]] | None,
    knowledge: Mapping[str, str] | None = None,
) -> list[Message]:
    blocks = [task_summary(crew, t, tools, book, (knowledge or {}).get(t.key)) for t in tasks]
    text = book.render("crew_plan", tasks="\n\n".join(blocks))
    for task in tasks:
        kept = (keep or {}).get(task.key) or ()
        if kept:
            listing = "\n".join(f"- {s}" for s in kept)
            text += "\n\n" + book.render("crew_plan_keep", number=task.number, steps=listing)
    if feedback:
        text += "\n\n" + book.render("crew_plan_feedback", feedback=feedback)
    return [{"role": "user", "content": text}]


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


def map_plans(plans: Iterable[dict[str, Any]], tasks: Sequence[CrewTaskSpec]) -> CrewPlanDraft:
    """Plans by task number: duplicates keep the first, out-of-range ones are ignored, placeholder
    steps (the prompt's own ``"..."``, empty text) are left out; each with a warning, and the
    warnings about one task also under its key (the plan page shows them at the task)."""
    by_number = {t.number: t for t in tasks}
    draft = CrewPlanDraft(steps={})

    def warn(message: str, task: CrewTaskSpec | None = None) -> None:
        draft.warnings.append(message)
        if task is not None:
            draft.task_warnings.setdefault(task.key, []).append(message)

    for plan in plans:
        task = by_number.get(plan["task_number"])
        if task is None:
            warn(f"The planner wrote steps for task {plan['task_number']}, which does not exist; ignored.")
            continue
        if task.key in draft.steps:
            warn(f"The planner wrote task {task.number} twice; the first version is kept.", task)
            continue
        steps = [s for s in plan["steps"] if not is_placeholder_step(s)]
        if len(steps) < len(plan["steps"]):
            dropped = len(plan["steps"]) - len(steps)
            warn(f"The planner wrote {dropped} placeholder step(s) for task {task.number} (like \"...\"); "
                 "they were left out.", task)
        if steps:
            draft.steps[task.key] = steps
    for task in tasks:
        if task.key not in draft.steps:
            warn(f"The planner wrote no steps for task {task.number}; it will run without a plan.", task)
    return draft


# At most this many requests draft a plan, a refused form of request and the repair included: a
# model that cannot answer with a plan in three tries will not in ten (issue #14).
MAX_PLAN_REQUESTS = 3


async def draft_crew_plan(
    ctx: RunContext,
    crew: CrewSpec,
    *,
    llm: LLMSpec,
    only_tasks: Iterable[str] | None = None,
    feedback: str | None = None,
    keep: Mapping[str, Sequence[str]] | None = None,
    knowledge: KnowledgeBase | None = None,
) -> CrewPlanDraft:
    """Draft steps for the crew's tasks (or ``only_tasks``), emitting crew_plan.* events.

    The request negotiates its form with the LLM (``structured.ask_structured``: a tool call,
    a JSON schema, JSON mode, then JSON asked for in words). An answer that is not valid JSON for
    the schema, has no usable step, or was cut off at its length limit gets one repair request
    (a cut-off one with twice the room, asking for fewer steps; the LLM's own ``max_tokens``
    param still caps it, and the warning says so), within ``MAX_PLAN_REQUESTS``. A cut-off draft
    that could be read is kept, with its warning, when the repair gives nothing usable; else
    ``CrewPlanError`` after ``crew_plan.failed``, saying plainly why. ``keep`` lists steps
    (pinned by a person) the planner must not repeat. With ``knowledge``, each task's listing
    names the sources its agent reads and the best passages of the crew's shared sources for it
    (issue #19): one request holds every task, so no agent's own passages go into it.
    ``crew_plan.completed`` is the caller's: it knows the saved plan.
    """
    book = ctx.prompts or PromptBook()
    tools = ctx.tools if isinstance(ctx.tools, ToolRegistry) else default_registry()
    wanted = set(only_tasks) if only_tasks is not None else None
    tasks = [t for t in crew.tasks if wanted is None or t.key in wanted]
    await ctx.emit("crew_plan.started", {"tasks": [t.number for t in tasks]})
    views: dict[str, str] = {}
    if knowledge is not None:
        for task in tasks:
            agent = crew.agent(task.agent_key)
            view = await planner_view(knowledge, book, task, agent.key if agent is not None else None)
            if view is not None:
                views[task.key] = view
    messages = _messages(crew, tasks, book, tools, feedback, keep, views)
    request = LLMRequest(llm=llm, messages=messages, purpose="crew_plan")
    sent, error, answered_prose = 0, "", True
    kept: CrewPlanDraft | None = None  # a parseable answer that was cut off, kept if the repair fails
    for attempt in (1, 2):
        answer = await ask_structured(ctx.llm, request, PLAN_SHAPE)
        sent += answer.requests
        response = answer.response
        cut_off = response.finish_reason == "length"
        try:
            plans = parse_plan(response)
            draft = map_plans(plans, tasks)
            if tasks and not draft.steps:
                raise ValueError("no task got a usable step (only placeholders or none)")
        except ValueError as exc:
            error = str(exc)
            answered_prose = answered_prose and _is_prose(response)
        else:
            if not cut_off or attempt == 2 or sent >= MAX_PLAN_REQUESTS:
                if cut_off:
                    draft.warnings.insert(0, _cut_off_warning(llm, response))
                for warning in draft.warnings:
                    await ctx.emit("crew_plan.warning", {"message": warning})
                return draft
            kept = dataclasses.replace(draft, warnings=[_cut_off_warning(llm, response), *draft.warnings])
            answered_prose = False
        if attempt == 2 or sent >= MAX_PLAN_REQUESTS:
            break
        said = {"role": "assistant", "content": response.content or _tool_args(response, book)}
        if cut_off:
            # Twice the room it had (its answer's length), and fewer steps asked for.
            room = response.completion_tokens * 2 if response.completion_tokens else None
            repair = book.render("crew_plan_cut_off")
            request = dataclasses.replace(request, max_tokens=room or request.max_tokens)
            answered_prose = False
        else:
            repair = book.render("crew_plan_repair", error=error)
        request = dataclasses.replace(
            request, messages=[*request.messages, said, {"role": "user", "content": repair}]
        )
    if kept is not None:
        # The repair gave nothing usable: the cut-off draft is better than none.
        for warning in kept.warnings:
            await ctx.emit("crew_plan.warning", {"message": warning})
        return kept
    if answered_prose:
        message = PROSE_FAILURE
    elif cut_off:
        message = "The planner's answer was cut off at its length limit twice; no plan could be read from it."
        if (own := _own_max_tokens(llm)) is not None:
            message += " " + OWN_CAP_NOTE.format(own=own)
    else:
        message = f"The planner's answer could not be used: {error}."
    await ctx.emit("crew_plan.failed", {"error": message})
    raise CrewPlanError(message)


PLAN_SHAPE = Shape(
    name=SUBMIT_TOOL,
    schema=PLAN_SCHEMA,
    description="Submit the step-by-step plan for every task.",
    tool=True,
)
CUT_OFF_WARNING = (
    "The planner's answer was cut off at its length limit: the last task's steps may be incomplete."
)
PROSE_FAILURE = (
    "The planning model answered in prose instead of the JSON plan it was asked for, so no plan "
    "could be drafted. A model this small may not be able to plan: choose another planning LLM, "
    "or let the crew run without a plan."
)


# Said when the LLM's own max_tokens param caps the planner's answer: the repair's larger cap
# cannot pass it (the admin's setting, and what a cost budget prices, wins over the planner's).
OWN_CAP_NOTE = (
    "This LLM's own max_tokens setting ({own}) limits its answers, so asking again could not give "
    "it more room: raise it on the LLM's page for a longer plan."
)


def _own_max_tokens(llm: LLMSpec) -> int | None:
    """The LLM's own ``max_tokens`` / ``max_completion_tokens`` param, if it sets one."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = llm.params.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _cut_off_warning(llm: LLMSpec, response: LLMResponse) -> str:
    """``CUT_OFF_WARNING``, saying so when the LLM's own cap left the repair no more room."""
    own = _own_max_tokens(llm)
    if own is not None and (not response.completion_tokens or response.completion_tokens * 2 > own):
        return f"{CUT_OFF_WARNING} {OWN_CAP_NOTE.format(own=own)}"
    return CUT_OFF_WARNING


def _is_prose(response: LLMResponse) -> bool:
    """An answer with no JSON in it at all: a model that did not try the format."""
    if response.tool_calls:
        return False
    text = response.content or ""
    return extract_json_object(text) is None and extract_json_array(text) is None


def _tool_args(response: LLMResponse, book: PromptBook) -> str:
    return "\n".join(c.arguments for c in response.tool_calls) or book.render("empty_answer")
