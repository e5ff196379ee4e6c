"""The parts of a run as the page shows them: tasks, plans, steps, LLM and tool calls, notes, log rows.

Plain dataclasses the fold (``crews.run_view.fold``) fills in. Those the page shows hundreds of
times (steps, activity entries, plan items, task heads) render themselves through a macro of
``templates/crews/run_parts.jinja`` (``html()`` and the like): the page and the socket call the
same one. The rarer parts are partials of ``crews/run_detail.html``. The methods hand on Django's
``SafeString`` rather than Jinja's ``Markup``, whose ``+`` and ``replace`` would escape.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from django.utils.safestring import SafeString
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _

from crews.run_view.text import (
    STEP_STATUS_TONE,
    TASK_STATUS_TONE,
    args_text,
    dom_key,
    duration_text,
    labels,
    llm_call_url,
    markdown,
    purpose_label,
    step_result_url,
    step_status_label,
    task_status_label,
    text_of,
    tokens_text,
    words,
)
from planner_site.jinja2 import macros
from planner_site.templatetags.money import usd


def parts() -> Any:
    """The macros of ``templates/crews/run_parts.jinja``, compiled once."""
    return macros("crews/run_parts.jinja")


# Activity entries: LLM calls, tool calls, notes ---------------------------------------------------


@dataclass(slots=True, eq=False)
class LLMCall:
    kind: ClassVar[str] = "llm"
    seq: int
    model: str
    purpose: str
    status: str = "running"  # running | done | failed
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_ms: int | None = None
    error: str = ""
    retrying: bool = False
    run_id: int = 0
    # The seq of the call's llm.completed or llm.failed: its request and reply load from there.
    ended_seq: int | None = None

    @property
    def dom_id(self) -> str:
        return f"llm-{self.seq}"

    @property
    def purpose_label(self) -> str:
        return purpose_label(self.purpose)

    @property
    def tokens(self) -> str:
        return tokens_text(self.prompt_tokens + self.completion_tokens)

    @property
    def cost(self) -> str:
        return usd(self.cost_usd)

    @property
    def latency(self) -> str:
        return duration_text((self.latency_ms or 0) / 1000) if self.latency_ms is not None else "—"

    @property
    def sent_url(self) -> str:
        """What the call was sent and got back (an ended call's)."""
        return llm_call_url(self.run_id, self.ended_seq or 0)

    def html(self, oob: bool = False) -> SafeString:
        # A long run has hundreds of calls and each is a handful of translated, formatted
        # figures: the markup is memoised per language on everything it shows.
        return _llm_call_html(get_language(), oob, self.seq, self.model, self.purpose, self.status,
                              self.prompt_tokens, self.completion_tokens, self.cost_usd, self.latency_ms,
                              self.error, self.retrying, self.run_id, self.ended_seq)


@functools.lru_cache(maxsize=8192)
def _llm_call_html(language: str | None, oob: bool, *fields: Any) -> SafeString:
    """``LLMCall.html`` of a call with these fields (``LLMCall``'s, in order), in ``language``
    (the active one)."""
    return SafeString(parts().llm_call(LLMCall(*fields), words(), oob))


@dataclass(slots=True, eq=False)
class ToolCall:
    kind: ClassVar[str] = "tool"
    seq: int
    name: str
    args: Any = None
    status: str = "running"  # running | done | failed
    output: str = ""
    error: str = ""
    from_cache: bool = False

    @property
    def dom_id(self) -> str:
        return f"tool-{self.seq}"

    @property
    def args_text(self) -> str:
        return args_text(self.args)

    @property
    def args_short(self) -> str:
        if isinstance(self.args, dict):
            text = ", ".join(f"{k}={text_of(v)}" for k, v in self.args.items())
        else:
            text = text_of(self.args)
        return text if len(text) <= 80 else text[:79] + "…"

    def html(self, oob: bool = False) -> SafeString:
        return SafeString(parts().tool_call(self, words(), oob))


@dataclass(slots=True, eq=False)
class Note:
    kind: ClassVar[str] = "note"
    seq: int
    text: str
    tone: str = "info"  # info | warning | danger | success
    detail: str = ""

    @property
    def dom_id(self) -> str:
        return f"note-{self.seq}"

    def html(self, oob: bool = False) -> SafeString:
        return SafeString(parts().note(self, oob))


@dataclass(slots=True, eq=False)
class Rejected:
    """A reply the agent's loop could not use (``react.format_error``), or the one it kept sending
    (``react.stuck``, with ``repeats``): shown collapsed, as the model wrote it."""

    kind: ClassVar[str] = "rejected"
    seq: int
    turn: int
    max_turns: int
    error: str  # what the model was told, or (stuck) why the loop stopped
    reply: str  # its start, when it was long
    reply_chars: int = 0
    repeats: int = 0

    @property
    def dom_id(self) -> str:
        return f"rejected-{self.seq}"

    @property
    def status(self) -> str:
        return "stuck" if self.repeats else "format_error"

    @property
    def more(self) -> int:
        """Characters of the reply the event did not keep."""
        return max(0, self.reply_chars - len(self.reply))

    def html(self, oob: bool = False) -> SafeString:
        return SafeString(parts().rejected(self, words(), oob))


def entries_html(entries: list[Any], into: str | None = None) -> SafeString:
    """A list's items (LLM calls, tool calls, notes), each rendered by its own ``html()``."""
    return SafeString(parts().entries([entry.html() for entry in entries], into))


# Plans and their steps --------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Deviation:
    """The run departed from the approved plan (``crew_plan.deviated``): shown as a diff."""

    kind: ClassVar[str] = "deviation"
    seq: int
    reason: str
    before: list[str]
    after: list[str]
    by_person: bool = False

    @property
    def dom_id(self) -> str:
        return f"deviation-{self.seq}"


@dataclass(slots=True, eq=False)
class Step:
    step_id: str
    number: int
    description: str
    tool: str | None = None
    status: str = "pending"
    refined: bool = False
    result: str = ""
    result_seq: int = 0  # the step.completed event carrying ``result``: its page loads it on demand
    error: str = ""
    reason: str = ""
    learned: str = ""
    reviewed_ok: bool | None = None
    activity: list[Any] = field(default_factory=list)
    task_key: str = ""  # its task's key and its run, for its ids and its result's URL
    run_id: int = 0
    turn: int = 0  # the agent's loop on it: turn N of max_turns (react.turn)
    max_turns: int = 0

    @property
    def key(self) -> str:
        return dom_key(self.step_id)

    @property
    def dom_id(self) -> str:
        return f"step-{self.task_key}-{self.key}"

    @property
    def tone(self) -> str:
        return STEP_STATUS_TONE.get(self.status, "muted")

    @property
    def label(self) -> str:
        return step_status_label(self.status)

    @property
    def done(self) -> bool:
        return self.status not in ("pending", "running")

    @property
    def stream_id(self) -> str:
        """Its live area: an LLM call's streamed tokens go there (``delta_target``)."""
        return f"delta-{self.dom_id}"

    @property
    def result_url(self) -> str:
        """Its result, loaded when its disclosure first opens (``crews:run-step-result``)."""
        return step_result_url(self.run_id, self.result_seq)

    # A long run has hundreds of steps: they are macros (templates/crews/run_parts.jinja), not
    # partials of the page (Django's template language took a third of the page).

    def html(self, oob: bool = False) -> SafeString:
        """The step: its head, result, activity and the live area its streamed tokens go to."""
        return SafeString(parts().step(self, words(), oob))

    def head_html(self, oob: bool = False) -> SafeString:
        return SafeString(parts().step_head(self, words(), oob))

    def result_part_html(self, oob: bool = False) -> SafeString:
        """What the step came to: its error or why it was skipped, its result, its review."""
        return SafeString(parts().step_result(self, words(), oob))

    @property
    def activity_html(self) -> SafeString:
        return entries_html(self.activity)

    _PARTS: ClassVar[dict[str, str]] = {"step": "html", "step-head": "head_html", "step-result": "result_part_html"}

    def part_html(self, part: str, *, oob: bool) -> SafeString:
        """``part`` of the step (``step``, ``step-head``, ``step-result``), for the socket."""
        return getattr(self, self._PARTS[part])(oob=oob)  # type: ignore[no-any-return]


def plan_item_html(item: PlanSegment | Note | Deviation, oob: bool = False) -> SafeString:
    """An item of a task's plan: a plan the agent made, a change to the approved plan, a note."""
    return SafeString(parts().plan_item(item, words(), oob))


@dataclass(slots=True, eq=False)
class PlanSegment:
    """One plan the agent made (its first, or one after a replan), refined in place."""

    task_key: str
    replan: int
    attempt: int = 1
    status: str = "drafting"  # drafting | ready | not_ready | failed | approved (the crew plan's)
    steps: list[Step] = field(default_factory=list)
    error: str = ""
    kind: ClassVar[str] = "segment"

    @property
    def dom_id(self) -> str:
        return f"plan-{self.task_key}-r{self.replan}"


# People's part: approvals and feedback ------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Approval:
    seq: int
    approval_id: str
    tool: str
    args: Any
    status: str = "pending"  # pending | approved | denied | closed
    note: str = ""
    decided: str = ""  # decided in the database, the agent has not taken it up yet

    @property
    def dom_id(self) -> str:
        return f"approval-{dom_key(self.approval_id)}"

    @property
    def args_text(self) -> str:
        return args_text(self.args)


@dataclass(slots=True, eq=False)
class Feedback:
    seq: int
    answer: str
    status: str = "pending"  # pending | answered | closed
    text: str = ""
    sent: bool = False  # answered in the database, the agent has not taken it up yet

    @property
    def answer_html(self) -> SafeString:
        return markdown(self.answer)


# Tasks ------------------------------------------------------------------------------------------


class UsageAndOutput:
    """Display of what a task and a whole run share: token and cost figures, the answer."""

    __slots__ = ()
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    output: str

    @property
    def tokens(self) -> str:
        return tokens_text(self.prompt_tokens + self.completion_tokens)

    @property
    def cost(self) -> str:
        return usd(self.cost_usd)

    @property
    def output_html(self) -> SafeString:
        return markdown(self.output)


@dataclass(slots=True, eq=False)
class TaskView(UsageAndOutput):
    key: str  # the task id, or RUN_SCOPE
    task_id: int | None
    number: int | None
    name: str
    agent: str = ""
    status: str = "waiting"
    output: str = ""
    output_seq: int = 0  # the task.completed event carrying ``output`` (0: none, or kept from before)
    error: str = ""
    reused: bool = False  # done before this run started (a re-run from a later task)
    started: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: int = 0
    llm_calls: int = 0
    plan: list[PlanSegment | Note | Deviation] = field(default_factory=list)
    activity: list[Any] = field(default_factory=list)
    approvals: list[Approval] = field(default_factory=list)
    feedback: Feedback | None = None
    rerunnable: bool = False  # "Run again from this task" makes sense (earlier tasks are done)
    crew_plan: dict[str, Any] | None = None  # the run scope of a crew: the crew plan's state
    run_id: int = 0  # for its answer's URL
    turn: int = 0  # the agent's loop on it: turn N of max_turns (react.turn)
    max_turns: int = 0
    forced: str = ""  # why its answer was forced (react.forced_answer): max_turns | repeated
    failure_kind: str = ""  # a provider failure's kind (task.failed's ``kind``): worded by agents/failures.py
    output_json: Any = None  # the answer as JSON, when the task has an output schema

    @property
    def output_table(self) -> dict[str, Any]:
        """The JSON answer as a table, with its download links (crews/_task_output_table.html)."""
        from django.urls import reverse

        from crews.output_table import table_of

        columns, rows = table_of(self.output_json)
        ids = {"id": self.run_id, "task_id": self.task_id}
        return {"columns": columns, "rows": rows,
                "json_url": reverse("api:run_task_output_json", kwargs=ids),
                "csv_url": reverse("api:run_task_output_csv", kwargs=ids)}

    @property
    def tone(self) -> str:
        return TASK_STATUS_TONE.get(self.status, "muted")

    @property
    def label(self) -> str:
        return task_status_label(self.status)

    @property
    def waits_for_person(self) -> bool:
        if self.status != "running":
            return False
        return (self.feedback is not None and self.feedback.status == "pending") or any(
            a.status == "pending" for a in self.approvals)

    @property
    def drafting(self) -> bool:
        """The run scope of a crew while its plan is drafted."""
        return bool(self.crew_plan) and self.crew_plan.get("status") == "drafting"  # type: ignore[union-attr]

    @property
    def plan_version(self) -> Any:
        return (self.crew_plan or {}).get("version")

    @property
    def steps(self) -> list[Step]:
        return [s for seg in self.plan if isinstance(seg, PlanSegment) for s in seg.steps]

    @property
    def steps_done(self) -> int:
        return sum(1 for s in self.steps if s.status == "completed")

    @property
    def usage(self) -> str:
        """Its LLM calls, tokens and cost, in a sentence."""
        text = ngettext("%(n)s LLM call · %(tokens)s tokens · %(cost)s",
                        "%(n)s LLM calls · %(tokens)s tokens · %(cost)s", self.llm_calls)
        return text % {"n": self.llm_calls, "tokens": self.tokens, "cost": self.cost}

    @property
    def forced_text(self) -> str:
        """The warning above a forced answer."""
        if not self.forced:
            return ""
        if self.forced == "repeated":
            return _("Forced answer: the model kept sending the same reply, so it was asked once for "
                     "its best answer. Check it before you rely on it.")
        return _("Forced answer: the agent used all %(n)s turns without giving an answer, so it was "
                 "asked once for its best answer. Check it before you rely on it.") % {"n": self.max_turns}

    @property
    def has_content(self) -> bool:
        return bool(self.plan or self.activity or self.approvals or self.feedback or self.output or self.error)

    # The parts of the ``task`` partial that the socket re-renders with most events (its head's
    # usage changes with every LLM call): macros, as steps are.

    @property
    def plan_html(self) -> SafeString:
        return SafeString(parts().plan_items(self.plan, words()))

    @property
    def activity_html(self) -> SafeString:
        return entries_html(self.activity)

    def head_html(self, view: Any, *, can_write: bool, csrf_token: str | None, oob: bool = False) -> SafeString:
        """Its head: mark, title, facts and actions (``view``: the run's, ``csrf_token``: the
        page's; the socket has none, as a partial rendered without a request has none)."""
        return SafeString(parts().task_head(self, view, words(), can_write, csrf_token, oob))

    @property
    def answer_loader_html(self) -> SafeString:
        """The answer of a finished crew run, closed: it loads when opened, as a step's result does."""
        table = words()
        return SafeString(parts().loaded_when_opened(
            step_result_url(self.run_id, self.output_seq), "answer", table["answer"], table["show_answer"]))


# The event log --------------------------------------------------------------------------------


class LogRow(NamedTuple):
    """An event as the event log lists it: a tuple, as the log's macro unpacks thousands."""

    seq: int
    type: str
    at: str  # ISO 8601 ("" when unknown): what the row shows, as the fold has it at hand
    task_id: int | None
    summary: str


def log_rows_html(rows: list[LogRow], oob: bool = False) -> SafeString:
    """Rows of the event log: the page's, or (``oob``) the one the socket appends to it."""
    return SafeString(parts().log_rows(rows, labels("event"), oob))


_SUMMARY_FIELDS = ("output", "error", "message", "description", "text", "reason", "answer", "name")


_SUMMARY_NAMES = frozenset(_SUMMARY_FIELDS)


def summary_of(data: dict[str, Any]) -> str:
    if _SUMMARY_NAMES.isdisjoint(data):  # most events (LLM calls, tool calls) have none of them
        return ""
    for name in _SUMMARY_FIELDS:
        value = data.get(name)
        if isinstance(value, (str, int, float)) and value != "":
            raw = str(value)
            # Answers run to pages: squash the start first. Squashed, a prefix of the text is a
            # prefix of the squashed text, so when it is over 140 characters it clips the same.
            text = " ".join(raw[:600].split())
            if len(text) <= 140 and len(raw) > 600:
                text = " ".join(raw.split())
            return text if len(text) <= 140 else text[:139] + "…"
    return ""


# Changes: what an event altered, for the socket to re-render ------------------------------------


@dataclass(slots=True)
class Change:
    """Re-render ``part`` (a partial of ``crews/run_detail.html`` or a macro of
    ``crews/run_parts.jinja``: see ``render_event_html``) with ``context``.

    Without ``into`` the part replaces the element with its id (``hx-swap-oob="true"``); with
    ``into`` it is appended to that element (wrapped in ``wrapper`` so lists stay valid HTML).
    """

    part: str
    context: dict[str, Any]
    into: str | None = None
    wrapper: str = "div"
