"""Agent-level Plan-and-Act (ENGINE.md §2): plan, run steps in isolation, observe, decide, replan."""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.llm import LLMError, LLMRequest, LLMResponse, Message, ToolsUnsupportedError
from agents.engine.prompts import PromptBook, PromptError, render
from agents.engine.react import build_task_messages, run_react_loop, task_description
from agents.engine.runtime import Cancelled, RunContext, Usage
from agents.engine.specs import (
    PLAN_PROMPT_PLACEHOLDERS,
    REFINE_PROMPT_PLACEHOLDERS,
    AgentSpec,
    Budget,
    PlanningConfigSpec,
    TaskSpec,
    ToolRef,
)
from agents.engine.tools import default_registry, match_tool_name

MAX_PARALLEL_STEPS = 4  # ours: upstream runs every ready step at once
PLAN_TOOL_NAME = "create_plan"

StepStatus = Literal["pending", "running", "completed", "failed", "skipped"]
StepOutcome = Literal["completed", "failed", "timed_out", "iteration_exhausted"]

_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "number": {"type": "integer", "description": "1-based position of the step"},
        "description": {"type": "string", "description": "the concrete action and its result"},
        "tool": {
            "type": ["string", "null"],
            "description": "the tool this step uses, or null",
        },
        "depends_on": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "numbers of earlier steps whose results this step needs",
        },
    },
    "required": ["number", "description", "tool", "depends_on"],
    "additionalProperties": False,
}

PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "plan": {"type": "string", "description": "a brief summary of the plan"},
        "steps": {"type": "array", "items": _STEP_SCHEMA},
        "ready": {"type": "boolean", "description": "whether you are ready to execute it"},
    },
    "required": ["plan", "steps", "ready"],
    "additionalProperties": False,
}

PLAN_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": PLAN_TOOL_NAME,
        "description": "Create or refine the plan for the task as structured steps.",
        "parameters": PLAN_SCHEMA,
    },
}

OBSERVATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "success": {"type": "boolean"},
        "learned": {"type": "string"},
        "plan_valid": {"type": "boolean"},
        "refinements": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"number": {"type": "integer"}, "text": {"type": "string"}},
                "required": ["number", "text"],
                "additionalProperties": False,
            },
        },
        "needs_replan": {"type": "boolean"},
        "replan_reason": {"type": "string"},
        "goal_achieved": {"type": "boolean"},
    },
    "required": [
        "success",
        "learned",
        "plan_valid",
        "refinements",
        "needs_replan",
        "replan_reason",
        "goal_achieved",
    ],
    "additionalProperties": False,
}


# --- tolerant parsing -------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_MAX_JSON_STARTS = 64  # bounds the scan of a long prose reply full of braces


def _scan_json(
    text: str, opener: str, accept: Callable[[Any], bool]
) -> tuple[Any, int, int] | None:
    start = text.find(opener)
    tries = 0
    while start != -1 and tries < _MAX_JSON_STARTS:
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            pass
        else:
            if accept(value):
                return value, start, end
        start = text.find(opener, start + 1)
    return None


@dataclass(slots=True)
class _Found:
    value: Any
    prose: str  # the text around the JSON value


def _find_json(text: str, opener: str, accept: Callable[[Any], bool]) -> _Found | None:
    """The first JSON value opening with ``opener`` that ``accept`` likes, fences and prose allowed.

    Models wrap JSON in prose and fences and leave trailing commas; a second pass without those
    commas catches the last case.
    """
    found = _scan_json(text, opener, accept)
    if found is None and _TRAILING_COMMA.search(text):
        text = _TRAILING_COMMA.sub(r"\1", text)
        found = _scan_json(text, opener, accept)
    if found is None:
        return None
    value, start, end = found
    return _Found(value, text[:start] + text[end:])


