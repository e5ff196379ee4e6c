"""A run as people read it: its stored events folded once into tasks, plans, steps, tools and LLM calls.

The run page renders a ``RunView`` built in one pass over the run's events (one query), and the
HTML websocket keeps one per connection: it folds each event it sends into the view and
re-renders only the parts that changed (``RunView.apply`` names them). Page and socket so print
the same markup from the same state. Everything dynamic comes from the events, never from the
run row, so a view folded up to seq N is exactly what a page that showed N events displays.

LLM output is untrusted: it is escaped by the templates, and markdown goes through ``markdown``
(markdown-it, then the nh3 sanitiser) before it is marked safe.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from html import escape  # Django's escape() with less overhead: thousands of calls per page
from typing import Any, ClassVar

import nh3
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, ngettext
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt

from crews.models import PlanStep, Run, RunEvent, RunTask
from planner_site.reversing import url_around_last_arg
from planner_site.templatetags.money import grouped, usd

ACTIVE = {"queued", "planning", "awaiting_approval", "running", "awaiting_input", "cancelling"}
FINISHED = {"succeeded", "failed", "cancelled"}
RUN_SCOPE = "run"  # the key of run-level work: an agent's own task, or a crew's plan and manager


# Markdown ----------------------------------------------------------------------------------------

_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}


def markdown(text: str) -> SafeString:
    """Markdown → HTML → sanitised HTML: only ``_TAGS``, links to http(s)/mailto, no images."""
    return mark_safe(_markdown_html(text or ""))  # noqa: S308 - cleaned by nh3 below


@functools.lru_cache(maxsize=4096)
def _markdown_html(text: str) -> str:
    # Pure and costly (over half of a long run page): the page, its replays and every live
    # re-render of a task show the same step results again and again.
    html = _md.render(text)
    clean = nh3.clean(
        html, tags=_TAGS, attributes=_ATTRIBUTES, url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )
    # Wide code and tables scroll: keyboard users must be able to reach them (attributes
    # added after cleaning, to tags nh3 has just written without any).
    return clean.replace("<pre>", '<pre tabindex="0">').replace("<table>", '<table tabindex="0">')


# Small formatting helpers ----------------------------------------------------------------------


_NOT_IN_KEYS = re.compile(r"[^A-Za-z0-9_-]")


def dom_key(value: Any) -> str:
    """A value usable in an id and a CSS selector (step ids look like ``12.s3``)."""
    return _dom_key(str(value))


@functools.lru_cache(maxsize=4096)
def _dom_key(text: str) -> str:  # a run's few hundred step ids, looked up thousands of times
    return _NOT_IN_KEYS.sub("-", text)


@functools.lru_cache(maxsize=1024)
def escape_label(text: str) -> str:
    """``escape`` for the few texts every entry repeats (labels, model names, figures)."""
    return escape(text)


def tokens_text(n: int) -> str:
    return grouped(n)


def duration_text(delta: timedelta | float | None) -> str:
    if delta is None:
        return "—"
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    seconds = max(0.0, seconds)
    if seconds < 10:
        return _("%(s).1f s") % {"s": seconds}
    whole = int(seconds)
    if whole < 60:
        return _("%(s)d s") % {"s": whole}
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return _("%(m)d min %(s)02d s") % {"m": minutes, "s": secs}
    hours, minutes = divmod(minutes, 60)
    return _("%(h)d h %(m)02d min") % {"h": hours, "m": minutes}


def plan_url(plan_id: Any) -> str | None:
    """The plan editor, if it is installed (it is built alongside these pages)."""
    try:
        return reverse("crews:plan-detail", args=[int(plan_id)])
    except (NoReverseMatch, TypeError, ValueError):
        return None


def plan_diff_url(plan_id: Any, version: Any) -> str | None:
    """The plan's changes from the version before ``version`` to ``version``."""
    try:
        plan, to = int(plan_id), int(version)
    except (TypeError, ValueError):
        return None
    return f"{reverse('crews:plan-diff', args=[plan])}?from={max(to - 1, 1)}&to={to}#plan-diff"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _message(value: Any) -> str:
    """A message the app stored in English (a worker has no reader): translated when it is one."""
    text = _text(value)
    return _(text) if text else ""


def args_text(args: Any) -> str:
    """Tool arguments for people: ``name: value`` lines (JSON only for nested values)."""
    if isinstance(args, dict):
        return "\n".join(f"{k}: {v if isinstance(v, str) else _text(v)}" for k, v in args.items())
    return _text(args)


