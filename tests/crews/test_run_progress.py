"""The top of the run page (issue #15): the crew's diagram with each task's status, and what the
run waits for, on the page and as the socket re-renders them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from crews.bridge import payload_of, record_event
from crews.models import Run
from crews.run_view import RunView, fold_progress, render_event_html
from tests.conftest import signed_in
from tests.crews.test_run_fragments import as_on_the_page, element
from tests.crews.test_run_views import ESCAPED, EVIL, detail, queued_run, started, task_ids

pytestmark = pytest.mark.django_db


def page_of(user: Any, run: Run) -> str:
    return signed_in(user).get(detail(run)).content.decode()


def box(html: str, task_id: int) -> str:
    """A task's box in the run's diagram (its <g>), as written."""
    figure = element(html, "run-diagram") or ""
    match = re.search(rf'<g class="diagram__task[^"]*" data-task-id="{task_id}".*?</g>', figure, re.S)
    assert match, f"no box for task {task_id}"
    return match.group(0)


def wait_note(html: str) -> str:
    """The wait note's words ("" when it is hidden)."""
    note = element(html, "run-wait") or ""
    if re.match(r"<p[^>]* hidden", note):
        return ""
    return " ".join(re.sub(r"<[^>]+>", " ", note).split())


class Recorder:
    """Records events of a run as a worker would, and the socket's message for each."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.view = RunView.build(run)  # as the consumer keeps it

    def __call__(self, type_: str, data: dict[str, Any], task_id: int | None = None,
                 step_id: str | None = None) -> str:
        event = payload_of(record_event(self.run.pk, type_, data, task_id=task_id, step_id=step_id))
        return render_event_html(self.view, dict(event), can_write=True)


# The diagram -------------------------------------------------------------------------------------


def test_the_run_page_draws_each_tasks_status_and_steps_in_the_crews_diagram(builder):
    run = queued_run(builder)
    started(run)
    first, second = task_ids(run)
    record = Recorder(run)
    record("task.started", {"task_id": str(first), "agent": "Writer"}, first)
    record("agent_plan.completed", {"attempt": 1, "ready": True, "steps": [
        {"step_id": f"{first}.s1", "number": 1, "description": "Read"},
        {"step_id": f"{first}.s2", "number": 2, "description": "Write"}]}, first)
    record("step.started", {"step_id": f"{first}.s1", "number": 1}, first, f"{first}.s1")
    record("step.completed", {"step_id": f"{first}.s1", "number": 1, "outcome": "completed", "result": "r"},
           first, f"{first}.s1")

    html = page_of(builder, run)

    working, queued = box(html, first), box(html, second)
    assert 'data-status="running"' in working and "▶" in working and "Working · 1 of 2 steps done" in working
    assert 'data-status="queued"' in queued and "○" in queued and "Waiting" in queued and "steps done" not in queued
    desc = re.search(r'<desc id="run-flow-desc">(.*?)</desc>', html, re.S).group(1)  # type: ignore[union-attr]
    assert "1. Research (Writer): Working · 1 of 2 steps done; 2. Report" in desc and "Report (Crew writer): Waiting." in desc


def test_the_socket_redraws_the_diagram_when_a_task_moves_on_exactly_as_the_page_draws_it(builder):
    run = queued_run(builder)
    started(run)
    first, second = task_ids(run)
    record = Recorder(run)

    message = record("task.started", {"task_id": str(first), "agent": f"Writer {EVIL}"}, first)
    sent = element(message, "run-diagram")
    assert sent is not None and 'hx-swap-oob="true"' in sent
    assert as_on_the_page(sent) == element(page_of(builder, run), "run-diagram")
    assert f"Writer {ESCAPED}" in sent and EVIL not in sent  # what a run carries is escaped

    assert element(record("llm.started", {"model": "m", "purpose": "react"}, first), "run-diagram") is None

    record("task.completed", {"output": "Done."}, first)
    message = record("task.failed", {"error": "boom"}, second)
    assert 'data-status="failed"' in box(message, second) and "✗" in box(message, second)
    message = record("run.failed", {"error": "boom"})
    html = page_of(builder, run)
    assert 'data-status="done"' in box(html, first) and "✓ Done" in re.sub(r"<[^>]+>", "", box(html, first))


def test_sockets_on_one_run_draw_its_diagram_once_per_state_and_language(builder, monkeypatch):
    drawn: list[str] = []
    draw = fold_progress.render_to_string
    monkeypatch.setattr(fold_progress, "render_to_string", lambda *a, **kw: drawn.append(a[0]) or draw(*a, **kw))
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    sockets = [RunView.build(run) for _ in range(3)]
    event = dict(payload_of(record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)))

    english = [element(render_event_html(view, event, can_write=True), "run-diagram") for view in sockets[:2]]
    with translation.override("pt-br"):
        portuguese = element(render_event_html(sockets[2], event, can_write=False), "run-diagram")

    assert drawn == ["crews/_diagram.html"] * 2  # once in English for both sockets, once in Portuguese
    assert english[0] == english[1] and "How the crew works, task by task" in english[0]  # type: ignore[operator]
    assert "Como a equipe trabalha, tarefa por tarefa" in portuguese  # type: ignore[operator]


def test_a_hierarchical_crews_run_names_its_manager_in_the_readers_language(builder):
    from agents import services as agent_services

    run = queued_run(builder, process="hierarchical", manager_llm=agent_services.llm_ensure_demo())

    assert "Manager: Offline demo model" in (element(page_of(builder, run), "run-diagram") or "")
    client = signed_in(builder)
    with translation.override("en"):  # the language the requests activate goes with them
        client.post(reverse("set_language"), {"language": "pt-br"})
        portuguese = element(client.get(detail(run)).content.decode(), "run-diagram") or ""
    assert "Offline demo model" in portuguese and "Manager: " not in portuguese


def test_a_stopped_run_shows_the_tasks_it_never_started_as_not_run_in_the_diagram(builder):
    run = queued_run(builder)
    started(run)
    first, second = task_ids(run)
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)
    message = record("run.cancelled", {})

    assert 'data-status="stopped"' in box(message, first)
    assert 'data-status="not_run"' in box(message, second) and "Not run" in box(message, second)


def test_an_agents_run_has_no_crew_diagram(builder, monkeypatch):
    from tests.crews.test_run_views import finished_run

    run = finished_run(builder, monkeypatch)
    assert 'id="run-diagram"' in page_of(builder, run)  # a crew's run has one
    Run.objects.filter(pk=run.pk).update(crew=None)
    assert 'id="run-diagram"' not in page_of(builder, Run.objects.get(pk=run.pk))


# What the run waits for --------------------------------------------------------------------------


def test_a_retrys_back_off_is_said_near_the_top_until_the_call_starts_again(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)
    record("llm.started", {"model": "m", "purpose": "react"}, first)
    assert wait_note(page_of(builder, run)) == ""

    message = record("llm.failed", {"model": "m", "purpose": "react", "error": "429", "retrying": True, "attempt": 2,
                                    "kind": "rate_limited", "retry_in": 11.2, "max_retries": 3}, first)

    said = "Waiting 12 s: the model's rate limit (retry 2 of 3)."
    assert wait_note(message) == said and wait_note(page_of(builder, run)) == said
    html = page_of(builder, run)
    assert html.index('id="run-wait"') < html.index('id="conn-status"') < html.index('id="tasks"')  # near the top

    message = record("llm.started", {"model": "m", "purpose": "react"}, first)
    assert element(message, "run-wait") is not None and wait_note(message) == ""
    assert wait_note(page_of(builder, run)) == ""


def test_a_retry_after_another_failure_says_the_call_is_tried_again(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record = Recorder(run)
    message = record("llm.failed", {"model": "m", "purpose": "react", "error": "503", "retrying": True, "attempt": 1,
                                    "kind": "server_error", "retry_in": 0.5, "max_retries": 2}, first)
    assert wait_note(message) == "Waiting 1 s: the model call failed and is tried again (retry 1 of 2)."


def test_a_retry_note_goes_once_its_step_times_out_and_the_next_task_starts(builder):
    run = queued_run(builder)
    started(run)
    first, second = task_ids(run)
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)
    record("step.started", {"step_id": f"{first}.s1", "number": 1}, first, f"{first}.s1")
    message = record("llm.failed", {"model": "m", "purpose": "react", "error": "503", "retrying": True, "attempt": 1,
                                    "kind": "server_error", "retry_in": 20, "max_retries": 2}, first, f"{first}.s1")
    assert wait_note(message).startswith("Waiting 20 s")

    message = record("step.completed", {"step_id": f"{first}.s1", "number": 1, "outcome": "timed_out"},
                     first, f"{first}.s1")
    assert element(message, "run-wait") is not None and wait_note(message) == ""  # the step ended its call

    record("llm.failed", {"model": "m", "purpose": "react", "error": "503", "retrying": True, "attempt": 1,
                          "kind": "server_error", "retry_in": 5, "max_retries": 2}, first, f"{first}.s2")
    record("task.failed", {"error": "timed out"}, first)
    record("task.started", {"task_id": str(second)}, second)
    assert wait_note(page_of(builder, run)) == ""  # nor does a task that failed hold any call back


@pytest.mark.parametrize(("limit", "rpm", "said"), [
    ("agent", 3, "Waiting for a free slot (21 s) under this agent's request limit: 3 a minute."),
    ("crew", 1, "Waiting for a free slot (21 s) under the crew's request limit: 1 a minute."),
    ("model", 60, "Waiting for a free slot (21 s) under the model's request limit: 60 a minute."),
])
def test_a_wait_for_a_requests_per_minute_slot_says_whose_limit_it_is(builder, limit, rpm, said):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)

    message = record("llm.waiting", {"model": "m", "purpose": "react", "reason": "rate_limit", "seconds": 20.4,
                                     "limit": limit, "rpm": rpm}, first)

    assert wait_note(message) == said == wait_note(page_of(builder, run))
    assert 'title="llm.waiting">Waiting for a free slot<' in page_of(builder, run)  # the event log's words
    record("run.cancelled", {})
    assert wait_note(page_of(builder, run)) == ""  # a stopped run waits for nothing


def test_a_tool_call_waiting_for_approval_is_said_by_the_notice_not_again_by_the_wait_note(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)
    record("approval.requested", {"approval_id": "a1", "tool": f"calc {EVIL}", "args": {}}, first)

    message = record("run.awaiting_input", {"kind": "approval", "approval_id": "a1"})

    html = page_of(builder, run)
    assert "A tool call waits for approval." in element(html, "run-notice")  # type: ignore[operator]
    assert wait_note(message) == "" and wait_note(html) == ""
    person = box(html, first)
    assert 'data-status="person"' in person and "Waiting for a person" in person and "Waiting for you" not in person


def test_an_answer_waiting_for_review_and_a_plan_waiting_for_approval_leave_the_wait_note_hidden(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record = Recorder(run)
    record("task.started", {"task_id": str(first)}, first)
    record("llm.failed", {"model": "m", "purpose": "react", "error": "503", "retrying": True, "attempt": 1,
                          "kind": "server_error", "retry_in": 9, "max_retries": 2}, first)
    record("feedback.requested", {"answer": "Draft"}, first)
    message = record("run.awaiting_input", {"kind": "feedback"})
    assert element(message, "run-wait") is not None and wait_note(message) == ""  # the retry is over too
    assert "An answer waits for your review." in element(message, "run-notice")  # type: ignore[operator]

    record("feedback.received", {"text": ""}, first)
    message = record("run.awaiting_approval", {"plan_id": 1, "version": 2})
    assert wait_note(message) == "" and wait_note(page_of(builder, run)) == ""
    assert "The crew plan is ready for review." in element(message, "run-notice")  # type: ignore[operator]