def extract_json_object(text: str, *keys: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` holding one of ``keys`` (any object if none given)."""
    found = _find_json(
        text, "{", lambda v: isinstance(v, dict) and (not keys or any(k in v for k in keys))
    )
    return found.value if found else None


def extract_json_array(
    text: str, accept: Callable[[list[Any]], bool] | None = None
) -> list[Any] | None:
    """The first JSON array in ``text`` that ``accept`` likes (fences and prose tolerated)."""
    found = _find_json(text, "[", lambda v: isinstance(v, list) and (accept is None or accept(v)))
    return found.value if found else None


_NOT_READY = re.compile(
    r"(?:\bnot|n't|\bnever)\s+(?:yet\s+|quite\s+|fully\s+|entirely\s+)?ready\b"
    r"|\bnot[_-]ready\b|\bunready\b",
    re.IGNORECASE,
)
_READY = re.compile(r"\bready\b", re.IGNORECASE)


def read_verdict(text: str) -> bool | None:
    """READY / NOT READY in any phrasing; NOT READY wins when both appear; ``None`` if neither."""
    if _NOT_READY.search(text):
        return False
    if _READY.search(text):
        return True
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "yes", "y", "1", "ready"):
            return True
        if lowered in ("false", "no", "n", "0", "not ready"):
            return False
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        match = re.search(r"-?\d+", value)
        if match:
            return int(match.group(0))
    return None


def _as_ints(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value] if value not in (None, "") else []
    return [n for n in (_as_int(v) for v in items) if n is not None]


def _as_tool(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    name = value.strip()
    return None if name.lower() in ("", "none", "null", "n/a", "no tool") else name


# --- plans and steps --------------------------------------------------------------------------


@dataclass(slots=True)
class DraftStep:
    """A step as the planner wrote it, before numbering and repair."""

    number: int
    description: str
    tool: str | None = None
    depends_on: list[int] = field(default_factory=list)


@dataclass(slots=True)
class DraftPlan:
    text: str
    steps: list[DraftStep]
    ready: bool


def draft_from_dict(data: Mapping[str, Any], *, default_ready: bool = True) -> DraftPlan:
    """Read ``{plan, steps, ready}`` leniently; upstream names and bare strings are accepted."""
    raw_steps = data.get("steps") or []
    if isinstance(raw_steps, dict):
        raw_steps = [raw_steps]
    if not isinstance(raw_steps, list):
        raw_steps = []
    steps: list[DraftStep] = []
    for index, raw in enumerate(raw_steps, start=1):
        if isinstance(raw, str):
            steps.append(DraftStep(number=index, description=raw.strip()))
            continue
        if not isinstance(raw, dict):
            continue
        number = _as_int(raw.get("number", raw.get("step_number", raw.get("step"))))
        text = raw.get("description", raw.get("action", raw.get("text", "")))
        steps.append(
            DraftStep(
                number=number if number is not None else index,
                description=str(text or "").strip(),
                tool=_as_tool(raw.get("tool", raw.get("tool_to_use"))),
                depends_on=_as_ints(raw.get("depends_on", raw.get("dependencies"))),
            )
        )
    ready = _as_bool(data.get("ready"))
    summary = data.get("plan")
    text = summary.strip() if isinstance(summary, str) else ""
    return DraftPlan(
        text=text or _steps_as_text(steps),
        steps=steps,
        # A missing flag means ready (upstream #3466): the model gave steps and no objection.
        ready=default_ready if ready is None else ready,
    )


def parse_plan_text(text: str) -> DraftPlan:
    """A plan from a text reply: JSON anywhere in it, else the prose itself without steps."""
    found = _find_json(text, "{", lambda v: isinstance(v, dict) and ("steps" in v or "plan" in v))
    if found is None:
        return DraftPlan(text=text.strip(), steps=[], ready=read_verdict(text) is True)
    draft = draft_from_dict(found.value)
    if read_verdict(found.prose) is False:
        draft.ready = False
    return draft


def parse_plan_response(response: LLMResponse) -> DraftPlan:
    for call in response.tool_calls:
        if call.name != PLAN_TOOL_NAME:
            continue
        try:
            args = json.loads(call.arguments or "{}")
        except ValueError:
            args = extract_json_object(call.arguments, "steps", "plan")
        if isinstance(args, dict):
            return draft_from_dict(args)
        return DraftPlan(text=call.arguments, steps=[], ready=False)
    # Some providers answer in text despite the forced tool choice.
    return parse_plan_text(response.content)


def _steps_as_text(steps: Iterable[DraftStep | PlanStep], book: PromptBook | None = None) -> str:
    book = book or PromptBook()
    lines = []
    for step in steps:
        line = f"{step.number}. {step.description}"
        if step.tool:
            line += " " + book.render("plan_step_tool", tool=step.tool)
        if step.depends_on:
            after = ", ".join(str(d) for d in step.depends_on)
            line += " " + book.render("plan_step_after", steps=after)
        lines.append(line)
    return "\n".join(lines)


def plan_as_text(draft: DraftPlan, book: PromptBook | None = None) -> str:
    """The summary and its numbered steps: what refinement, replanning and the fallback see."""
    listing = _steps_as_text(draft.steps, book)
    if not listing or listing == draft.text:
        return draft.text
    return f"{draft.text}\n\n{listing}" if draft.text else listing


@dataclass(slots=True)
class PlanStep:
    """One executable step; keyed by its unique id, never by its number alone."""

    id: str
    number: int
    description: str
    tool: str | None = None
    depends_on: tuple[int, ...] = ()
    status: StepStatus = "pending"
    outcome: StepOutcome | None = None
    result: str = ""
    error: str | None = None

    def as_data(self) -> dict[str, Any]:
        return {
            "step_id": self.id,
            "number": self.number,
            "description": self.description,
            "tool": self.tool,
            "depends_on": list(self.depends_on),
        }

    @property
    def done(self) -> bool:
        return self.status in ("completed", "failed")


@dataclass(slots=True)
class Observation:
    success: bool
    learned: str = ""
    plan_valid: bool = True
    refinements: list[dict[str, Any]] = field(default_factory=list)
    needs_replan: bool = False
    replan_reason: str = ""
    goal_achieved: bool = False
    reviewed: bool = False  # an LLM reviewed the step (else: the step's own outcome)
    review_failed: bool = False  # the review call failed; success is assumed

    def as_data(self) -> dict[str, Any]:
        return {
            "success": self.success,
            "learned": self.learned,
            "plan_valid": self.plan_valid,
            "needs_replan": self.needs_replan,
            "replan_reason": self.replan_reason,
            "goal_achieved": self.goal_achieved,
            "refinements": self.refinements,
            "reviewed": self.reviewed,
            "review_failed": self.review_failed,
        }


def parse_observation(text: str) -> Observation | None:
    """The review JSON of ENGINE.md §2.3 (upstream field names accepted); ``None`` if unreadable."""
    data = extract_json_object(text, "success", "step_completed_successfully")
    if data is None:
        return None
    success = _as_bool(data.get("success", data.get("step_completed_successfully")))
    if success is None:
        return None
    raw_refinements = data.get("refinements", data.get("suggested_refinements")) or []
    if isinstance(raw_refinements, dict):
        raw_refinements = [raw_refinements]
    refinements: list[dict[str, Any]] = []
    for item in raw_refinements if isinstance(raw_refinements, list) else []:
        if not isinstance(item, dict):
            continue
        number = _as_int(item.get("number", item.get("step_number")))
        text_ = item.get("text", item.get("new_description"))
        if number is not None and isinstance(text_, str) and text_.strip():
            refinements.append({"number": number, "text": text_.strip()})

    def flag(name: str, alias: str, default: bool) -> bool:
        value = _as_bool(data.get(name, data.get(alias)))
        return default if value is None else value

    reason = data.get("replan_reason")
    learned = data.get("learned", data.get("key_information_learned"))
    return Observation(
        success=success,
        learned=str(learned or ""),
        plan_valid=flag("plan_valid", "remaining_plan_still_valid", True),
        refinements=refinements,
        needs_replan=flag("needs_replan", "needs_full_replan", False),
        replan_reason=str(reason or ""),
        goal_achieved=flag("goal_achieved", "goal_already_achieved", False),
        reviewed=True,
    )


_CLOSERS = "\"'”’)]*_`"
_ERROR_MARK = re.compile(r"^\s*error\b|tool execution error", re.IGNORECASE)


def is_full_answer(step: PlanStep) -> bool:
    """Upstream's skip-synthesis rule: long enough, finished sentence, no error, no tool planned."""
    text = step.result.strip()
    if not text or step.error or step.tool or _ERROR_MARK.search(text):
        return False
    if len(text) < 200 and len(text.split()) < 30:
        return False
    return text.rstrip(_CLOSERS).endswith((".", "!", "?"))


# --- the loop ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Decision:
    goal_achieved: bool = False
    replan_reason: str | None = None


class PlanAndAct:
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
        self.text_mode = not self.plan_llm.supports_tools
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
        # An approved crew plan travels with the task; every step sees the whole plan as context.
        return task_description(self.task, self.book)

    def tools_text(self) -> str:
        """Names, descriptions and argument schemas (ours: upstream sends names only)."""
        if not self.tools:
            return self.book.render("no_tools")
        registry = self.ctx.tools if self.ctx.tools is not None else default_registry()
        return registry.describe(self.tools)

    def system_message(self) -> Message:
        if self.config.system_prompt is not None:
            return {"role": "system", "content": self.config.system_prompt}
        return {"role": "system", "content": self.book.render("agent_plan_system", **self.persona)}

    def plan_message(self) -> Message:
        values = {
            **self.persona,
            "description": self.description,
            "expected_output": self.task.expected_output,
            "tools": self.tools_text(),
            "max_steps": self.config.max_steps,
        }
        if self.config.plan_prompt is not None:
            text = render(self.config.plan_prompt, _only(values, PLAN_PROMPT_PLACEHOLDERS))
        else:
            text = self.book.render("agent_plan", **values)
        return {"role": "user", "content": text}

    def refine_message(self, current_plan: str) -> Message:
        values = {**self.persona, "current_plan": current_plan, "max_steps": self.config.max_steps}
        if self.config.refine_prompt is not None:
            text = render(self.config.refine_prompt, _only(values, REFINE_PROMPT_PLACEHOLDERS))
        else:
            text = self.book.render("agent_refine", **values)
        return {"role": "user", "content": text}

    # -- events --------------------------------------------------------------------------------

    async def emit(self, type_: str, data: dict[str, Any], *, step_id: str | None = None) -> None:
        await self.ctx.emit(type_, data, step_id=step_id)

    async def warn(self, message: str) -> None:
        await self.emit("agent_plan.warning", {"message": message})

    # -- planning ------------------------------------------------------------------------------

    async def call_planner(self, messages: list[Message], purpose: str) -> DraftPlan:
        if not self.text_mode:
            request = LLMRequest(
                llm=self.plan_llm,
                messages=messages,
                purpose=purpose,
                tools=[PLAN_TOOL],
                tool_choice={"type": "function", "function": {"name": PLAN_TOOL_NAME}},
            )
            try:
                return parse_plan_response(await self.ctx.llm.call(request, scope=self.scope))
            except ToolsUnsupportedError:
                # The provider refused tools: plan in text from now on, as ReAct downgrades.
                self.text_mode = True
        last = messages[-1]
        hint = self.book.render("agent_plan_json")
        asked = [*messages[:-1], {**last, "content": f"{last['content']}\n\n{hint}"}]
        request = LLMRequest(llm=self.plan_llm, messages=asked, purpose=purpose)
        response = await self.ctx.llm.call(request, scope=self.scope)
        return parse_plan_text(response.content)

    async def make_plan(
        self, first: Message, *, purpose: str, replan: int = 0
    ) -> tuple[DraftPlan | None, list[PlanStep]]:
        """Plan, then refine while not ready, up to ``max_attempts_effective`` attempts in all.

        Returns the last draft (``None`` if the first call failed) and its repaired steps.
        """
        extra = {"replan": replan} if replan else {}
        system = self.system_message()
        attempt = 1
        await self.emit("agent_plan.started", {"attempt": attempt, **extra})
        try:
            draft = await self.call_planner([system, first], purpose)
        except LLMError as exc:
            await self.emit("agent_plan.failed", {"error": str(exc), "attempt": attempt, **extra})
            return None, []
        steps = await self.adopt(draft)
        await self.emit_completed(attempt, draft, steps, extra)
        limit = self.config.max_attempts_effective
        while not draft.ready and attempt < limit:
            attempt += 1
            current = plan_as_text(draft, self.book)
            try:
                refine = self.refine_message(current)
            except PromptError as exc:
                await self.emit("agent_plan.failed", {"error": f"refine_prompt: {exc}", **extra})
                break
            await self.emit("agent_plan.started", {"attempt": attempt, **extra})
            # Only the latest draft is shown back: the conversation stays the same size per attempt.
            messages = [system, first, {"role": "assistant", "content": current}, refine]
            try:
                draft = await self.call_planner(messages, "refine")
            except LLMError as exc:
                await self.emit(
                    "agent_plan.failed", {"error": str(exc), "attempt": attempt, **extra}
                )
                break
            steps = await self.adopt(draft)
            await self.emit_completed(attempt, draft, steps, extra)
        if not draft.ready:
            await self.warn(f"the plan is still not ready after {attempt} attempt(s)")
        return draft, steps

    async def emit_completed(
        self, attempt: int, draft: DraftPlan, steps: list[PlanStep], extra: dict[str, Any]
    ) -> None:
        await self.emit(
            "agent_plan.completed",
            {
                "attempt": attempt,
                "plan": draft.text,
                "ready": draft.ready,
                "steps": [s.as_data() for s in steps],
                **extra,
            },
        )

    async def adopt(self, draft: DraftPlan) -> list[PlanStep]:
        """Number, bound and repair a draft's steps (ours: upstream executes whatever it got).

        New steps are numbered after the highest number already used, so a replanned step never
        collides with a kept one. A dependency on an unknown step, on itself or on a later step
        (the only way to form a cycle) is dropped with a warning: the plan is repaired rather than
        refused, because every step still runs and the observer sees the failed ones.
        """
        first = max((s.number for s in self.steps), default=0) + 1
        kept = {s.number for s in self.steps if s.done}
        drafts = [s for s in draft.steps if s.description]
        if len(drafts) < len(draft.steps):
            await self.warn(
                f"dropped {len(draft.steps) - len(drafts)} step(s) without a description"
            )
        if len(drafts) > self.config.max_steps:
            await self.warn(
                f"the plan has {len(drafts)} steps; only the first {self.config.max_steps} "
                "(max_steps) are kept"
            )
            drafts = drafts[: self.config.max_steps]
        numbering: dict[int, int] = {}
        for offset, d in enumerate(drafts):
            numbering.setdefault(d.number, first + offset)
        adopted: list[PlanStep] = []
        for offset, d in enumerate(drafts):
            number = first + offset
            deps: list[int] = []
            for wanted in d.depends_on:
                # The new plan's own numbers win; otherwise a kept step may be meant.
                target = numbering.get(wanted, wanted if wanted in kept else None)
                if target is None:
                    await self.warn(f"step {number} depends on unknown step {wanted}: dropped")
                elif target >= number:
                    await self.warn(
                        f"step {number} depends on step {target}, which does not come before it "
                        "(a cycle or a forward reference): dropped"
                    )
                elif target not in deps:
                    deps.append(target)
            tool = self.known_tool(d.tool)
            if d.tool and tool is None:
                await self.warn(f"step {number} names tool {d.tool!r}, which the agent lacks")
            adopted.append(
                PlanStep(
                    id=f"{self.task.key}.s{number}",
                    number=number,
                    description=d.description,
                    tool=tool,
                    depends_on=tuple(deps),
                )
            )
        return adopted

    def known_tool(self, name: str | None) -> str | None:
        # The same matching as ReAct's: exact, then ignoring case and spacing, then similar.
        return match_tool_name(name, list(self.tools)) if name else None

    # -- entry -------------------------------------------------------------------------------

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

    async def run_bound(self) -> str:
        """ENGINE.md §2b: the approved crew plan is the plan. No planning call is made; each
        approved step runs in order (ids = the plan's stable ids), seeing every earlier step's
        result, and ``on_step_failure`` says how far the agent may depart from it."""
        self.steps = [
            PlanStep(id=s.id, number=n, description=s.text, depends_on=tuple(range(1, n)))
            for n, s in enumerate(self.task.plan_steps, start=1)
        ]
        await self.emit(
            "agent_plan.bound",
            {
                "on_step_failure": self.task.on_step_failure,
                "steps": [s.as_data() for s in self.steps],
            },
        )
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
            decision = _Decision()
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
            try:
                result = await run_react_loop(
                    self.ctx,
                    self.agent,
                    self.step_messages(step),
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

    def step_messages(self, step: PlanStep) -> list[Message]:
        """A fresh conversation: persona, task, earlier tasks' outputs, the step, its inputs."""
        book = self.book
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
            context="\n\n".join(self.task.context) if self.task.context else none,
            dependency_results="\n\n".join(blocks) if blocks else none,
            step=current,
        )
        # ReAct's system prompt: the answer format, and the tool protocol in text mode.
        return [self.system_for_steps, {"role": "user", "content": text}]

    # -- observation and decision ----------------------------------------------------------------

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
                completed_steps="\n\n".join(_result_block(s, book, clip=200) for s in done)
                or book.render("none"),
                step=book.render("step_current", number=step.number, description=step.description),
                outcome=outcome,
                result=step.result or book.render("no_result"),
                remaining_steps=_steps_as_text(remaining, book) or book.render("none"),
            )
            request = LLMRequest(
                llm=self.plan_llm,
                messages=[{"role": "user", "content": prompt}],
                purpose="observe",
                response_schema=OBSERVATION_SCHEMA,
            )
            response = await self.ctx.llm.call(request, step_id=step.id, scope=self.scope)
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

    async def observe_and_decide(self, step: PlanStep, decision: _Decision) -> None:
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

    async def decide_bound(self, step: PlanStep, seen: Observation, decision: _Decision) -> None:
        """What a failed step or a review may change in an approved plan (ENGINE.md §2b).

        ``continue`` changes nothing: the approved steps all run, failures are marked. ``ask``
        and ``adapt`` want new steps for the rest when a step failed or the review asks for a
        new plan (``ask`` proposes them to a person, ``adapt`` adopts them); ``adapt`` also
        takes the review's refinements and its "goal achieved", each shown as a deviation.
        """
        policy = self.task.on_step_failure
        if policy == "continue" or decision.goal_achieved:
            return
        if not seen.success or seen.needs_replan:
            if decision.replan_reason is None:
                decision.replan_reason = (
                    seen.replan_reason or f"step {step.number} did not complete successfully"
                )
            return
        if policy != "adapt":
            return
        if seen.goal_achieved:
            decision.goal_achieved = True
        elif seen.refinements:
            before = [s.description for s in self.steps if s.status == "pending"]
            await self.refine_pending(seen.refinements, step)
            after = [s.description for s in self.steps if s.status == "pending"]
            if after != before:
                await self.deviated(f"refined after step {step.number}", before, after)

    async def deviated(
        self, reason: str, before: list[str], after: list[str], *, approved: bool = False
    ) -> None:
        """The run departs from the approved plan; the page shows it as a diff."""
        await self.emit(
            "crew_plan.deviated",
            {"reason": reason, "before": before, "after": after, "approved_by_person": approved},
        )

    async def propose_steps(self, reason: str) -> list[PlanStep] | None:
        """A new plan for the remaining work (the replan prompt), not yet adopted."""
        self.replans += 1
        kept = [s for s in self.steps if s.done]
        await self.emit(
            "agent_plan.replanned",
            {
                "reason": reason,
                "count": self.replans,
                "kept_steps": sum(1 for s in kept if s.status == "completed"),
                "kept_step_ids": [s.id for s in kept],
            },
        )
        completed = [s for s in kept if s.status == "completed"]
        failed = [s for s in kept if s.status == "failed"]
        book = self.book
        try:
            first: Message = {
                "role": "user",
                "content": self.book.render(
                    "replan",
                    **self.persona,
                    description=self.description,
                    expected_output=self.task.expected_output,
                    tools=self.tools_text(),
                    completed="\n\n".join(_result_block(s, book) for s in completed)
                    or book.render("none"),
                    failed="\n\n".join(_result_block(s, book) for s in failed)
                    or book.render("none"),
                    reason=reason,
                    max_steps=self.config.max_steps,
                ),
            }
        except PromptError as exc:
            await self.emit("agent_plan.failed", {"error": f"replan prompt: {exc}"})
            return None
        draft, steps = await self.make_plan(first, purpose="replan", replan=self.replans)
        if draft is None or not draft.ready or not steps:
            return None
        return steps

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

    async def ask_for_new_steps(self, reason: str) -> None:
        """``ask``: the agent proposes the remaining steps, a person edits and approves them
        (the run waits), and the steps approved replace the pending ones."""
        before = [s.description for s in self.steps if s.status == "pending"]
        proposed = await self.propose_steps(reason)
        texts = [s.description for s in proposed] if proposed else before
        if proposed is None:
            await self.warn("the agent proposed no usable steps: the remaining steps are proposed as they are")
        approved = await self.ctx.cancel.race(
            self.ctx.human.request_plan_change(
                task_key=self.task.key,
                reason=reason,
                done_step_ids=[s.id for s in self.steps if s.done],
                proposed=texts,
            )
        )
        first = max((s.number for s in self.steps), default=0) + 1
        done = tuple(s.number for s in self.steps if s.done)
        new = [
            PlanStep(id=a.id, number=first + i, description=a.text, depends_on=done + tuple(range(first, first + i)))
            for i, a in enumerate(approved)
        ]
        await self.replace_pending(new, "replaced by the steps a person approved")
        await self.deviated(reason, before, [s.description for s in new], approved=True)

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
        await self.replace_pending(steps, "replaced by a new plan")
        if self.task.plan_steps:
            await self.deviated(reason, before, [s.description for s in steps])

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
        blocks = "\n\n".join(_result_block(s, self.book) for s in ordered)
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
            purpose="synthesis",
            response_schema=self.task.output_json_schema,
            stream=self.agent.llm.stream,
        )
        try:
            response: LLMResponse = await self.ctx.llm.call(request, scope=self.scope)
        except LLMError as exc:
            await self.warn(f"synthesis failed ({exc}): returning the step results as they are")
            return blocks
        return response.content


def _result_block(step: PlanStep, book: PromptBook, *, clip: int | None = None) -> str:
    result = step.result or book.render("no_result")
    if clip is not None and len(result) > clip:
        result = result[:clip] + "…"
    values = {"number": step.number, "description": step.description, "result": result}
    if step.status == "failed":
        return book.render("step_result_failed", **values, error=step.error or step.outcome)
    return book.render("step_result", **values)


def _only(values: Mapping[str, object], allowed: Iterable[str]) -> dict[str, object]:
    keep = set(allowed)
    return {k: v for k, v in values.items() if k in keep}


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
    runner.last_step_answers = agent.effective_planning is None or agent.agent_type == "plan_execute"
    return await runner.run_bound()


def agent_scope(agent: AgentSpec) -> BudgetScope | None:
    """The agent's own budget when a caller passed none (``run_agent`` always passes one)."""
    if agent.budget == Budget():
        return None
    return BudgetScope(agent.budget, Usage(), "agent")
