"""The run page and its socket print each fragment from one definition: byte for byte the same.

A run is recorded event by event. After each, the socket's message for it (``render_event_html``,
what ``RunEventsHtmlConsumer`` sends) is compared with the run page fetched at that moment: every
step (and its head and result), LLM call, tool call, note, deviation, plan segment, task head,
stream and event-log row the message carries is exactly the element with its id on the page.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest
from django.conf import settings
from django.utils import translation

from crews.bridge import payload_of, record_event
from crews.run_view import RunView, render_event_html
from tests.conftest import signed_in
from tests.crews.test_run_views import EVIL, detail, queued_run, started, task_ids

pytestmark = pytest.mark.django_db

# The fragments compared, by the ids they carry (a step id "7.s1" is "7-s1" in an id).
KINDS = {
    "step-head": re.compile(r"^step-.+-head$"),
    "step-result": re.compile(r"^step-.+-result$"),
    "step": re.compile(r"^step-[^-]+-[^-]+-[^-]+$"),
    "llm": re.compile(r"^llm-\d+$"),
    "tool": re.compile(r"^tool-\d+$"),
    "note": re.compile(r"^note-\d+$"),
    "deviation": re.compile(r"^deviation-\d+$"),
    "segment": re.compile(r"^plan-.+-r-?\d+$"),
    "task-head": re.compile(r"^task-.+-head$"),
    "task-answer": re.compile(r"^answer-.+$"),
    "rejected": re.compile(r"^rejected-\d+$"),
    "stream": re.compile(r"^delta-"),
    "log-row": re.compile(r"^event-\d+$"),
    "run-diagram": re.compile(r"^run-diagram$"),
    "run-wait": re.compile(r"^run-wait$"),
}


def kind_of(element_id: str) -> str | None:
    return next((kind for kind, pattern in KINDS.items() if pattern.match(element_id)), None)


def element(html: str, element_id: str) -> str | None:
    """The element with this id, from its start tag to its matching end tag, as written."""
    at = html.find(f' id="{element_id}"')
    if at < 0:
        return None
    start = html.rfind("<", 0, at)
    tag = re.match(r"<(\w+)", html[start:]).group(1)  # type: ignore[union-attr]
    depth = 0
    for match in re.compile(rf"<(/?){tag}\b[^>]*>").finditer(html, start):
        depth += -1 if match.group(1) else 1
        if depth == 0:
            return html[start:match.end()]
    raise AssertionError(f"{element_id}: no end tag")


def as_on_the_page(fragment: str) -> str:
    """A fragment the socket swaps in by id carries hx-swap-oob on its start tag."""
    head, rest = fragment.split(">", 1)
    return head.replace(' hx-swap-oob="true"', "", 1) + ">" + rest


def without_csrf(html: str | None) -> str | None:
    """The page's forms carry its CSRF token; the socket's have none (run.js adds it on submit)."""
    return None if html is None else re.sub(r'<input type="hidden" name="csrfmiddlewaretoken" value="[^"]*">', "", html)


def events(first: int, second: int) -> list[tuple[str, dict[str, Any], int | None, str | None]]:
    """Every kind of fragment, with untrusted text (a script, quotes, an ampersand) in it."""
    s1, s2, s3, s4, s5, s6 = (f"{first}.s{n}" for n in range(1, 7))
    a1, a2 = f"{second}.p1", f"{second}.p2"
    evil = f'{EVIL} & "q"'
    return [
        ("crew_plan.started", {}, None, None),
        ("task.started", {"task_id": str(first), "agent": f"Writer {evil}"}, first, None),
        ("react.turn", {"turn": 1, "max_turns": 25}, first, None),
        ("react.format_error", {"turn": 1, "max_turns": 25, "error": f"no format {evil}", "reply": f"Hmm {evil}",
                                "reply_chars": 4000}, first, None),
        ("react.format_error", {"turn": 2, "max_turns": 25, "error": "empty", "reply": "", "reply_chars": 0},
         first, None),
        ("agent_plan.started", {"attempt": 1}, first, None),
        ("llm.started", {"model": f"gpt {evil}", "purpose": "agent_plan"}, first, None),
        ("llm.completed", {"model": "m", "purpose": "agent_plan", "prompt_tokens": 1200, "completion_tokens": 34,
                           "cost_usd": 0.0123, "latency_ms": 2500}, first, None),
        ("agent_plan.completed", {"attempt": 1, "ready": False, "steps": [
            {"step_id": s1, "number": 1, "description": "Old"}]}, first, None),
        ("agent_plan.started", {"attempt": 2}, first, None),
        ("agent_plan.completed", {"attempt": 2, "ready": True, "steps": [
            {"step_id": s1, "number": 1, "description": f"Look {evil}", "tool": f"http {evil}"},
            {"step_id": s2, "number": 2, "description": "Count"},
            {"step_id": s3, "number": 3, "description": "Time out"},
            {"step_id": s4, "number": 4, "description": "Run out"},
            {"step_id": s5, "number": 5, "description": "Skip me"}]}, first, None),
        ("step.started", {"step_id": s1, "number": 1}, first, s1),
        ("react.turn", {"turn": 3, "max_turns": 4}, first, s1),
        ("react.stuck", {"turn": 3, "max_turns": 4, "repeats": 3, "reason": f"same {evil}", "reply": f"Action: x {evil}",
                         "reply_chars": 20}, first, s1),
        ("llm.started", {"model": "m", "purpose": "step"}, first, s1),
        ("llm.failed", {"model": "m", "purpose": "step", "error": f"rate {evil}", "retrying": True, "retry_in": 2,
                        "attempt": 1, "max_retries": 3}, first, s1),
        ("llm.started", {"model": "m", "purpose": "step"}, first, s1),
        ("llm.completed", {"model": "m", "purpose": "step", "prompt_tokens": 10, "completion_tokens": 5,
                           "cost_usd": None, "latency_ms": 65000}, first, s1),
        ("tool.started", {"name": f"http {evil}", "args": {"url": evil, "depth": {"n": [1, "b'"]}}}, first, s1),
        ("tool.completed", {"name": f"http {evil}", "output": evil, "from_cache": False}, first, s1),
        ("tool.started", {"name": "calculator", "args": {"expression": "2*21"}}, first, s1),
        ("tool.completed", {"name": "calculator", "output": "42", "from_cache": True}, first, s1),
        ("tool.failed", {"name": "search", "error": f"bad {evil}"}, first, s1),  # failed before it started
        ("tool.started", {"name": "slow", "args": "x" * 100}, first, s1),
        ("agent_plan.warning", {"message": f"Careful {evil}"}, first, s1),
        ("budget.exceeded", {"limit": "tokens", "used": 10, "allowed": 5}, first, s1),
        ("step.completed", {"step_id": s1, "number": 1, "outcome": "completed", "result": f"**Castle** {evil}",
                            "error": None}, first, s1),
        ("step.observed", {"step_id": s1, "number": 1, "success": False, "learned": f"Not yet {evil}"}, first, s1),
        ("agent_plan.refined", {"refinements": [{"step_id": s2, "number": 2, "text": f"Count {evil}"}],
                                "after_step": 1}, first, None),
        ("step.started", {"step_id": s2, "number": 2}, first, s2),
        ("step.completed", {"step_id": s2, "number": 2, "outcome": "failed", "result": "",
                            "error": f"no map {evil}"}, first, s2),
        ("step.observed", {"step_id": s2, "number": 2, "success": True, "learned": "Two sights"}, first, s2),
        ("step.started", {"step_id": s3, "number": 3}, first, s3),
        ("step.completed", {"step_id": s3, "number": 3, "outcome": "timed_out", "result": "Half"}, first, s3),
        ("step.started", {"step_id": s4, "number": 4}, first, s4),
        ("step.completed", {"step_id": s4, "number": 4, "outcome": "iteration_exhausted", "result": ""}, first, s4),
        ("step.skipped", {"step_id": s5, "number": 5, "reason": f"not needed {evil}"}, first, s5),
        ("step.started", {"step_id": s6, "number": 6, "description": f"Unplanned {evil}"}, first, s6),
        ("agent_plan.replanned", {"reason": f"because {evil}", "count": 1}, first, None),
        ("agent_plan.started", {"attempt": 1, "replan": 1}, first, None),
        ("agent_plan.failed", {"replan": 1, "error": f"no plan {evil}"}, first, None),
        ("agent_plan.goal_achieved", {"steps_done": 3, "steps_left": 1}, first, None),
        ("task.delegated", {"coworker": f"Ann {evil}", "task": "Check"}, first, None),
        ("react.forced_answer", {"reason": "repeated", "turn": 4, "max_turns": 25}, first, None),
        ("task.completed", {"output": f"Answer {evil}"}, first, None),
        ("task.started", {"task_id": str(second), "agent": "Writer"}, second, None),
        ("agent_plan.bound", {"steps": [{"step_id": a1, "number": 1, "description": f"Read {evil}"},
                                        {"step_id": a2, "number": 2, "description": "Write"}]}, second, None),
        ("step.started", {"step_id": a1, "number": 1}, second, a1),
        ("llm.started", {"model": "m", "purpose": "step"}, second, a1),
        ("step.completed", {"step_id": a1, "number": 1, "outcome": "failed", "error": "no tables"}, second, a1),
        ("crew_plan.deviated", {"reason": f"step 1 failed {evil}", "before": [f"Write {evil}"],
                                "after": [f"Estimate {evil}"]}, second, None),
        ("crew_plan.deviated", {"reason": "", "before": [], "after": [], "approved_by_person": True}, second, None),
        ("feedback.requested", {"answer": f"Draft {evil}"}, second, None),
        ("feedback.received", {"text": f"Shorter {evil}"}, second, None),
        ("agent_plan.started", {"attempt": 1, "replan": 2}, second, None),
        # The run stops: nothing keeps saying it drafts, plans or works (step 6 was working).
        ("run.cancelled", {}, None, None),
    ]


@pytest.mark.parametrize("language", ["en", "pt-br"])
def test_every_fragment_the_socket_sends_is_the_one_on_the_page(builder, language):
    run = queued_run(builder)
    started(run)
    first, second = task_ids(run)
    client = signed_in(builder)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    view = RunView.build(run)  # as the consumer does: before it renders in the reader's language
    compared: dict[str, set[str]] = defaultdict(set)  # kind: the data-status values seen

    for type_, data, task, step in events(first, second):
        event = payload_of(record_event(run.pk, type_, data, task_id=task, step_id=step))
        with translation.override(language):
            message = render_event_html(view, event, can_write=True)
        page = client.get(detail(run)).content.decode()

        for element_id in dict.fromkeys(re.findall(r' id="([^"]+)"', message)):
            kind = kind_of(element_id)
            if kind is None:
                continue
            sent = as_on_the_page(element(message, element_id))  # type: ignore[arg-type]
            assert sent == without_csrf(element(page, element_id)), f"{type_}: #{element_id} differs"
            status = re.match(r'<[^>]* data-status="([^"]*)"', sent)
            compared[kind].add(status.group(1) if status else "")

    assert set(compared) == set(KINDS)
    assert compared["step-head"] >= {"pending", "running", "completed", "failed", "timed_out",
                                     "iteration_exhausted", "skipped", "stopped"}
    assert compared["rejected"] == {"format_error", "stuck"}
    assert compared["llm"] == {"running", "done", "failed"}
    assert compared["tool"] == {"running", "done", "failed"}
    assert compared["segment"] >= {"drafting", "ready", "not_ready", "failed", "approved", "stopped"}


def test_the_page_escapes_as_django_does_in_fragments_of_either_engine(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record_event(run.pk, "task.started", {"task_id": str(first), "agent": "O'Brien \"Bo\""}, task_id=first)
    record_event(run.pk, "tool.started", {"name": "calc", "args": {"q": "it's \"x\" & <y>"}}, task_id=first)

    page = signed_in(builder).get(detail(run)).content.decode()

    assert "O&#x27;Brien &quot;Bo&quot;" in page  # the task head's facts (a macro)
    assert "(q=it&#x27;s &quot;x&quot; &amp; &lt;y&gt;)" in page  # the tool call's arguments (a macro)
    assert "&#39;" not in page and "&#34;" not in page