def _at(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return parse_datetime(value.replace("Z", "+00:00"))
    return None


RUN_STATUS_TONE = {
    "queued": "muted", "planning": "info", "awaiting_approval": "warning", "running": "info",
    "awaiting_input": "warning", "cancelling": "warning", "succeeded": "success", "failed": "danger",
    "cancelled": "muted", "interrupted": "warning",
}
TASK_STATUS_TONE = {
    "waiting": "muted", "running": "info", "done": "success", "failed": "danger", "skipped": "muted",
    "stopped": "muted", "drafted": "info", "approved": "success",
}
STEP_STATUS_TONE = {
    "pending": "muted", "running": "info", "completed": "success", "failed": "danger",
    "timed_out": "danger", "iteration_exhausted": "danger", "skipped": "muted",
}


def run_status_label(status: str) -> str:
    try:
        return str(Run.Status(status).label)
    except ValueError:
        return status


def _labels_now() -> dict[str, dict[str, str]]:
    return {
        "task": {
            "waiting": _("Waiting"), "running": _("Running"), "done": _("Done"), "failed": _("Failed"),
            "skipped": _("Skipped"), "stopped": _("Stopped"), "drafted": _("Drafted"),
            "approved": _("Approved"),
        },
        "step": {
            "pending": _("To do"), "running": _("Working"), "completed": _("Done"), "failed": _("Failed"),
            "timed_out": _("Timed out"), "iteration_exhausted": _("Ran out of iterations"),
            "skipped": _("Skipped"),
        },
        "purpose": {
            "crew_plan": _("crew plan"), "agent_plan": _("planning"), "refine": _("refining the plan"),
            "observe": _("reviewing a step"), "decide": _("deciding"), "replan": _("replanning"),
            "step": _("working on a step"), "react": _("thinking"), "synthesis": _("writing the answer"),
            "aggregate": _("writing the answer"), "manager": _("managing"), "test": _("test"),
        },
        "task_head": {
            "waiting": _("Waiting for you"), "drafting": _("Drafting"), "version": _("version %(v)s"),
            "steps_done": _("%(done)s of %(total)s steps done"), "reused": _("Kept from the earlier run"),
        },
        "step_parts": {
            "refined": _("refined"), "tool": _("tool: %(tool)s"), "result": _("Result"),
            "show_result": _("Show the result"), "skipped": _("Skipped: %(reason)s"),
            "not_quite": _("Review: not quite"), "review": _("Review:"), "activity": _("LLM calls and tools"),
        },
        "task_answer": {"answer": _("Answer"), "show_answer": _("Show the answer")},
        "entry": {
            "llm": _("LLM: %(purpose)s"), "tokens": _("%(n)s tokens"), "in_out": _("%(p)s in, %(c)s out"),
            "cut": _("Cut short."), "retrying": _("Retrying."), "running": _("running…"),
            "failed": _("failed"), "cached": _("from the cache"), "done": _("done"),
            "arguments": _("Arguments"), "output": _("Output"), "error": _("Error"),
            "show_sent": _("Show what the model was sent and its reply"),
        },
    }


_LABELS: dict[str, dict[str, dict[str, str]]] = {}


def labels(kind: str) -> dict[str, str]:
    """Translated labels, looked up once per language: a long run has thousands of entries."""
    language = get_language() or ""
    table = _LABELS.get(language)
    if table is None:
        table = _LABELS[language] = _labels_now()
    return table[kind]


def task_status_label(status: str) -> str:
    return labels("task").get(status, status)


def step_status_label(status: str) -> str:
    return labels("step").get(status, status)


def purpose_label(purpose: str) -> str:
    return labels("purpose").get(purpose, purpose)


def _oob(oob: bool) -> str:
    return ' hx-swap-oob="true"' if oob else ""


@functools.lru_cache(maxsize=256)
def _run_url_around(name: str, run_id: int, script_prefix: str, urlconf: Any, language: str | None) -> tuple[str, str]:
    # script_prefix and language are not read here: they key the cache, as reverse() depends on them.
    return url_around_last_arg(name, run_id, urlconf=urlconf)


def step_result_url(run_id: int, seq: int) -> str:
    """``reverse("crews:run-step-result", args=[run_id, seq])``: a long run has hundreds, so the
    URL around the seq is reversed once per run (and script prefix, URLconf and language)."""
    head, tail = _run_url_around("crews:run-step-result", run_id, get_script_prefix(), get_urlconf(), get_language())
    return f"{head}{int(seq)}{tail}"


def llm_call_url(run_id: int, seq: int) -> str:
    """``reverse("crews:run-llm-call", args=[run_id, seq])``, reversed once per run as above."""
    head, tail = _run_url_around("crews:run-llm-call", run_id, get_script_prefix(), get_urlconf(), get_language())
    return f"{head}{int(seq)}{tail}"


def loaded_when_opened(url: str, *, css_class: str, summary: str, link: str, attrs: str = "") -> str:
    """A closed disclosure whose text loads from ``url`` when first opened (htmx's ``toggle
    once``): a step's result, a finished crew run's answer, what an LLM call was sent. Without
    JavaScript its link shows the text on a page of its own. A ``summary`` marked safe is used
    as it is (an LLM call's row); ``attrs`` are more attributes, escaped already."""
    url = escape(url)
    summary = summary if isinstance(summary, SafeString) else escape(summary)
    return (
        f'<details class="{css_class}"{attrs} hx-get="{url}" hx-trigger="toggle once" hx-target="find .markdown" '
        f'hx-swap="innerHTML"><summary>{summary}</summary>'
        f'<div class="markdown"><p><a href="{url}">{escape(link)}</a></p></div></details>'
    )


def entries_html(entries: Sequence[Any]) -> SafeString:
    """A list's items (LLM calls, tool calls, notes): built in Python, a long task has hundreds."""
    return mark_safe("".join(f"<li>{e.html()}</li>" for e in entries))  # noqa: S308 - escaped per entry


# The parts of a run ---------------------------------------------------------------------------


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

    def html(self, oob: bool = False) -> str:
        # A long run has hundreds of calls and each is a handful of translated, formatted
        # figures: the markup is memoised per language on everything it shows.
        return _llm_call_html(get_language(), self.seq, self.model, self.purpose, self.status, self.prompt_tokens,
                              self.completion_tokens, self.cost_usd, self.latency_ms, self.error, self.retrying, oob,
                              self.run_id, self.ended_seq)


@functools.lru_cache(maxsize=8192)
def _llm_call_html(language: str | None, seq: int, model: str, purpose: str, status: str, prompt_tokens: int,
                   completion_tokens: int, cost_usd: float | None, latency_ms: int | None, error: str,
                   retrying: bool, oob: bool, run_id: int = 0, ended_seq: int | None = None) -> str:
    """``LLMCall.html`` of a call with these fields, in ``language`` (the active one). An ended
    call is a disclosure that loads what it sent and got back when opened."""
    words = labels("entry")
    what = words["llm"] % {"purpose": purpose_label(purpose)}
    meta = f"<span>{escape_label(model)}</span>"
    if status == "running":
        what += "…"
    elif status == "done":
        title = words["in_out"] % {"p": prompt_tokens, "c": completion_tokens}
        tokens = words["tokens"] % {"n": tokens_text(prompt_tokens + completion_tokens)}
        latency = duration_text(latency_ms / 1000) if latency_ms is not None else "—"
        meta += (f'<span title="{escape(title)}">{escape(tokens)}</span><span>{escape_label(usd(cost_usd))}</span>'
                 f"<span>{escape(latency)}</span>")
    error_html = ""
    if status == "failed":
        text = error or words["cut"]
        if retrying:
            text += " " + words["retrying"]
        error_html = f'<span class="entry__error">{escape(text)}</span>'
    row = (f'<span class="entry__mark" aria-hidden="true"></span><span class="entry__what">{escape_label(what)}</span>'
           f'<span class="entry__meta">{meta}</span>{error_html}')
    if ended_seq is None or status == "running":
        return f'<div id="llm-{seq}" class="entry entry--llm" data-status="{status}"{_oob(oob)}>{row}</div>'
    summary = mark_safe(row)  # noqa: S308 - every part escaped above
    return loaded_when_opened(llm_call_url(run_id, ended_seq), css_class="entry entry--llm", summary=summary,
                              link=words["show_sent"], attrs=f' id="llm-{seq}" data-status="{status}"{_oob(oob)}')


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
            text = ", ".join(f"{k}={_text(v)}" for k, v in self.args.items())
        else:
            text = _text(self.args)
        return text if len(text) <= 80 else text[:79] + "…"

    def html(self, oob: bool = False) -> str:
        words = labels("entry")
        state = words["cached"] if self.from_cache else words.get(self.status, words["done"])
        short = f'<span class="entry__args">({escape(self.args_short)})</span>' if self.args_short else ""
        body = ""
        if self.args_text:
            body += (f'<p class="entry__label">{escape(words["arguments"])}</p>'
                     f'<pre tabindex="0">{escape(self.args_text)}</pre>')
        if self.status == "done":
            body += f'<p class="entry__label">{escape(words["output"])}</p><pre tabindex="0">{escape(self.output)}</pre>'
        if self.error:
            body += (f'<p class="entry__label">{escape(words["error"])}</p>'
                     f'<pre class="entry__error" tabindex="0">{escape(self.error)}</pre>')
        return (f'<details id="{self.dom_id}" class="entry entry--tool" data-status="{self.status}"{_oob(oob)}>'
                f'<summary><span class="entry__mark" aria-hidden="true"></span>'
                f'<span class="entry__what"><code>{escape(self.name)}</code>{short}</span>'
                f'<span class="entry__meta">{escape(state)}</span></summary>{body}</details>')


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

    def html(self, oob: bool = False) -> str:
        detail = f' <span class="entry__detail">{escape(self.detail)}</span>' if self.detail else ""
        return (f'<div id="{self.dom_id}" class="entry entry--note entry--{self.tone}"{_oob(oob)}>'
                f'<span class="entry__mark" aria-hidden="true"></span>'
                f'<span class="entry__what">{escape(self.text)}</span>{detail}</div>')


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

    # A long run has hundreds of steps: their parts are built here, as activity entries are,
    # not by the template engine (which took a third of the page). Everything is escaped.

    def html(self, oob: bool = False) -> SafeString:
        """The step: its head, result, activity and the live area its streamed tokens go to."""
        words = labels("step_parts")
        return mark_safe(  # noqa: S308 - every value is escaped here or in the parts
            f'<div id="{self.dom_id}" class="step"{_oob(oob)}>{self.head_html()}'
            f'<div class="step__body">{self.result_part_html()}'
            f'<details class="activity activity--step"><summary>{escape(words["activity"])}</summary>'
            f'<ol id="activity-{self.dom_id}" class="entries">{entries_html(self.activity)}</ol></details></div>'
            f'<div id="delta-{self.dom_id}" class="stream stream--step" aria-live="polite" tabindex="0"></div></div>'
        )

    def head_html(self, oob: bool = False) -> str:
        words = labels("step_parts")
        badges = f'<span class="badge badge--info">{escape(words["refined"])}</span>' if self.refined else ""
        if self.tool:
            badges += f'<span class="badge">{escape(words["tool"] % {"tool": self.tool})}</span>'
        return (
            f'<div id="{self.dom_id}-head" class="step-head" data-status="{escape(self.status)}"{_oob(oob)}>'
            f'<span class="step-head__mark" aria-hidden="true"></span>'
            f'<span class="step-head__number">{self.number}.</span>'
            f'<span class="step-head__text">{escape(self.description)}</span>'
            f'<span class="step-head__badges">{badges}'
            f'<span class="badge badge--{self.tone} step-head__state">{escape(self.label)}</span></span></div>'
        )

    def result_part_html(self, oob: bool = False) -> str:
        """What the step came to: its error or why it was skipped, its result, its review.

        The result itself loads when its disclosure first opens (htmx's ``toggle once``, from
        ``crews:run-step-result``); without JavaScript the link inside shows it on its own page.
        """
        words = labels("step_parts")
        body = f'<p class="step-result__error">{escape(self.error)}</p>' if self.error else ""
        if self.reason:
            body += f'<p class="muted">{escape(words["skipped"] % {"reason": self.reason})}</p>'
        if self.result:
            url = step_result_url(self.run_id, self.result_seq)
            body += loaded_when_opened(url, css_class="step-result__details", summary=words["result"],
                                       link=words["show_result"])
        if self.learned or self.reviewed_ok is False:
            verdict = (f'<span class="badge badge--warning">{escape(words["not_quite"])}</span>'
                       if self.reviewed_ok is False else escape(words["review"]))
            body += f'<p class="step-result__review">{verdict} {escape(self.learned)}</p>'
        return f'<div id="{self.dom_id}-result" class="step-result"{_oob(oob)}>{body}</div>'

    _PARTS: ClassVar[dict[str, str]] = {"step": "html", "step-head": "head_html", "step-result": "result_part_html"}

    def part_html(self, part: str, *, oob: bool) -> str:
        """``part`` of the step (``step``, ``step-head``, ``step-result``), for the socket."""
        return str(getattr(self, self._PARTS[part])(oob=oob))


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


class _UsageAndOutput:
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
class TaskView(_UsageAndOutput):
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

    @property
    def tone(self) -> str:
        return TASK_STATUS_TONE.get(self.status, "muted")

    @property
    def label(self) -> str:
        return task_status_label(self.status)

    @property
    def activity_html(self) -> SafeString:
        return entries_html(self.activity)

    @property
    def waits_for_person(self) -> bool:
        if self.status != "running":
            return False
        return (self.feedback is not None and self.feedback.status == "pending") or any(
            a.status == "pending" for a in self.approvals)

    @property
    def steps(self) -> list[Step]:
        return [s for seg in self.plan if isinstance(seg, PlanSegment) for s in seg.steps]

    @property
    def answer_loader_html(self) -> SafeString:
        """The answer of a finished crew run, closed: it loads when opened, as a step's result
        does (``loaded_when_opened``)."""
        words = labels("task_answer")
        url = step_result_url(self.run_id, self.output_seq)
        html = loaded_when_opened(url, css_class="answer", summary=words["answer"], link=words["show_answer"])
        return mark_safe(html)  # noqa: S308 - escaped in loaded_when_opened

    @property
    def has_content(self) -> bool:
        return bool(self.plan or self.activity or self.approvals or self.feedback or self.output or self.error)

    @property
    def head_main_html(self) -> SafeString:
        """The task head's mark, title and facts (status, agent, steps done, usage): built here,
        not in the template, as the socket re-renders the head with most events (its usage
        changes with every LLM call). Its actions (forms) stay in the ``task-head`` partial."""
        words = labels("task_head")
        if self.waits_for_person:
            badge = f'<span class="badge badge--warning">{escape(words["waiting"])}</span>'
        else:
            drafting = bool(self.crew_plan) and self.crew_plan.get("status") == "drafting"  # type: ignore[union-attr]
            badge = f'<span class="badge badge--{self.tone}">{escape(words["drafting"] if drafting else self.label)}</span>'
        meta = [badge]
        if self.agent:
            meta.append(f'<span class="muted">{escape(self.agent)}</span>')
        version = (self.crew_plan or {}).get("version")
        if version:
            meta.append(f'<span class="muted">{escape(words["version"] % {"v": version})}</span>')
        steps = self.steps
        if steps:
            done = sum(1 for s in steps if s.status == "completed")
            meta.append(f'<span class="muted">{escape(words["steps_done"] % {"done": done, "total": len(steps)})}</span>')
        if self.llm_calls:
            usage = ngettext("%(n)s LLM call · %(tokens)s tokens · %(cost)s",
                             "%(n)s LLM calls · %(tokens)s tokens · %(cost)s", self.llm_calls)
            usage %= {"n": self.llm_calls, "tokens": self.tokens, "cost": self.cost}
            meta.append(f'<span class="muted task-head__usage">{escape(usage)}</span>')
        if self.reused:
            meta.append(f'<span class="badge badge--muted">{escape(words["reused"])}</span>')
        number = f'<span class="task-head__number">{self.number}.</span> ' if self.number else ""
        return mark_safe(  # noqa: S308 - every value is escaped above
            f'<span class="task-head__mark" aria-hidden="true"></span><div class="task-head__main">'
            f'<h3 id="task-{self.key}-title" class="task-head__title">{number}{escape(self.name)}</h3>'
            f'<p class="task-head__meta">{chr(10).join(meta)}</p></div>'
        )


@dataclass(slots=True)
class LogRow:
    seq: int
    type: str
    at: datetime | None
    task_id: int | None
    summary: str


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


def log_row_html(row: LogRow) -> str:
    """One row of the event log (escaped). Built in Python: a long run has thousands of them."""
    iso = row.at.isoformat() if row.at else ""
    at = iso[11:19]  # HH:MM:SS
    task = f' data-task="{row.task_id}"' if row.task_id is not None else ""
    summary = f' <span class="run-event-summary">{escape(row.summary)}</span>' if row.summary else ""
    type_ = escape_label(row.type)
    return (
        f'<li id="event-{row.seq}" class="run-event" data-seq="{row.seq}" data-type="{type_}"{task}>'
        f'<time datetime="{iso}">{at}</time> <code class="run-event-type">{type_}</code>{summary}</li>'
    )


# Changes: what an event altered, for the socket to re-render ------------------------------------


@dataclass(slots=True)
class Change:
    """Re-render ``part`` (a partial of ``crews/run_detail.html``) with ``context``.

    Without ``into`` the part replaces the element with its id (``hx-swap-oob="true"``); with
    ``into`` it is appended to that element (wrapped in ``wrapper`` so lists stay valid HTML).
    """

    part: str
    context: dict[str, Any]
    into: str | None = None
    wrapper: str = "div"


# The fold -------------------------------------------------------------------------------------


# What sets a waiting run running again: the events that end each wait (``_resume_work``).
_RESUMED_BY: dict[str, tuple[str, ...]] = {
    "awaiting_input": ("run.running", "feedback.received", "approval.resolved", "task.started"),
    "awaiting_approval": ("run.running", "crew_plan.approved", "task.started"),
    "planning": ("run.running", "crew_plan.approved", "task.started"),
}


class RunView(_UsageAndOutput):
    """The run's state after its events up to ``last_seq``; ``apply`` moves it one event on."""

    def __init__(self, run: Run, tasks: Iterable[RunTask] = (), *, started_task_ids: Iterable[int] = ()) -> None:
        self.run = run
        self.is_agent_run = run.crew_id is None
        self.status = "queued"
        self.last_seq = 0
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.paused_at: datetime | None = None  # interrupted: the clock stops until resumed
        self.output = ""
        self.error = ""
        self.notice_reason = ""
        self.waiting: dict[str, Any] | None = None  # what the run waits for a person to do
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = 0
        self.llm_calls = 0
        self.log: list[LogRow] = []
        self.tasks: list[TaskView] = []
        self.by_id: dict[int, TaskView] = {}
        started = set(started_task_ids)
        for row in tasks:
            task = TaskView(
                key=str(row.task_id_snapshot), task_id=row.task_id_snapshot, number=row.order + 1,
                name=row.name, agent=row.agent_name, run_id=run.pk,
            )
            if row.status == RunTask.Status.DONE and row.task_id_snapshot not in started:
                task.status, task.output, task.reused = "done", row.output, True
            self.tasks.append(task)
            self.by_id[row.task_id_snapshot] = task
        if self.is_agent_run:
            agent = (run.snapshot or {}).get("agent") or {}
            self.scope = TaskView(key=RUN_SCOPE, task_id=None, number=None, run_id=run.pk,
                                  name=agent.get("name") or _("Agent"), agent=agent.get("role", ""))
        else:
            self.scope = TaskView(key=RUN_SCOPE, task_id=None, number=None, name=_("Crew plan"), crew_plan={},
                                  run_id=run.pk)
        self._open_llm: dict[tuple[str, str], list[LLMCall]] = {}
        self._open_tools: dict[tuple[str, str], list[ToolCall]] = {}
        self._steps: dict[tuple[str, str], Step] = {}
        self._changes: list[Change] | None = None
        self._scope_shown = True
        # Approved crew plans' steps by (plan id, version), loaded by whoever builds the view.
        self.plan_steps: dict[tuple[int, int], dict[int, list[tuple[int, str]]]] = {}

    # Building ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, run: Run, *, upto: int | None = None) -> RunView:
        """The view of ``run`` from the database: its task rows, then its events in one query."""
        events = RunEvent.objects.filter(run_id=run.pk).order_by("seq")
        if upto is not None:
            events = events.filter(seq__lte=upto)
        rows = list(events.values_list("seq", "type", "task_id", "step_id", "data", "at"))
        if upto is None:
            started = {r[2] for r in rows if r[1] == "task.started"}
        else:  # a task that starts later was not done when this run began either
            started = set(RunEvent.objects.filter(run_id=run.pk, type="task.started")
                          .values_list("task_id", flat=True))
        view = cls(run, RunTask.objects.filter(run_id=run.pk).order_by("order"), started_task_ids=started)
        approved = [plan_key(r[4]) for r in rows if r[1] == "crew_plan.approved"]
        if approved and approved[-1] is not None:
            view.plan_steps[approved[-1]] = crew_plan_steps(*approved[-1])
        for seq, type_, task_id, step_id, data, at in rows:
            view.fold(seq, type_, task_id, step_id or None, data or {}, at)
        view.finish_building()
        return view

    def finish_building(self) -> None:
        self._update_rerunnable()
        self._scope_shown = self.show_scope

    # Reading ----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def status_tone(self) -> str:
        return RUN_STATUS_TONE.get(self.status, "muted")

    @property
    def status_label(self) -> str:
        return run_status_label(self.status)

    @property
    def clock_running(self) -> bool:
        return self.started_at is not None and self.finished_at is None and self.paused_at is None

    @property
    def elapsed_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or self.paused_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def elapsed(self) -> str:
        """h:mm:ss, as run.js ticks it on while the run works."""
        seconds = self.elapsed_seconds
        if seconds is None:
            return "—"
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

    @property
    def all_tasks(self) -> list[TaskView]:
        return [self.scope, *self.tasks]

    @property
    def show_scope(self) -> bool:
        """A crew's run scope (its plan, its manager) is shown once it has something to show."""
        return self.is_agent_run or self.scope.has_content or bool(self.scope.crew_plan)

    @property
    def log_html(self) -> SafeString:
        return mark_safe("".join(log_row_html(r) for r in self.log))  # noqa: S308 - escaped per row

    @property
    def has_pending_prompts(self) -> bool:
        return any(
            (t.feedback is not None and t.feedback.status == "pending")
            or any(a.status == "pending" for a in t.approvals)
            for t in self.all_tasks
        )

    @property
    def event_count(self) -> int:
        return len(self.log)

    def task_for(self, task_id: int | None) -> TaskView:
        if task_id is None:
            return self.scope
        task = self.by_id.get(task_id)
        if task is None:  # not in the snapshot (should not happen): shown at the end
            task = TaskView(key=str(task_id), task_id=task_id, number=len(self.tasks) + 1,
                            name=_("Task %(id)s") % {"id": task_id}, run_id=self.run.pk)
            self.tasks.append(task)
            self.by_id[task_id] = task
            self._emit(Change("task", {"task": task}, into="tasks", wrapper="ol"))
        return task

    # Applying ---------------------------------------------------------------------------------

    def apply(self, event: dict[str, Any]) -> list[Change]:
        """Fold one stored event (API.md's Event shape) and say which parts changed."""
        self._changes = []
        try:
            self.fold(event["seq"], event["type"], event.get("task_id"), event.get("step_id"),
                      event.get("data") or {}, _at(event.get("at")))
            return self._dedupe(self._changes)
        finally:
            self._changes = None

    def _emit(self, change: Change) -> None:
        if self._changes is not None:
            self._changes.append(change)

    @staticmethod
    def _dedupe(changes: list[Change]) -> list[Change]:
        """A part replaced twice is rendered once (its latest state is what both show)."""
        seen: set[tuple[str, str]] = set()
        out: list[Change] = []
        for change in reversed(changes):
            if change.into is None:
                ident = (change.part, _ident(change.context))
                if ident in seen:
                    continue
                seen.add(ident)
            out.append(change)
        out.reverse()
        return out

    def fold(self, seq: int, type_: str, task_id: int | None, step_id: str | None,
             data: dict[str, Any], at: datetime | None) -> None:
        self.last_seq = max(self.last_seq, seq)
        self.log.append(LogRow(seq, type_, at, task_id, summary_of(data)))
        self._resume_work(type_)
        handler = _HANDLERS.get(type_)
        if handler is not None:
            handler(self, seq, task_id, step_id, data, at)
        if type_.startswith("run."):
            self._emit_run_parts()  # a run.* event always restates the run's status
        if not self._scope_shown and self.show_scope:
            self._scope_shown = True  # a crew's plan or manager has something to show now
            self._emit(Change("task", {"task": self.scope}))

    # Run status -------------------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self._emit_run_parts()

    def _emit_run_parts(self) -> None:
        for part in ("run-status", "run-stats", "run-controls", "run-notice"):
            self._emit(Change(part, {}))

    def _resume_work(self, type_: str) -> None:
        """A person's answer or an approved plan sets the run running again (``run.running``).

        Runs recorded before ``run.running`` existed are read from the events that follow.
        """
        if type_ in _RESUMED_BY.get(self.status, ()):
            if self.waiting is not None:
                self.waiting = None
                self._emit(Change("run-notice", {}))
            self._set_status("running")

    def on_run_queued(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._set_status("queued")

    def on_run_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        if self.started_at is None:
            self.started_at = at
        if self.paused_at is not None and at is not None and self.started_at is not None:
            # resumed after an interruption: the time it sat interrupted does not count
            self.started_at += at - self.paused_at
        self.paused_at = None
        self._set_status("running")
        self._emit(Change("run-stats", {}))
        if self.is_agent_run:
            if self.scope.started:  # a resumed agent run starts its work over
                self._reset_task(self.scope)
                self.scope.status = "running"
                self._emit(Change("task", {"task": self.scope}))
            self._task_status(self.scope, "running", started=True)

    def _reset_task(self, task: TaskView) -> None:
        task.plan, task.activity, task.approvals, task.feedback = [], [], [], None
        task.output = task.error = ""
        task.output_seq = 0
        task.reused = False
        for key in [k for k in self._steps if k[0] == task.key]:
            del self._steps[key]
        for key in [k for k in (*self._open_llm, *self._open_tools) if k[0] == task.key]:
            self._open_llm.pop(key, None)
            self._open_tools.pop(key, None)

    def on_run_planning(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._set_status("planning")

    def on_run_awaiting_approval(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.waiting = {"kind": "plan", "plan_id": data.get("plan_id"), "version": data.get("version"),
                        "url": plan_url(data.get("plan_id"))}
        if data.get("kind") == "deviation":
            # A step of the approved plan failed and the crew asks first: the agent's proposal is
            # the plan's newest version; the person compares it with the approved one.
            task = self.task_for(data.get("task_id"))
            self.waiting.update(kind="deviation", task=task.name, reason=_text(data.get("reason")),
                                diff_url=plan_diff_url(data.get("plan_id"), data.get("version")))
        self._set_status("awaiting_approval")
        self._emit(Change("run-notice", {}))

    def on_run_awaiting_input(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        kind = data.get("kind", "feedback")
        target = None
        for task in self.all_tasks:
            if kind == "feedback" and task.feedback is not None and task.feedback.status == "pending":
                target = f"prompt-{task.key}"
            if kind == "approval":
                for approval in task.approvals:
                    if approval.approval_id == data.get("approval_id"):
                        target = approval.dom_id
        self.waiting = {"kind": kind, "target": target}
        self._set_status("awaiting_input")
        self._emit(Change("run-notice", {}))

    def on_run_cancelling(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.waiting = None
        self._set_status("cancelling")

    def on_run_resumed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.notice_reason = ""
        self._set_status("queued")

    def on_run_end(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None, *, status: str) -> None:
        self.waiting = None
        self.notice_reason = _message(data.get("reason"))
        if status == "interrupted":
            self.paused_at = at
        else:
            self.finished_at = at
        if status == "succeeded":
            self.output = _text(data.get("output"))
            self._emit(Change("run-output", {}))
        if status == "failed":
            self.error = _message(data.get("error"))
        # What was in progress ends with the run.
        end_task = {"succeeded": "done", "failed": "failed", "cancelled": "stopped", "interrupted": "waiting"}[status]
        for task in self.all_tasks:
            if self.is_agent_run and task is self.scope and status in ("succeeded", "failed"):
                task.output, task.error = self.output, self.error
                self._task_status(task, end_task, answer=True)
            elif task.status == "running":
                self._task_status(task, "stopped" if status != "interrupted" else "waiting", answer=True)
            if task.feedback is not None and task.feedback.status == "pending":
                task.feedback.status = "closed"
                self._emit(Change("task-prompt", {"task": task}))
            for approval in task.approvals:
                if approval.status == "pending":
                    approval.status = "closed"
                    self._emit(Change("approval", {"approval": approval, "task": task}))
            for llm in (e for e in task.activity if isinstance(e, LLMCall) and e.status == "running"):
                llm.status = "failed"
                self._emit(Change("entry", {"entry": llm}))
        for calls in self._open_llm.values():
            for llm in calls:
                if llm.status == "running":
                    llm.status = "failed"
                    self._emit(Change("entry", {"entry": llm}))
        self._open_llm.clear()
        self._set_status(status)
        self._emit_run_parts()
        self._update_rerunnable()

    # Crew plan --------------------------------------------------------------------------------

    def _crew_plan(self, **values: Any) -> None:
        state = self.scope.crew_plan if self.scope.crew_plan is not None else {}
        state.update(values)
        self.scope.crew_plan = state
        if "plan_id" in values:
            state["url"] = plan_url(values["plan_id"])
        status = state.get("status", "running")
        self.scope.status = {"drafting": "running", "failed": "failed", "drafted": "drafted",
                             "approved": "approved"}.get(status, "running")
        self._emit(Change("task-head", {"task": self.scope}))

    def on_crew_plan_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="drafting")

    def on_crew_plan_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="drafted", plan_id=data.get("plan_id"), version=data.get("version"))

    def on_crew_plan_approved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="approved", plan_id=data.get("plan_id"), version=data.get("version"))
        steps = self.plan_steps.get(plan_key(data) or (0, 0), {})
        for task in self.tasks:
            if task.task_id is not None and task.status in ("waiting", "running"):
                rows = [{"step_id": f"{task.task_id}.p{uid}", "number": n, "description": text}
                        for n, (uid, text) in enumerate(steps.get(task.task_id, []), start=1)]
                self._approved_segment(task, rows)

    def _approved_segment(self, task: TaskView, rows: list[dict[str, Any]]) -> None:
        """The task's approved crew-plan steps, each waiting for its turn: the agent's plan
        whatever its kind (ENGINE.md §2b), so their statuses tick here as the run goes."""
        old = next((s for s in task.plan if isinstance(s, PlanSegment) and s.status == "approved"), None)
        if old is not None and [s.step_id for s in old.steps] == [_text(r.get("step_id")) for r in rows]:
            return
        if old is not None:
            task.plan.remove(old)
            for step in old.steps:
                self._steps.pop((task.key, step.step_id), None)
        if not rows:
            if old is not None:
                self._emit(Change("task", {"task": task}))
            return
        segment = PlanSegment(task_key=task.key, replan=0, status="approved")
        for raw in rows:
            step = Step(step_id=_text(raw.get("step_id")), number=int(raw.get("number") or 0),
                        description=_text(raw.get("description")), task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, step.step_id)] = step
        task.plan.insert(0, segment)
        self._emit(Change("task", {"task": task}))

    def on_agent_plan_bound(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._approved_segment(task, [r for r in data.get("steps") or [] if isinstance(r, dict)])

    def on_crew_plan_deviated(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        item = Deviation(seq, _text(data.get("reason")), [_text(t) for t in data.get("before") or []],
                         [_text(t) for t in data.get("after") or []], bool(data.get("approved_by_person")))
        self._plan_note(task, item)  # type: ignore[arg-type]
        if self.waiting and self.waiting.get("kind") == "plan":
            self.waiting = None
            self._emit(Change("run-notice", {}))

    def on_crew_plan_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="failed", error=_text(data.get("error")))
        self._note(self.scope, None, Note(seq, _("The crew plan failed."), "danger", _text(data.get("error"))))

    def on_warning(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        note = Note(seq, _message(data.get("message")) or _("Warning"), "warning")
        if step_id and (task.key, step_id) not in self._steps:
            step_id = None
        self._note(task, step_id, note)

    # Tasks ------------------------------------------------------------------------------------

    def _task_status(self, task: TaskView, status: str, *, started: bool = False, answer: bool = False) -> None:
        task.status = status
        task.started = task.started or started
        self._emit(Change("task-head", {"task": task}))
        if answer:
            self._emit(Change("task-answer", {"task": task}))

    def on_task_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        # A resumed run starts an interrupted task over: what it had done is replaced.
        self._reset_task(task)
        if data.get("agent"):
            task.agent = _text(data.get("agent"))
        task.status, task.started = "running", True
        self._emit(Change("task", {"task": task}))
        self._update_rerunnable()

    def on_task_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.output, task.output_seq = _text(data.get("output")), seq
        self._task_status(task, "done", answer=True)
        self._update_rerunnable()

    def on_task_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.error = _text(data.get("error"))
        self._task_status(task, "failed", answer=True)

    def on_task_skipped(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.error = _text(data.get("reason"))
        self._task_status(task, "skipped", answer=True)

    def on_task_delegated(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Delegated to %(coworker)s") % {"coworker": _text(data.get("coworker"))}
        self._note(task, step_id, Note(seq, text, "info", _text(data.get("task"))))

    # The agent's own plan -----------------------------------------------------------------------

    def _segment(self, task: TaskView, replan: int) -> PlanSegment | None:
        for item in reversed(task.plan):
            if isinstance(item, PlanSegment) and item.replan == replan:
                return item
        return None

    def on_agent_plan_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        if segment is None:
            segment = PlanSegment(task_key=task.key, replan=replan, attempt=int(data.get("attempt") or 1))
            task.plan.append(segment)
            self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
        else:
            segment.attempt = int(data.get("attempt") or segment.attempt)
            segment.status = "drafting"
            self._emit(Change("plan-item", {"item": segment, "task": task}))

    def on_agent_plan_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        new = segment is None
        if segment is None:
            segment = PlanSegment(task_key=task.key, replan=replan)
            task.plan.append(segment)
        for old in segment.steps:  # a refined attempt replaces the previous attempt's steps
            self._steps.pop((task.key, old.step_id), None)
        segment.attempt = int(data.get("attempt") or 1)
        segment.status = "ready" if data.get("ready", True) else "not_ready"
        segment.steps = []
        for raw in data.get("steps") or []:
            if not isinstance(raw, dict):
                continue
            step = Step(step_id=_text(raw.get("step_id")), number=int(raw.get("number") or 0),
                        description=_text(raw.get("description")), tool=raw.get("tool"),
                        task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, step.step_id)] = step
        if new:
            self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
        else:
            self._emit(Change("plan-item", {"item": segment, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_agent_plan_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        if segment is not None and segment.status == "drafting":
            segment.status, segment.error = "failed", _text(data.get("error"))
            self._emit(Change("plan-item", {"item": segment, "task": task}))
        else:
            self._plan_note(task, Note(seq, _("Planning failed."), "danger", _text(data.get("error"))))

    def on_agent_plan_refined(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        for item in data.get("refinements") or []:
            step = self._steps.get((task.key, _text(item.get("step_id"))))
            if step is not None:
                step.description, step.refined = _text(item.get("text")), True
                self._emit(Change("step-head", {"step": step, "task": task}))
        after = data.get("after_step")
        text = ngettext(
            "After step %(n)s the agent refined %(count)d later step.",
            "After step %(n)s the agent refined %(count)d later steps.",
            len(data.get("refinements") or []),
        ) % {"n": after, "count": len(data.get("refinements") or [])}
        self._plan_note(task, Note(seq, text, "info"))

    def on_agent_plan_replanned(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Replanned (%(count)s): %(reason)s") % {"count": data.get("count", 1), "reason": _text(data.get("reason"))}
        self._plan_note(task, Note(seq, text, "warning"))

    def on_agent_plan_goal_achieved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Goal reached after %(done)s steps; %(left)s left undone.") % {
            "done": data.get("steps_done", 0), "left": data.get("steps_left", 0)}
        self._plan_note(task, Note(seq, text, "success"))

    def _plan_note(self, task: TaskView, note: Note | Deviation) -> None:
        task.plan.append(note)
        self._emit(Change("plan-item", {"item": note, "task": task}, into=f"plan-{task.key}"))

    # Steps ------------------------------------------------------------------------------------

    def _step(self, task: TaskView, step_id: str | None, data: dict[str, Any]) -> Step | None:
        key = step_id or _text(data.get("step_id"))
        if not key:
            return None
        step = self._steps.get((task.key, key))
        if step is None:  # a step the plan did not announce: it gets a segment of its own
            segment = self._segment(task, -1)
            if segment is None:
                segment = PlanSegment(task_key=task.key, replan=-1, status="ready")
                task.plan.append(segment)
                self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
            step = Step(step_id=key, number=int(data.get("number") or 0), description=_text(data.get("description")),
                        task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, key)] = step
            self._emit(Change("step", {"step": step, "task": task}, into=f"steps-{segment.dom_id}", wrapper="ol"))
        return step

    def on_step_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status = "running"
        if data.get("description"):
            step.description = _text(data.get("description"))
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_step_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status = _text(data.get("outcome")) or "completed"
        step.result, step.error = _text(data.get("result")), _text(data.get("error"))
        step.result_seq = seq
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("step-result", {"step": step, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_step_skipped(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status, step.reason = "skipped", _text(data.get("reason"))
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("step-result", {"step": step, "task": task}))

    def on_step_observed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.learned = _text(data.get("learned"))
        if data.get("reviewed", True) and not data.get("review_failed"):
            step.reviewed_ok = bool(data.get("success"))
        self._emit(Change("step-result", {"step": step, "task": task}))

    # Activity: LLM calls, tools, notes ----------------------------------------------------------

    def _container(self, task: TaskView, step_id: str | None) -> tuple[list[Any], str, Step | None]:
        step = self._steps.get((task.key, step_id)) if step_id else None
        if step is not None:
            return step.activity, f"activity-step-{task.key}-{step.key}", step
        return task.activity, f"activity-{task.key}", None

    def _add_entry(self, task: TaskView, step_id: str | None, entry: Any) -> None:
        entries, container, _step = self._container(task, step_id)
        entries.append(entry)
        if self._changes is not None:  # building the page's view from stored events: no changes to say
            self._emit(Change("entry", {"entry": entry}, into=container, wrapper="ol"))

    def _note(self, task: TaskView, step_id: str | None, note: Note) -> None:
        self._add_entry(task, step_id, note)

    def on_llm_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = LLMCall(seq=seq, model=_text(data.get("model")), purpose=_text(data.get("purpose")), run_id=self.run.pk)
        self._open_llm.setdefault((task.key, step_id or ""), []).append(call)
        self._add_entry(task, step_id, call)
        if self._changes is None:
            return
        # The stream area shows the call in progress: a new call starts it afresh.
        _entries, _container, step = self._container(task, step_id)
        target = f"delta-step-{task.key}-{step.key}" if step is not None else f"delta-{task.key}"
        self._emit(Change("delta", {"target": target, "step_stream": step is not None}))

    def _close_llm(self, task: TaskView, step_id: str | None, seq: int, data: dict[str, Any]) -> LLMCall:
        calls = self._open_llm.get((task.key, step_id or ""))
        if calls:
            call = calls.pop(0)
            call.ended_seq = seq
            return call
        call = LLMCall(seq=seq, model=_text(data.get("model")), purpose=_text(data.get("purpose")), run_id=self.run.pk,
                       ended_seq=seq)
        self._add_entry(task, step_id, call)
        return call

    def on_llm_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = self._close_llm(task, step_id, seq, data)
        call.status = "done"
        call.prompt_tokens = int(data.get("prompt_tokens") or 0)
        call.completion_tokens = int(data.get("completion_tokens") or 0)
        cost = data.get("cost_usd")
        call.cost_usd = float(cost) if cost is not None else None
        call.latency_ms = int(data["latency_ms"]) if data.get("latency_ms") is not None else None
        for holder in (self, task):
            holder.prompt_tokens += call.prompt_tokens
            holder.completion_tokens += call.completion_tokens
            holder.cost_usd += call.cost_usd or 0.0
            holder.cost_unknown += cost is None
            holder.llm_calls += 1
        if self._changes is not None:
            self._emit(Change("entry", {"entry": call}))
            self._emit(Change("run-stats", {}))
            self._emit(Change("task-head", {"task": task}))

    def on_llm_failed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = self._close_llm(task, step_id, seq, data)
        call.status, call.error, call.retrying = "failed", _text(data.get("error")), bool(data.get("retrying"))
        self._emit(Change("entry", {"entry": call}))

    def on_tool_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = ToolCall(seq=seq, name=_text(data.get("name")), args=data.get("args"))
        self._open_tools.setdefault((task.key, step_id or ""), []).append(call)
        self._add_entry(task, step_id, call)

    def _close_tool(self, task: TaskView, step_id: str | None, seq: int, data: dict[str, Any]) -> tuple[ToolCall, bool]:
        name = _text(data.get("name"))
        calls = self._open_tools.get((task.key, step_id or ""), [])
        for index, call in enumerate(calls):
            if call.name == name:
                return calls.pop(index), False
        return ToolCall(seq=seq, name=name), True  # failed before it started (bad arguments)

    def on_tool_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call, new = self._close_tool(task, step_id, seq, data)
        call.status, call.output, call.from_cache = "done", _text(data.get("output")), bool(data.get("from_cache"))
        if new:
            self._add_entry(task, step_id, call)
        else:
            self._emit(Change("entry", {"entry": call}))

    def on_tool_failed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call, new = self._close_tool(task, step_id, seq, data)
        call.status, call.error = "failed", _text(data.get("error"))
        if new:
            self._add_entry(task, step_id, call)
        else:
            self._emit(Change("entry", {"entry": call}))

    def on_budget_exceeded(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Budget reached: %(limit)s (used %(used)s of %(allowed)s).") % {
            "limit": _text(data.get("limit")), "used": _text(data.get("used")), "allowed": _text(data.get("allowed"))}
        self._note(task, step_id if (task.key, step_id) in self._steps else None, Note(seq, text, "danger"))

    # People -----------------------------------------------------------------------------------

    def on_approval_requested(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        approval = Approval(seq=seq, approval_id=_text(data.get("approval_id")), tool=_text(data.get("tool")),
                            args=data.get("args"))
        task.approvals.append(approval)
        self._emit(Change("approval", {"approval": approval, "task": task}, into=f"approvals-{task.key}"))

    def on_approval_resolved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        wanted = _text(data.get("approval_id"))
        for approval in task.approvals:
            if approval.approval_id == wanted or (not wanted and approval.status == "pending"):
                approval.status = "approved" if data.get("approve") else "denied"
                approval.note = _text(data.get("note"))
                self._emit(Change("approval", {"approval": approval, "task": task}))
                break

    def on_feedback_requested(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        task.feedback = Feedback(seq=seq, answer=_text(data.get("answer")))
        self._emit(Change("task-prompt", {"task": task}))

    def on_feedback_received(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        if task.feedback is None:
            task.feedback = Feedback(seq=seq, answer="")
        task.feedback.status, task.feedback.text = "answered", _text(data.get("text"))
        self._emit(Change("task-prompt", {"task": task}))
        text = task.feedback.text
        self._note(task, None, Note(seq, _("Feedback: %(text)s") % {"text": text} if text else _("Answer accepted."),
                                    "info" if text else "success"))

    def overlay_people(self, *, decided: dict[str, str], feedback_pending: bool) -> None:
        """Answers already in the database that the agent has not taken up yet (page renders)."""
        for task in self.all_tasks:
            for approval in task.approvals:
                if approval.status == "pending":
                    approval.decided = decided.get(approval.approval_id, "")
            if task.feedback is not None and task.feedback.status == "pending" and not feedback_pending:
                task.feedback.sent = True

    # Re-running from a task --------------------------------------------------------------------

    def _update_rerunnable(self) -> None:
        earlier_done = True
        for index, task in enumerate(self.tasks):
            before = task.rerunnable
            task.rerunnable = index > 0 and earlier_done
            earlier_done = earlier_done and task.status == "done"
            if before != task.rerunnable:
                self._emit(Change("task-head", {"task": task}))


def _ident(context: dict[str, Any]) -> str:
    for name in ("task", "step", "entry", "approval", "item"):
        obj = context.get(name)
        if obj is not None:
            return f"{name}:{id(obj)}"
    return json.dumps(context, sort_keys=True, default=str)


def _ended(status: str) -> Any:
    def handler(view: RunView, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        view.on_run_end(seq, task_id, step_id, data, at, status=status)
    return handler


_HANDLERS: dict[str, Any] = {
    "run.queued": RunView.on_run_queued,
    "run.started": RunView.on_run_started,
    "run.planning": RunView.on_run_planning,
    "run.awaiting_approval": RunView.on_run_awaiting_approval,
    "run.awaiting_input": RunView.on_run_awaiting_input,
    "run.cancelling": RunView.on_run_cancelling,
    "run.resumed": RunView.on_run_resumed,
    "run.succeeded": _ended("succeeded"),
    "run.failed": _ended("failed"),
    "run.cancelled": _ended("cancelled"),
    "run.interrupted": _ended("interrupted"),
    "crew_plan.started": RunView.on_crew_plan_started,
    "crew_plan.completed": RunView.on_crew_plan_completed,
    "crew_plan.approved": RunView.on_crew_plan_approved,
    "crew_plan.deviated": RunView.on_crew_plan_deviated,
    "agent_plan.bound": RunView.on_agent_plan_bound,
    "crew_plan.failed": RunView.on_crew_plan_failed,
    "crew_plan.warning": RunView.on_warning,
    "agent_plan.warning": RunView.on_warning,
    "task.started": RunView.on_task_started,
    "task.completed": RunView.on_task_completed,
    "task.failed": RunView.on_task_failed,
    "task.skipped": RunView.on_task_skipped,
    "task.delegated": RunView.on_task_delegated,
    "agent_plan.started": RunView.on_agent_plan_started,
    "agent_plan.completed": RunView.on_agent_plan_completed,
    "agent_plan.failed": RunView.on_agent_plan_failed,
    "agent_plan.refined": RunView.on_agent_plan_refined,
    "agent_plan.replanned": RunView.on_agent_plan_replanned,
    "agent_plan.goal_achieved": RunView.on_agent_plan_goal_achieved,
    "step.started": RunView.on_step_started,
    "step.completed": RunView.on_step_completed,
    "step.skipped": RunView.on_step_skipped,
    "step.observed": RunView.on_step_observed,
    "llm.started": RunView.on_llm_started,
    "llm.completed": RunView.on_llm_completed,
    "llm.failed": RunView.on_llm_failed,
    "tool.started": RunView.on_tool_started,
    "tool.completed": RunView.on_tool_completed,
    "tool.failed": RunView.on_tool_failed,
    "budget.exceeded": RunView.on_budget_exceeded,
    "approval.requested": RunView.on_approval_requested,
    "approval.resolved": RunView.on_approval_resolved,
    "feedback.requested": RunView.on_feedback_requested,
    "feedback.received": RunView.on_feedback_received,
}


def plan_key(data: dict[str, Any]) -> tuple[int, int] | None:
    """The (plan id, version) a crew_plan.approved event names."""
    try:
        return int(data["plan_id"]), int(data["version"])
    except (KeyError, TypeError, ValueError):
        return None


def crew_plan_steps(plan_id: int, version: int) -> dict[int, list[tuple[int, str]]]:
    """An approved crew plan version's steps (stable uid, text) by task id (one query)."""
    steps: dict[int, list[tuple[int, str]]] = {}
    rows = (PlanStep.objects.filter(version__plan_id=plan_id, version__number=version)
            .order_by("task_id_snapshot", "order").values_list("task_id_snapshot", "uid", "text"))
    for task_id, uid, text in rows:
        steps.setdefault(task_id, []).append((uid, text))
    return steps


def delta_target(task_id: int | None, step_id: str | None) -> str:
    """Where a streamed LLM delta goes: the step's live area, else the task's answer."""
    key = str(task_id) if task_id is not None else RUN_SCOPE
    if step_id:
        return f"delta-step-{key}-{dom_key(step_id)}"
    return f"delta-{key}"


def render_event_html(view: RunView, event: dict[str, Any], *, can_write: bool) -> str:
    """The websocket message for one event: out-of-band fragments for htmx's ws extension.

    A streamed delta is appended to its stream area. A stored event is folded into ``view``; the
    message is its event-log row (``<li id="event-N">``, appended to ``#run-events``) and every
    part of the page it changed, re-rendered from the same partials as the page. Everything the
    event carries is escaped (markdown is sanitised).
    """
    if event.get("seq") is None:
        target = delta_target(event.get("task_id"), event.get("step_id"))
        text = (event.get("data") or {}).get("text", "")
        return f'<span hx-swap-oob="beforeend:#{target}">{escape(_text(text))}</span>'
    changes = view.apply(event)
    parts = [f'<ol hx-swap-oob="beforeend:#run-events">{log_row_html(view.log[-1])}</ol>']
    base = {"view": view, "run": view.run, "can_write": can_write}
    for change in changes:
        if change.part == "entry":
            html = change.context["entry"].html(oob=change.into is None)
        elif change.part in ("step", "step-head", "step-result"):
            html = change.context["step"].part_html(change.part, oob=change.into is None)
        elif change.part == "delta":  # a new LLM call empties its stream area (every call: built here)
            step_class = " stream--step" if change.context["step_stream"] else ""
            html = (f'<div id="{change.context["target"]}" class="stream{step_class}" aria-live="polite" '
                    f'tabindex="0" hx-swap-oob="true"></div>')
        else:
            html = render_to_string(f"crews/run_detail.html#{change.part}",
                                    {**base, **change.context, "oob": change.into is None}).strip()
        if change.into is not None:
            inner = f"<li>{html}</li>" if change.wrapper == "ol" else html
            html = f'<{change.wrapper} hx-swap-oob="beforeend:#{change.into}">{inner}</{change.wrapper}>'
        parts.append(html)
    return "\n".join(parts)


def run_duration(run: Run) -> timedelta | None:
    """For run lists: from start to end (or to now while it works)."""
    if run.started_at is None:
        return None
    end = run.finished_at or (timezone.now() if run.status in ACTIVE else None)
    return (end - run.started_at) if end else None


def fold_events(run: Run, tasks: Sequence[RunTask], events: Iterable[RunEvent]) -> RunView:
    """A view from rows already in memory (tests, benchmarks)."""
    events = list(events)
    started = {e.task_id for e in events if e.type == "task.started"}
    view = RunView(run, tasks, started_task_ids=started)
    for e in events:
        view.fold(e.seq, e.type, e.task_id, e.step_id or None, e.data or {}, e.at)
    view.finish_building()
    return view
