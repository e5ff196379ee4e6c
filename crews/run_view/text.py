"""The run page's words and figures: sanitised markdown, labels per language, durations, ids, URLs."""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timedelta
from typing import Any

import nh3
from django.urls import NoReverseMatch, get_script_prefix, get_urlconf, reverse
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from markdown_it import MarkdownIt

from crews.models import Run
from planner_site.reversing import url_around_last_arg
from planner_site.templatetags.money import grouped

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


def _markdown_html(text: str) -> str:
    # Not memoised: step results load when their disclosure opens, so a page renders only its
    # answers; a memo saved 4 % of a repeated view (bench/README.md, "What each hand-made piece").
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


def text_of(value: Any) -> str:
    """An event's value as text (JSON for anything that is not a string already)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


# Why the engine skipped a step, in the words it stores (English: a worker has no reader), and
# as people read them. Lazy: a socket's view is built before it knows its reader's language.
SKIP_REASONS = {
    "cancelled": gettext_lazy("the run was stopped"),
    "not approved as proposed": gettext_lazy("not approved as proposed"),
}


def skip_reason(value: Any) -> str:
    text = text_of(value)
    return SKIP_REASONS.get(text.strip().lower(), text)  # type: ignore[return-value]


def message_of(value: Any) -> str:
    """A message the app stored in English (a worker has no reader): translated when it is one."""
    text = text_of(value)
    return _(text) if text else ""


def args_text(args: Any) -> str:
    """Tool arguments for people: ``name: value`` lines (JSON only for nested values)."""
    if isinstance(args, dict):
        return "\n".join(f"{k}: {v if isinstance(v, str) else text_of(v)}" for k, v in args.items())
    return text_of(args)


def time_of(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return parse_datetime(value.replace("Z", "+00:00"))
    return None


# Statuses and labels ---------------------------------------------------------------------------


RUN_STATUS_TONE = {
    "queued": "muted", "planning": "info", "awaiting_approval": "warning", "running": "info",
    "awaiting_input": "warning", "cancelling": "warning", "succeeded": "success", "failed": "danger",
    "cancelled": "muted", "interrupted": "warning",
}
TASK_STATUS_TONE = {
    "waiting": "muted", "running": "info", "done": "success", "failed": "danger", "skipped": "muted",
    "stopped": "muted", "not_run": "muted", "drafted": "info", "approved": "success",
}
STEP_STATUS_TONE = {
    "pending": "muted", "running": "info", "completed": "success", "failed": "danger",
    "timed_out": "danger", "iteration_exhausted": "danger", "skipped": "muted", "stopped": "muted",
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
            "skipped": _("Skipped"), "stopped": _("Stopped"), "not_run": _("Not run"), "drafted": _("Drafted"),
            "approved": _("Approved"),
        },
        "step": {
            "pending": _("To do"), "running": _("Working"), "completed": _("Done"), "failed": _("Failed"),
            "timed_out": _("Timed out"), "iteration_exhausted": _("Ran out of iterations"),
            "skipped": _("Skipped"), "stopped": _("Stopped"),
        },
        "purpose": {
            "crew_plan": _("crew plan"), "agent_plan": _("planning"), "refine": _("refining the plan"),
            "observe": _("reviewing a step"), "decide": _("deciding"), "replan": _("replanning"),
            "step": _("working on a step"), "react": _("thinking"), "synthesis": _("writing the answer"),
            "aggregate": _("writing the answer"), "manager": _("managing"), "test": _("test"),
        },
        # The event log's words for each event type (the raw type is its tooltip).
        "event": {
            "run.queued": _("Queued"), "run.started": _("Started"), "run.planning": _("Planning"),
            "run.awaiting_approval": _("Waiting for approval"), "run.awaiting_input": _("Waiting for you"),
            "run.resumed": _("Resumed"), "run.cancelling": _("Stopping"), "run.cancelled": _("Stopped"),
            "run.interrupted": _("Interrupted"), "run.succeeded": _("Finished"), "run.failed": _("Failed"),
            "crew_plan.started": _("Crew planning started"), "crew_plan.completed": _("Crew plan drafted"),
            "crew_plan.failed": _("Crew plan failed"), "crew_plan.warning": _("Planner's warning"),
            "crew_plan.approved": _("Plan approved"), "crew_plan.deviated": _("Plan changed"),
            "agent_plan.started": _("Planning"), "agent_plan.completed": _("Planned"),
            "agent_plan.failed": _("Planning failed"), "agent_plan.refined": _("Plan refined"),
            "agent_plan.replanned": _("Replanned"), "agent_plan.goal_achieved": _("Goal reached"),
            "agent_plan.bound": _("Following the approved plan"),
            "task.started": _("Task started"), "task.completed": _("Task done"), "task.failed": _("Task failed"),
            "step.started": _("Step started"), "step.completed": _("Step done"), "step.skipped": _("Step skipped"),
            "step.observed": _("Step reviewed"),
            "llm.started": _("Asked the model"), "llm.completed": _("The model answered"),
            "llm.failed": _("The model call failed"), "llm.waiting": _("Waiting for a free slot"),
            "tool.started": _("Using a tool"), "tool.completed": _("Used a tool"), "tool.failed": _("A tool failed"),
            "approval.requested": _("Asked a person to approve"), "approval.resolved": _("A person decided"),
            "feedback.requested": _("Asked a person to review"), "feedback.received": _("A person reviewed"),
            "budget.exceeded": _("Budget reached"), "guardrail.passed": _("Check passed"),
            "guardrail.failed": _("Check failed"),
            "knowledge.retrieved": _("Knowledge used"), "memory.recalled": _("Memories recalled"),
            "memory.saved": _("Memories saved"),
            "react.turn": _("Next turn"), "react.format_error": _("Reply not understood"),
            "react.stuck": _("Stuck on one reply"), "react.forced_answer": _("Asked for a best answer"),
        },
        # The words of templates/crews/run_parts.jinja: its macros get this table whole (a
        # gettext call inside a macro costs ten escapes, and a long run has thousands of parts).
        "words": {
            # the run's figures
            "elapsed": _("Elapsed"), "tokens_heading": _("Tokens"), "cost": _("Cost"), "llm_calls": _("LLM calls"),
            # a task's head
            "open_plan": _("Open the plan"), "run_again_from": _("Run again from this task"),
            "waiting": _("Waiting for you"), "drafting": _("Drafting"), "version": _("version %(v)s"),
            "steps_done": _("%(done)s of %(total)s steps done"), "reused": _("Kept from the earlier run"),
            # a task's plan
            "approved_plan": _("The approved plan"), "followed": _("followed step by step"),
            "replanned_plan": _("New plan after replanning (%(n)s)"), "agents_plan": _("The agent's plan"),
            "steps": _("Steps"), "planning": _("Planning…"), "refining": _("Refining (attempt %(n)s)…"),
            "refined_attempt": _("Refined: attempt %(n)s"), "not_ready": _("Not ready"), "failed_plan": _("Failed"),
            "deviation": _("Change to the approved plan"), "by_person": _("New steps, approved by a person"),
            "by_agent": _("The agent changed the approved plan"), "why": _("Why: %(reason)s"),
            "instead_of": _("Instead of"), "none_left": _("No steps were left."), "now": _("Now"),
            "goal_reached": _("No more steps: the goal was reached."),
            # a step's head and result
            "refined": _("refined"), "tool": _("tool: %(tool)s"), "result": _("Result"),
            "show_result": _("Show the result"), "skipped": _("Skipped: %(reason)s"),
            "not_quite": _("Review: not quite"), "review": _("Review:"), "activity": _("LLM calls and tools"),
            # a finished crew run's answer
            "answer": _("Answer"), "show_answer": _("Show the answer"),
            # activity entries: LLM and tool calls
            "llm": _("LLM: %(purpose)s"), "tokens": _("%(n)s tokens"), "in_out": _("%(p)s in, %(c)s out"),
            "cut": _("Cut short."), "retrying": _("Retrying."), "running": _("running…"),
            "failed": _("failed"), "cached": _("from the cache"), "done": _("done"),
            "arguments": _("Arguments"), "output": _("Output"), "error": _("Error"),
            "show_sent": _("Show what the model was sent and its reply"),
            # the agent's loop: its turns, replies it could not use, a plan or step the run stopped
            "turn": _("turn %(turn)s of %(max)s"), "forced": _("Forced answer"),
            "rejected": _("Reply not understood (turn %(turn)s of %(max)s)"),
            "stuck": _("Stopped at turn %(turn)s of %(max)s: the same reply %(n)s times in a row"),
            "model_wrote": _("What the model wrote"), "empty_reply": _("(an empty reply)"),
            "more_chars": _("… and %(n)s more characters"), "stopped": _("Stopped"),
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


def words() -> dict[str, str]:
    """The words of the run page's macros (``words["result"]``), in the active language."""
    return labels("words")


def task_status_label(status: str) -> str:
    return labels("task").get(status, status)


def step_status_label(status: str) -> str:
    return labels("step").get(status, status)


def purpose_label(purpose: str) -> str:
    return labels("purpose").get(purpose, purpose)


# URLs of a run's parts -------------------------------------------------------------------------


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


def delta_target(task_id: int | None, step_id: str | None) -> str:
    """Where a streamed LLM delta goes: the step's live area, else the task's answer."""
    key = str(task_id) if task_id is not None else RUN_SCOPE
    if step_id:
        return f"delta-step-{key}-{dom_key(step_id)}"
    return f"delta-{key}"
