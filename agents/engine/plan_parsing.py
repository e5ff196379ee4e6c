"""Plans as data, read tolerantly (ENGINE.md §2.1, §2.3): the planner's reply as a tool call or as
JSON somewhere in prose, its READY verdict, a step review's JSON, and the plan's steps as text.

Models wrap JSON in prose and fences, leave trailing commas, use upstream's field names or bare
strings; everything here accepts that and never raises on a reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import json_repair

from agents.engine.llm import LLMResponse
from agents.engine.prompts import PromptBook

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
_MAX_JSON_STARTS = 64  # bounds the scan of a long prose reply full of braces
# json-repair reads from a start to the end of the text, in pure Python (~10 ms for a 13 kB plan,
# ~0.3 s for 23 kB of prose): it is tried only where JSON seems to start (a key, a quoted or nested
# item), at a few places, never on a brace in prose such as "{braces}".
_MAX_REPAIR_STARTS = 4
_LOOKS_LIKE_JSON = {
    "{": re.compile(r"\{\s*(?:[\"']|[A-Za-z_][\w ]{0,40}:)"),
    "[": re.compile(r"\[\s*(?:[\"'{\[\d-]|true\b|false\b|null\b)"),
}
_CLOSER = {"{": "}", "[": "]"}


def _starts(text: str, opener: str, limit: int) -> list[int]:
    found: list[int] = []
    start = text.find(opener)
    while start != -1 and len(found) < limit:
        found.append(start)
        start = text.find(opener, start + 1)
    return found


def _scan_json(
    text: str, opener: str, accept: Callable[[Any], bool]
) -> tuple[Any, int, int] | None:
    """The first valid JSON value opening with ``opener`` that ``accept`` likes, as it stands."""
    for start in _starts(text, opener, _MAX_JSON_STARTS):
        try:
            value, end = _DECODER.raw_decode(text, start)
        except ValueError:
            continue
        if accept(value):
            return value, start, end
    return None


def _repaired(text: str, opener: str, accept: Callable[[Any], bool]) -> tuple[Any, int, int] | None:
    """The first value that ``accept`` likes once ``json_repair`` has mended it: what weak models
    write (unescaped newlines, single quotes, missing quotes, commas or brackets, Python's words,
    an answer cut off mid-object). It ends where the last closer of its kind is, if any."""
    looks = _LOOKS_LIKE_JSON[opener]
    starts = [m.start() for m in looks.finditer(text)][:_MAX_REPAIR_STARTS]
    for start in starts:
        try:
            value = json_repair.repair_json(text[start:], return_objects=True, skip_json_loads=True)
        except (ValueError, RecursionError):
            continue
        # Several values in a row come back as a list of them: the first one that fits wins.
        candidates = value if opener == "{" and isinstance(value, list) else [value]
        for candidate in candidates:
            if isinstance(candidate, (dict, list)) and accept(candidate):
                end = text.rfind(_CLOSER[opener]) + 1
                return candidate, start, end if end > start else len(text)
    return None


@dataclass(slots=True)
class _Found:
    value: Any
    prose: str  # the text around the JSON value


def _find_json(text: str, opener: str, accept: Callable[[Any], bool]) -> _Found | None:
    """The first JSON value opening with ``opener`` that ``accept`` likes, fences and prose allowed.

    Valid JSON is taken as it is; else ``json_repair`` mends the text from each opener in turn.
    """
    found = _scan_json(text, opener, accept) or _repaired(text, opener, accept)
    if found is None:
        return None
    value, start, end = found
    return _Found(value, text[:start] + text[end:])


_PLACEHOLDER = re.compile(
    r"^(?:[.\u2026\s_*#-]*|<[^<>]*>|\[[^\[\]]*\]|(?:step|action|item|todo|tbd|n/?a|none"
    r"|null|string|text|description)(?:\s*\d+)?\s*[.:]?)$",
    re.IGNORECASE,
)


def is_placeholder_step(text: str) -> bool:
    """A step with nothing to do in it: empty, dots (the prompt's own ``"..."``), a bare
    ``<step>``/``[step]`` slot, or a word like "step 1", "TODO" or "string" alone."""
    return bool(_PLACEHOLDER.match(text.strip().strip("\"'`").strip()))


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
        text=text or steps_as_text(steps),
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


def steps_as_text(steps: Iterable[DraftStep | PlanStep], book: PromptBook | None = None) -> str:
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
    listing = steps_as_text(draft.steps, book)
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


def result_block(step: PlanStep, book: PromptBook, *, clip: int | None = None) -> str:
    result = step.result or book.render("no_result")
    if clip is not None and len(result) > clip:
        result = result[:clip] + "…"
    values = {"number": step.number, "description": step.description, "result": result}
    if step.status == "failed":
        return book.render("step_result_failed", **values, error=step.error or step.outcome)
    return book.render("step_result", **values)
