"""Run pages without a browser: the live page and its replay, controls, history, the RunView fold."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from crews import plans, runner, runs
from crews.bridge import payload_of, record_event
from crews.models import FeedbackRequest, Run, RunEvent, RunTask, ToolApproval
from crews.run_view import RunView, markdown, render_event_html
from tests.conftest import signed_in
from tests.crews.run_helpers import make_agent, make_crew, scripted

pytestmark = pytest.mark.django_db

EVIL = "<script>alert('x')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"


def detail(run: Run) -> str:
    return reverse("crews:run-detail", args=[run.pk])


def queued_run(owner: Any, **fields: Any) -> Run:
    """A two-task crew run, queued and never picked up by a worker."""
    crew = make_crew(owner, **fields)
    return runs.run_kickoff(actor=owner, crew=crew, inputs={"topic": "tides"}, enqueue=False)


def finished_run(owner: Any, monkeypatch: Any, answer: str = "Final Answer: All **done**.") -> Run:
    crew = make_crew(owner)
    scripted(monkeypatch, default=answer)
    run = runs.run_kickoff(actor=owner, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    return run


def started(run: Run) -> None:
    """Mark a queued run as a worker would when it takes it."""
    runs.run_claim(run_id=run.pk, worker_id="test")


def task_ids(run: Run) -> list[int]:
    return list(run.task_results.order_by("order").values_list("task_id_snapshot", flat=True))


def event_rows(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<li id="event-(\d+)"', html)]


# The page ------------------------------------------------------------------------------------


def test_a_finished_run_is_a_replay_with_every_event_its_answer_and_run_again(builder, monkeypatch):
    run = finished_run(builder, monkeypatch)
    response = signed_in(builder).get(detail(run))

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-status="succeeded"' in html and "Succeeded" in html
    assert event_rows(html) == list(range(1, run.last_seq + 1))
    assert "ws-connect" not in html  # nothing more can happen: no socket
    assert "All <strong>done</strong>." in html  # the result, as sanitised markdown
    assert reverse("crews:run-output", args=[run.pk]) in html
    assert "Run again" in html and "Run again from this task" in html
    assert ">Stop<" not in html


def test_an_active_run_connects_its_socket_after_the_last_event_shown(builder):
    run = queued_run(builder)
    started(run)
    response = signed_in(builder).get(detail(run))

    html = response.content.decode()
    last = RunEvent.objects.filter(run=run).count()
    assert f'ws-connect="/ws/runs/{run.pk}/?after={last}"' in html
    assert f'data-last-seq="{last}"' in html
    assert event_rows(html) == list(range(1, last + 1))
    assert ">Stop<" in html and 'aria-live="polite"' in html
    assert 'id="delta-' not in html or "stream" in html


def test_an_agent_run_shows_what_it_was_asked(builder, monkeypatch):
    agent = make_agent(builder, "Trip planner")
    run = runs.run_kickoff_agent(actor=builder, agent=agent, message="Plan a two-day trip to Lisbon")
    scripted(monkeypatch, default="Final Answer: Day 1: Alfama. Day 2: Belém.")
    runner.execute(run.pk)

    html = signed_in(builder).get(detail(run)).content.decode()

    assert "Plan a two-day trip to Lisbon" in html
    assert "Day 1: Alfama. Day 2: Belém." in html
    assert "Run again from this task" not in html  # an agent run has no tasks to start from


def test_another_users_run_is_a_404_everywhere(builder, other_builder, monkeypatch):
    run = finished_run(builder, monkeypatch)
    client = signed_in(other_builder)

    assert client.get(detail(run)).status_code == 404
    assert client.get(reverse("crews:run-output", args=[run.pk])).status_code == 404
    assert client.post(reverse("crews:run-stop", args=[run.pk])).status_code == 404
    assert client.post(reverse("crews:run-rerun", args=[run.pk])).status_code == 404


def test_a_viewer_reads_a_shared_crews_run_but_cannot_stop_it(builder, viewer):
    run = queued_run(builder, shared=True)
    client = signed_in(viewer)

    page = client.get(detail(run))
    stop = client.post(reverse("crews:run-stop", args=[run.pk]))

    assert page.status_code == 200
    assert ">Stop<" not in page.content.decode()
    assert stop.status_code == 403
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_the_page_of_a_run_with_2000_events_renders_fast_in_few_queries(builder, django_assert_max_num_queries):
    run = queued_run(builder)
    first, second = task_ids(run)
    now = timezone.now()
    rows = []
    seq = RunEvent.objects.filter(run=run).count()

    def add(type_: str, data: dict[str, Any], task: int | None = None, step: str = "") -> None:
        nonlocal seq
        seq += 1
        rows.append(RunEvent(run=run, seq=seq, type=type_, task_id=task, step_id=step, data=data, at=now))

    add("run.started", {})
    add("task.started", {"task_id": str(first), "agent": "Writer"})
    steps = [{"step_id": f"{first}.s{n}", "number": n, "description": f"Step {n}"} for n in range(1, 41)]
    add("agent_plan.completed", {"attempt": 1, "plan": "p", "ready": True, "steps": steps}, first)
    while seq < 1990:
        n = (seq % 40) + 1
        step = f"{first}.s{n}"
        add("llm.started", {"model": "m", "purpose": "step"}, first, step)
        add("llm.completed", {"model": "m", "purpose": "step", "prompt_tokens": 10, "completion_tokens": 5,
                              "cost_usd": 0.001, "latency_ms": 300}, first, step)
        add("tool.started", {"name": "calculator", "args": {"expression": "1+1"}}, first, step)
        add("tool.completed", {"name": "calculator", "output": "2", "from_cache": False}, first, step)
    add("task.completed", {"output": "done"}, first)
    add("task.started", {"task_id": str(second), "agent": "Writer"}, second)
    RunEvent.objects.bulk_create(rows)
    Run.objects.filter(pk=run.pk).update(last_seq=seq, status=Run.Status.RUNNING)
    client = signed_in(builder)
    client.get(detail(run))  # warm the template cache

    with django_assert_max_num_queries(15):
        response = client.get(detail(run))
    # Its speed is measured in bench/ui.py, not asserted here.
    assert response.status_code == 200
    assert len(event_rows(response.content.decode())) == seq


# Controls -------------------------------------------------------------------------------------


def test_stop_without_javascript_redirects_to_the_page_with_a_message(builder):
    run = queued_run(builder)
    started(run)

    response = signed_in(builder).post(reverse("crews:run-stop", args=[run.pk]), follow=True)

    assert response.redirect_chain[-1][0] == detail(run)
    assert "Stopping the run" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLING


def test_stop_with_htmx_swaps_the_controls_for_stopping(builder):
    run = queued_run(builder)
    started(run)

    response = signed_in(builder).post(reverse("crews:run-stop", args=[run.pk]), HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert html.strip().startswith('<div id="run-controls"')
    assert "Stopping…" in html and "disabled" in html
    assert "<html" not in html


def test_a_queued_run_stops_at_once(builder):
    run = queued_run(builder)

    response = signed_in(builder).post(reverse("crews:run-stop", args=[run.pk]), HTTP_HX_REQUEST="true")

    assert "The run is stopped." in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED


def test_stop_on_a_finished_run_says_so_instead_of_failing(builder, monkeypatch):
    run = finished_run(builder, monkeypatch)
    client = signed_in(builder)

    plain = client.post(reverse("crews:run-stop", args=[run.pk]), follow=True)
    htmx = client.post(reverse("crews:run-stop", args=[run.pk]), HTTP_HX_REQUEST="true")

    assert plain.status_code == 200 and "already finished" in plain.content.decode()
    assert htmx.status_code == 200 and "already finished" in htmx.content.decode()
    assert 'role="alert"' in htmx.content.decode()


def _waiting_for_feedback(owner: Any) -> tuple[Run, int]:
    run = queued_run(owner, task_fields={"Research": {"human_input": True}})
    started(run)
    task = task_ids(run)[0]
    record_event(run.pk, "task.started", {"task_id": str(task), "agent": "Writer"}, task_id=task)
    record_event(run.pk, "feedback.requested", {"answer": f"Draft **answer** {EVIL}"}, task_id=task)
    runs.run_wait_for_feedback(run_id=run.pk, task_key=str(task), answer="Draft answer")
    return run, task


def test_feedback_shows_the_answer_and_a_form_and_looks_good_accepts(builder):
    run, task = _waiting_for_feedback(builder)
    client = signed_in(builder)

    page = client.get(detail(run)).content.decode()
    response = client.post(reverse("crews:run-feedback", args=[run.pk]),
                           {"task": str(task), "text": "ignored", "action": "accept"}, HTTP_HX_REQUEST="true")

    assert "Draft <strong>answer</strong>" in page and "<script>alert" not in page
    assert 'name="text"' in page and "Looks good" in page and "An answer waits for your review" in page
    request = FeedbackRequest.objects.get(run=run)
    assert request.status == FeedbackRequest.Status.ANSWERED and request.text == ""
    assert response.content.decode().strip().startswith(f'<div id="prompt-{task}"')
    assert "Answer accepted." in response.content.decode()


def test_feedback_text_is_sent_to_the_agent(builder):
    run, task = _waiting_for_feedback(builder)

    response = signed_in(builder).post(reverse("crews:run-feedback", args=[run.pk]),
                                       {"task": str(task), "text": "Shorter, please", "action": "send"}, follow=True)

    assert FeedbackRequest.objects.get(run=run).text == "Shorter, please"
    assert "the agent revises its answer" in response.content.decode()


def test_feedback_when_the_run_is_not_waiting_says_so(builder, monkeypatch):
    run = finished_run(builder, monkeypatch)
    client = signed_in(builder)

    plain = client.post(reverse("crews:run-feedback", args=[run.pk]), {"text": "hi"}, follow=True)
    htmx = client.post(reverse("crews:run-feedback", args=[run.pk]), {"text": "hi", "task": "nope"},
                       HTTP_HX_REQUEST="true")

    assert "not waiting for feedback" in plain.content.decode()
    assert htmx.status_code == 200 and "not waiting for feedback" in htmx.content.decode()
    assert htmx["HX-Retarget"] == "#run-controls"  # the prompt it came from is gone


def _waiting_for_approval(owner: Any) -> tuple[Run, str]:
    run = queued_run(owner)
    started(run)
    task = task_ids(run)[0]
    record_event(run.pk, "task.started", {"task_id": str(task), "agent": "Writer"}, task_id=task)
    record_event(run.pk, "approval.requested",
                 {"approval_id": "abc123", "tool": "http_get", "args": {"url": f"https://x.test/{EVIL}"}},
                 task_id=task)
    runs.run_wait_for_approval(run_id=run.pk, approval_id="abc123", tool="http_get", args={})
    return run, "abc123"


@pytest.mark.parametrize(("decision", "status"), [("approve", "approved"), ("deny", "denied")])
def test_a_tool_call_is_approved_or_denied_with_a_note(builder, decision, status):
    run, approval_id = _waiting_for_approval(builder)
    client = signed_in(builder)

    page = client.get(detail(run)).content.decode()
    response = client.post(reverse("crews:run-approval", args=[run.pk, approval_id]),
                           {"decision": decision, "note": "fine by me"}, HTTP_HX_REQUEST="true")

    assert "http_get" in page and "Approve" in page and "Deny" in page and "<script>alert" not in page
    approval = ToolApproval.objects.get(run=run)
    assert approval.status == status and approval.note == "fine by me"
    assert response.content.decode().strip().startswith('<div id="approval-abc123"')


def test_deciding_twice_or_an_unknown_approval_is_a_message(builder):
    run, approval_id = _waiting_for_approval(builder)
    client = signed_in(builder)
    url = reverse("crews:run-approval", args=[run.pk, approval_id])
    client.post(url, {"decision": "approve"})

    again = client.post(url, {"decision": "deny"}, HTTP_HX_REQUEST="true")
    unknown = client.post(reverse("crews:run-approval", args=[run.pk, "nope"]), {"decision": "deny"}, follow=True)
    nothing = client.post(url, {}, HTTP_HX_REQUEST="true")

    assert "already decided" in again.content.decode()
    assert "no approval nope" in unknown.content.decode()
    assert "Choose Approve or Deny." in nothing.content.decode()


def test_run_again_and_run_again_from_a_task_open_the_new_run(builder, monkeypatch):
    run = finished_run(builder, monkeypatch)
    client = signed_in(builder)

    again = client.post(reverse("crews:run-rerun", args=[run.pk]))
    later = client.post(reverse("crews:run-rerun", args=[run.pk]), {"from_task": str(task_ids(run)[1])})

    first, second = Run.objects.filter(rerun_of=run).order_by("pk")
    assert again["Location"] == detail(first)
    assert later["Location"] == detail(second)
    assert second.task_results.get(order=0).status == RunTask.Status.DONE
    page = client.get(detail(second)).content.decode()
    assert "Kept from the earlier run" in page


def test_run_again_from_a_task_that_was_not_in_the_run_is_a_message(builder, monkeypatch):
    run = finished_run(builder, monkeypatch)

    response = signed_in(builder).post(reverse("crews:run-rerun", args=[run.pk]), {"from_task": "999999"},
                                       follow=True)

    assert "not part of the run" in response.content.decode()
    assert not Run.objects.filter(rerun_of=run).exists()


def test_resume_continues_an_interrupted_run_and_refuses_any_other(builder, monkeypatch):
    run = queued_run(builder)
    started(run)
    runs.run_finish(run_id=run.pk, status=Run.Status.INTERRUPTED)
    client = signed_in(builder)

    page = client.get(detail(run)).content.decode()
    resumed = client.post(reverse("crews:run-resume", args=[run.pk]))
    again = client.post(reverse("crews:run-resume", args=[run.pk]), follow=True)

    assert "Interrupted." in page and ">Resume<" in page
    assert resumed["Location"] == detail(run)
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert "Only an interrupted run can be resumed." in again.content.decode()


def test_the_output_downloads_as_markdown(builder, monkeypatch):
    run = finished_run(builder, monkeypatch, answer="Final Answer: # Report\n\nAll good.")
    client = signed_in(builder)

    response = client.get(reverse("crews:run-output", args=[run.pk]))
    none = client.get(reverse("crews:run-output", args=[queued_run(builder, name="Other").pk]))

    assert response["Content-Type"].startswith("text/markdown")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.md"'
    assert response.content.decode() == "# Report\n\nAll good."
    assert none.status_code == 404


# Untrusted text -------------------------------------------------------------------------------


def test_markdown_is_rendered_then_sanitised():
    html = markdown(
        "# Title\n\n**bold** <script>alert(1)</script> <img src=x onerror=alert(1)>\n\n"
        "[ok](https://example.com) [bad](javascript:alert(1))\n\n| a | b |\n|---|---|\n| 1 | 2 |"
    )

    assert "<h1>Title</h1>" in html and "<strong>bold</strong>" in html and '<table tabindex="0">' in html
    assert "<script" not in html and "<img" not in html and not re.search(r"<[^>]*onerror", html)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # shown as text, never run
    assert 'href="https://example.com"' in html and 'rel="nofollow noopener noreferrer"' in html
    assert 'href="javascript' not in html


def test_a_script_in_a_tool_output_or_an_answer_is_escaped_on_the_page_and_on_the_socket(builder):
    run = queued_run(builder)
    started(run)
    task = task_ids(run)[0]
    before = RunEvent.objects.filter(run=run).count()
    record_event(run.pk, "task.started", {"task_id": str(task), "agent": EVIL}, task_id=task)
    record_event(run.pk, "tool.started", {"name": "calculator", "args": {"expression": EVIL}}, task_id=task)
    record_event(run.pk, "tool.completed", {"name": "calculator", "output": EVIL, "from_cache": False},
                 task_id=task)
    record_event(run.pk, "task.completed", {"output": f"Answer {EVIL}"}, task_id=task)

    page = signed_in(builder).get(detail(run)).content.decode()
    view = RunView.build(run, upto=before)
    fragments = [render_event_html(view, payload_of(e), can_write=True)
                 for e in RunEvent.objects.filter(run=run, seq__gt=before).order_by("seq")]

    assert "<script>alert" not in page
    assert page.count(ESCAPED) >= 3  # the agent name, the tool's arguments and output
    assert all("<script" not in f for f in fragments)
    assert any(ESCAPED in f for f in fragments)
    assert "&lt;script&gt;" in fragments[-1]  # the answer, rendered as escaped markdown text


def test_a_steps_result_loads_when_its_disclosure_opens_or_on_its_own_page_without_javascript(builder):
    run = _record_agent_run(builder)
    seq = RunEvent.objects.get(run=run, type="step.completed", step_id="k.s1").seq
    RunEvent.objects.filter(run=run, seq=seq).update(
        data={"step_id": "k.s1", "number": 1, "outcome": "completed", "result": f"**Castle**, tower {EVIL}"})
    result_url = reverse("crews:run-step-result", args=[run.pk, seq])
    client = signed_in(builder)

    page = client.get(detail(run)).content.decode()
    response = client.get(result_url, HTTP_HX_REQUEST="true")
    fragment = response.content.decode()
    plain = client.get(result_url).content.decode()

    assert "HX-Request" in response["Vary"]  # the same URL answers htmx and a plain link
    # The page holds the link, not the result: htmx fetches it on the first "toggle".
    assert "<strong>Castle</strong>" not in page
    assert f'hx-get="{result_url}" hx-trigger="toggle once"' in page and f'<a href="{result_url}">' in page
    assert fragment.strip() == "<p><strong>Castle</strong>, tower &lt;script&gt;alert('x')&lt;/script&gt;</p>"
    assert "<strong>Castle</strong>" in plain and "Result of step 1" in plain and "<script>alert" not in plain
    assert f'href="{detail(run)}#step-run-k-s1"' in plain  # back to the step


def test_a_finished_crew_runs_answers_load_when_opened_and_its_result_stays_on_the_page(builder, monkeypatch):
    run = finished_run(builder, monkeypatch, answer="Final Answer: Task **done**.")
    first = task_ids(run)[0]
    seq = RunEvent.objects.get(run=run, type="task.completed", task_id=first).seq
    answer_url = reverse("crews:run-step-result", args=[run.pk, seq])
    client = signed_in(builder)

    page = client.get(detail(run)).content.decode()
    fragment = client.get(answer_url, HTTP_HX_REQUEST="true").content.decode()
    plain = client.get(answer_url).content.decode()

    answer = page[page.index(f'id="answer-{first}"'):]
    assert f'hx-get="{answer_url}" hx-trigger="toggle once"' in answer[:600]
    assert fragment.strip() == "<p>Task <strong>done</strong>.</p>"
    assert "<h1>Answer</h1>" in plain and f'href="{detail(run)}#answer-{first}"' in plain
    assert "Task <strong>done</strong>." in page  # the run's own result stays on the page


def test_a_steps_result_is_a_404_for_another_user_or_an_event_that_is_not_a_result(builder, other_builder):
    run = _record_agent_run(builder)
    seq = RunEvent.objects.get(run=run, type="step.completed", step_id="k.s1").seq
    failed = RunEvent.objects.get(run=run, type="step.completed", step_id="k.s2").seq  # no result, an error
    client = signed_in(builder)

    def get(client: Client, seq: int) -> int:
        return client.get(reverse("crews:run-step-result", args=[run.pk, seq]), HTTP_HX_REQUEST="true").status_code

    assert get(client, seq) == 200
    assert get(signed_in(other_builder), seq) == 404
    assert get(client, failed) == 404 and get(client, seq - 1) == 404 and get(client, 9999) == 404


def test_a_live_step_result_fragment_links_to_the_same_result_as_the_page(builder):
    run = _record_agent_run(builder)
    seq = RunEvent.objects.get(run=run, type="step.completed", step_id="k.s1").seq
    view = RunView.build(run, upto=seq - 1)

    html = render_event_html(view, payload_of(RunEvent.objects.get(run=run, seq=seq)), can_write=True)

    assert 'id="step-run-k-s1-result" class="step-result" hx-swap-oob="true"' in html
    assert f'hx-get="{reverse("crews:run-step-result", args=[run.pk, seq])}"' in html
    assert "Castle, tower" not in html


def test_a_script_in_a_steps_description_tool_error_or_review_is_escaped_on_the_page_and_on_the_socket(builder):
    run = queued_run(builder)
    started(run)
    task = task_ids(run)[0]
    before = RunEvent.objects.filter(run=run).count()
    step = f"{task}.s1"
    for type_, data in [
        ("task.started", {"task_id": str(task), "agent": "Writer"}),
        ("agent_plan.completed", {"attempt": 1, "ready": True, "steps": [
            {"step_id": step, "number": 1, "description": f"Look {EVIL}", "tool": EVIL}]}),
        ("step.started", {"step_id": step, "number": 1, "description": f"Look {EVIL}"}),
        ("step.completed", {"step_id": step, "number": 1, "outcome": EVIL, "result": EVIL, "error": EVIL}),
        ("step.observed", {"step_id": step, "number": 1, "success": False, "learned": EVIL}),
    ]:
        record_event(run.pk, type_, data, task_id=task, step_id=step if type_.startswith("step.") else None)

    page = signed_in(builder).get(detail(run)).content.decode()
    view = RunView.build(run, upto=before)
    fragments = [render_event_html(view, payload_of(e), can_write=True)
                 for e in RunEvent.objects.filter(run=run, seq__gt=before).order_by("seq")]

    assert "<script>alert" not in page and all("<script" not in f for f in fragments)
    step_html = page[page.index(f'id="step-{task}-{task}-s1"'):]
    assert step_html.count(ESCAPED) >= 4  # the description, the tool, the error and the review
    assert 'data-status="&lt;script&gt;' in step_html  # even an odd outcome stays an attribute value
    assert "Review: not quite" in fragments[-1] and ESCAPED in fragments[-1]


# The fold ---------------------------------------------------------------------------------------


def _record_agent_run(owner: Any) -> Run:
    """An agent run with a plan, a refinement, a replan, tools, LLM calls and a skipped step."""
    agent = make_agent(owner, "Planner")
    run = Run.objects.create(agent=agent, created_by=owner, message="Plan Lisbon",
                             snapshot={"agent": {"name": "Planner", "role": "Trip Planner"}})
    events: list[tuple[str, dict[str, Any], str | None]] = [
        ("run.queued", {}, None),
        ("run.started", {}, None),
        ("agent_plan.started", {"attempt": 1}, None),
        ("llm.started", {"model": "m", "purpose": "agent_plan"}, None),
        ("llm.completed", {"model": "m", "purpose": "agent_plan", "prompt_tokens": 100, "completion_tokens": 50,
                           "cost_usd": 0.01, "latency_ms": 900}, None),
        ("agent_plan.completed", {"attempt": 1, "plan": "p", "ready": False, "steps": [
            {"step_id": "k.s1", "number": 1, "description": "Old first"}]}, None),
        ("agent_plan.started", {"attempt": 2}, None),
        ("agent_plan.completed", {"attempt": 2, "plan": "p", "ready": True, "steps": [
            {"step_id": "k.s1", "number": 1, "description": "Find sights"},
            {"step_id": "k.s2", "number": 2, "description": "Group them"},
            {"step_id": "k.s3", "number": 3, "description": "Write days"}]}, None),
        ("step.started", {"step_id": "k.s1", "number": 1, "description": "Find sights"}, "k.s1"),
        ("llm.started", {"model": "m", "purpose": "step"}, "k.s1"),
        ("llm.completed", {"model": "m", "purpose": "step", "prompt_tokens": 10, "completion_tokens": 5,
                           "cost_usd": None, "latency_ms": 200}, "k.s1"),
        ("tool.started", {"name": "http_get", "args": {"url": "https://a.test"}}, "k.s1"),
        ("tool.completed", {"name": "http_get", "output": "<html>", "from_cache": False}, "k.s1"),
        ("tool.failed", {"name": "calculator", "error": "bad input"}, "k.s1"),
        ("step.completed", {"step_id": "k.s1", "number": 1, "outcome": "completed", "result": "Castle, tower",
                            "error": None}, "k.s1"),
        ("step.observed", {"step_id": "k.s1", "number": 1, "success": True, "learned": "Two sights"}, "k.s1"),
        ("agent_plan.refined", {"refinements": [{"step_id": "k.s2", "number": 2, "text": "Group by area"}],
                                "after_step": 1}, None),
        ("step.started", {"step_id": "k.s2", "number": 2, "description": "Group by area"}, "k.s2"),
        ("step.completed", {"step_id": "k.s2", "number": 2, "outcome": "failed", "result": "",
                            "error": "no map"}, "k.s2"),
        ("agent_plan.replanned", {"reason": "step 2 failed", "count": 1, "kept_steps": 1}, None),
        ("agent_plan.started", {"attempt": 1, "replan": 1}, None),
        ("agent_plan.completed", {"attempt": 1, "ready": True, "replan": 1, "steps": [
            {"step_id": "k.s4", "number": 4, "description": "Group by tram line"}]}, None),
        ("step.skipped", {"step_id": "k.s3", "number": 3, "reason": "replaced by a new plan"}, "k.s3"),
        ("step.started", {"step_id": "k.s4", "number": 4, "description": "Group by tram line"}, "k.s4"),
        ("step.completed", {"step_id": "k.s4", "number": 4, "outcome": "completed", "result": "Tram 28",
                            "error": None}, "k.s4"),
        ("llm.started", {"model": "m", "purpose": "synthesis"}, None),
        ("llm.completed", {"model": "m", "purpose": "synthesis", "prompt_tokens": 40, "completion_tokens": 60,
                           "cost_usd": 0.02, "latency_ms": 1500}, None),
        ("run.succeeded", {"output": "Day 1: castle. Day 2: tram 28."}, None),
    ]
    for type_, data, step in events:
        record_event(run.pk, type_, data, step_id=step)
    return run


def test_the_fold_turns_an_agents_events_into_plans_steps_tools_and_usage(builder):
    run = _record_agent_run(builder)

    view = RunView.build(run)

    assert view.status == "succeeded" and view.is_agent_run
    task = view.scope
    assert task.status == "done" and task.output == "Day 1: castle. Day 2: tram 28."
    first, replanned = [item for item in task.plan if item.kind == "segment"]
    assert first.attempt == 2 and [s.description for s in first.steps] == ["Find sights", "Group by area", "Write days"]
    assert [s.status for s in first.steps] == ["completed", "failed", "skipped"]
    assert first.steps[1].refined and first.steps[1].error == "no map"
    assert first.steps[0].learned == "Two sights" and first.steps[0].result == "Castle, tower"
    assert replanned.replan == 1 and [(s.number, s.status) for s in replanned.steps] == [(4, "completed")]
    notes = [item.text for item in task.plan if item.kind == "note"]
    assert any("refined 1 later step" in n for n in notes) and any("step 2 failed" in n for n in notes)
    tools = [e for e in first.steps[0].activity if e.kind == "tool"]
    assert [(t.name, t.status, t.output or t.error) for t in tools] == [
        ("http_get", "done", "<html>"), ("calculator", "failed", "bad input")]
    llm = [e for e in task.activity if e.kind == "llm"]
    assert [(c.purpose, c.status) for c in llm] == [("agent_plan", "done"), ("synthesis", "done")]
    assert (view.prompt_tokens, view.completion_tokens, view.llm_calls) == (150, 115, 3)
    assert round(view.cost_usd, 4) == 0.03 and view.cost_unknown == 1
    assert view.last_seq == len(view.log) == RunEvent.objects.filter(run=run).count()


def test_folding_event_by_event_renders_what_the_page_renders(builder):
    """The socket's view (folded one event at a time) and the page's agree on every part."""
    run = _record_agent_run(builder)
    whole = RunView.build(run)
    live = RunView.build(run, upto=0)
    for event in RunEvent.objects.filter(run=run).order_by("seq"):
        render_event_html(live, payload_of(event), can_write=True)
    from django.template.loader import render_to_string

    def card(view: RunView) -> str:
        return render_to_string("crews/run_detail.html#task", {"view": view, "run": run, "task": view.scope,
                                                               "can_write": True})

    assert card(live) == card(whole)
    assert (live.status, live.tokens, live.cost, live.last_seq) == (whole.status, whole.tokens, whole.cost,
                                                                    whole.last_seq)


def test_a_socket_message_appends_its_log_row_and_replaces_only_what_changed(builder):
    run = queued_run(builder)
    started(run)
    task = task_ids(run)[0]
    view = RunView.build(run)
    event = payload_of(record_event(run.pk, "task.started", {"task_id": str(task), "agent": "Writer"},
                                    task_id=task))

    html = render_event_html(view, event, can_write=True)

    assert html.startswith(f'<ol hx-swap-oob="beforeend:#run-events"><li id="event-{event["seq"]}"')
    assert html.count("<li ") == 1
    assert f'<article id="task-{task}"' in html and 'hx-swap-oob="true"' in html
    assert 'id="run-status"' not in html  # the run's status did not change
    delta = {"seq": None, "type": "llm.delta", "at": event["at"], "task_id": task, "step_id": "7.s1",
             "data": {"text": "<b>Hi"}}
    assert render_event_html(view, delta, can_write=True) == (
        f'<span hx-swap-oob="beforeend:#delta-step-{task}-7-s1">&lt;b&gt;Hi</span>')


def test_status_changes_without_a_run_event_still_reach_the_page(builder):
    run, task = _waiting_for_feedback(builder)
    view = RunView.build(run)
    assert view.status == "awaiting_input" and view.waiting == {"kind": "feedback", "target": f"prompt-{task}"}

    html = render_event_html(view, payload_of(record_event(run.pk, "feedback.received", {"text": ""},
                                                           task_id=task)), can_write=True)

    assert view.status == "running" and 'data-status="running"' in html
    assert "Answer accepted." in html


# History ---------------------------------------------------------------------------------------


def test_the_run_list_filters_by_status_and_shows_duration_tokens_and_cost(builder, other_builder, monkeypatch):
    done = finished_run(builder, monkeypatch)
    Run.objects.filter(pk=done.pk).update(started_at=timezone.now() - timedelta(seconds=75),
                                          finished_at=timezone.now(), prompt_tokens=1200, completion_tokens=34,
                                          cost_usd="0.0123")
    waiting = queued_run(builder, name="Second")
    hidden = queued_run(other_builder, name="Private")
    client = signed_in(builder)

    everything = client.get(reverse("crews:run-list")).content.decode()
    succeeded = client.get(reverse("crews:run-list"), {"status": "succeeded"}).content.decode()
    fragment = client.get(reverse("crews:run-list"), {"status": "queued"}, HTTP_HX_REQUEST="true").content.decode()

    assert f"#{done.pk}<" in everything and f"#{waiting.pk}<" in everything and f"#{hidden.pk}<" not in everything
    assert "1 min 15 s" in everything and "1,234" in everything and "$0.0123" in everything
    assert f"#{done.pk}<" in succeeded and f"#{waiting.pk}<" not in succeeded
    assert fragment.strip().startswith('<div id="run-history"') and f"#{waiting.pk}<" in fragment


def test_a_crews_runs_are_paginated_and_another_users_crew_is_a_404(builder, other_builder):
    crew = make_crew(builder)
    for _ in range(27):
        runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "t"}, enqueue=False)
    Run.objects.update(created_at=timezone.now() - timedelta(minutes=5))  # the kickoff rate limit
    url = reverse("crews:crew-runs", args=[crew.pk])
    client = signed_in(builder)

    first = client.get(url).content.decode()
    second = client.get(url, {"page": 2}).content.decode()

    assert first.count('<th scope="row"') == 25 and "Page 1 of 2" in first
    assert second.count('<th scope="row"') == 2 and 'rel="prev"' in second
    assert signed_in(other_builder).get(url).status_code == 404


def test_recent_runs_renders_for_the_crew_page(builder, monkeypatch):
    from django.template.loader import render_to_string

    from crews.views.runs import recent_runs

    run = finished_run(builder, monkeypatch)
    html = render_to_string("crews/_recent_runs.html", {"crew": run.crew, "runs": recent_runs(user=builder,
                                                                                              crew=run.crew)})

    assert f"Run #{run.pk}" in html and 'data-status="succeeded"' in html
    assert reverse("crews:crew-runs", args=[run.crew.pk]) in html
    assert " tokens · $0.0000" in html  # costs are written as on the run page (money.usd)


def test_the_crew_page_writes_its_budget_and_planning_cost_as_the_run_pages_do(builder):
    crew = make_crew(builder)
    crew.budget_max_cost_usd = "2.5"
    crew.save()

    html = signed_in(builder).get(reverse("crews:crew-detail", args=[crew.pk])).content.decode()

    assert "<dd>$2.50</dd>" in html
    assert "$0.0000 · 0 tokens · 0 plans" in html and "US$" not in html


# Asking an agent ---------------------------------------------------------------------------------


def test_asking_an_agent_starts_its_run_and_opens_the_run_page(builder):
    agent = make_agent(builder, "Trip planner")
    client = signed_in(builder)

    page = client.get(reverse("agents:agent-detail", args=[agent.pk])).content.decode()
    response = client.post(reverse("crews:agent-ask", args=[agent.pk]), {"message": "Plan a two-day trip to Lisbon"})

    run = Run.objects.get(agent=agent)
    assert "Ask this agent" in page and 'name="message"' in page
    assert response["Location"] == detail(run)
    assert run.message == "Plan a two-day trip to Lisbon" and run.crew is None


def test_asking_nothing_is_an_inline_error(builder):
    agent = make_agent(builder, "Trip planner")
    client = signed_in(builder)

    plain = client.post(reverse("crews:agent-ask", args=[agent.pk]), {"message": "  "})
    htmx = client.post(reverse("crews:agent-ask", args=[agent.pk]), {"message": ""}, HTTP_HX_REQUEST="true")

    assert plain.status_code == 422 and "Write what the agent should do." in plain.content.decode()
    assert htmx.content.decode().strip().startswith('<section id="ask"')
    assert not Run.objects.filter(agent=agent).exists()


def test_a_viewer_cannot_ask_an_agent(builder, viewer):
    agent = make_agent(builder, "Shared planner")
    crew = make_crew(builder, agent=agent, shared=True)
    assert crew.shared

    client: Client = signed_in(viewer)
    page = client.get(reverse("agents:agent-detail", args=[agent.pk]))
    response = client.post(reverse("crews:agent-ask", args=[agent.pk]), {"message": "Hi"})

    assert page.status_code == 200 and "Ask this agent" not in page.content.decode()
    assert response.status_code == 403


def approved_texts(view: RunView, index: int = 0) -> list[str]:
    (segment,) = [s for s in view.tasks[index].plan if getattr(s, "status", "") == "approved"]
    return [step.description for step in segment.steps]


def test_each_task_shows_its_approved_steps_and_each_steps_status(demo_crew, builder):
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    view = RunView.build(run)
    approved = plans.steps_by_task_key(Run.objects.get(pk=run.pk).plan, Run.objects.get(pk=run.pk).plan_version)

    html = signed_in(builder).get(detail(run)).content.decode()

    # The approved steps are the agent's plan: no second "agent's plan", every step done.
    for task in view.tasks:
        assert [s.description for s in task.steps] == [s.text for s in approved[str(task.task_id)]]
        assert [s.step_id for s in task.steps] == [s.id for s in approved[str(task.task_id)]]
        assert {s.status for s in task.steps} == {"completed"}
    assert html.count("The approved plan") >= 2 and "The agent&#x27;s plan" not in html
    assert all(escape(text) in html for text in approved_texts(view))


@pytest.mark.django_db(transaction=True)
async def test_the_socket_brings_the_approved_crew_plans_steps_into_the_tasks(demo_crew, builder):
    from channels.db import database_sync_to_async
    from channels.testing import WebsocketCommunicator

    from planner_site.asgi import application
    from tests.crews.test_consumers import session_headers

    def setup() -> tuple[Run, int, list[str]]:
        run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
        runner.execute(run.pk)
        approved = RunEvent.objects.get(run=run, type="crew_plan.approved").seq
        return run, approved, approved_texts(RunView.build(run))

    run, approved, steps = await database_sync_to_async(setup)()
    headers = await database_sync_to_async(session_headers)(builder)
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/?after={approved - 1}", headers=headers)
    connected, _ = await communicator.connect()
    assert connected

    message = await communicator.receive_from(timeout=3)

    assert f'<li id="event-{approved}"' in message
    assert "The approved plan" in message and escape(steps[0]) in message
    await communicator.disconnect()


def test_a_resumed_run_starts_its_interrupted_task_over_and_its_clock_skips_the_pause(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    steps = [{"step_id": f"{first}.s1", "number": 1, "description": "Old step"}]
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "agent_plan.completed", {"attempt": 1, "ready": True, "steps": steps}, task_id=first)
    record_event(run.pk, "step.started", steps[0], task_id=first, step_id=f"{first}.s1")
    runs.run_finish(run_id=run.pk, status=Run.Status.INTERRUPTED)
    interrupted = RunView.build(run)
    RunEvent.objects.filter(run=run).update(at=timezone.now() - timedelta(hours=1))  # it sat for an hour
    runs.run_resume(actor=builder, run=Run.objects.get(pk=run.pk))
    runs.run_claim(run_id=run.pk, worker_id="again")
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)

    view = RunView.build(run)

    assert interrupted.status == "interrupted" and interrupted.tasks[0].status == "waiting"
    # Its step no longer works (no spinner) but is still there until the resumed run starts over.
    assert not interrupted.clock_running and interrupted.tasks[0].steps[0].status == "stopped"
    assert view.status == "running" and view.tasks[0].status == "running" and view.tasks[0].plan == []
    assert view.elapsed_seconds is not None and view.elapsed_seconds < 60


def test_step_result_url_is_what_reverse_gives() -> None:
    from crews.run_view import step_result_url

    for run_id, seq in ((1, 7), (10, 0), (0, 10), (123, 4567)):
        assert step_result_url(run_id, seq) == reverse("crews:run-step-result", args=[run_id, seq])


def test_llm_call_markup_is_the_same_however_often_it_is_asked_for() -> None:
    from django.utils import translation

    from crews.run_view import LLMCall

    call = LLMCall(seq=3, model="gpt <x>", purpose="plan")
    running = call.html()
    assert 'id="llm-3"' in running and "gpt &lt;x&gt;" in running and "…" in running
    call.status, call.prompt_tokens, call.completion_tokens, call.cost_usd, call.latency_ms = "done", 1200, 34, 0.0123, 2500
    done = call.html()
    assert done != running and "1,234" in done and call.html() == done
    assert call.html(oob=True) == done.replace('data-status="done"', 'data-status="done" hx-swap-oob="true"', 1)
    with translation.override("pt-br"):
        assert call.html() != done  # per language: its figures and labels
    call.status, call.error, call.retrying = "failed", "rate <limit>", True
    assert "rate &lt;limit&gt;" in call.html()


def test_a_deviation_shows_as_a_diff_and_a_proposal_waits_with_links_to_review_it(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    steps = [{"step_id": f"{first}.p1", "number": 1, "description": "Read <the> tables"},
             {"step_id": f"{first}.p2", "number": 2, "description": "Write the report"}]
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "agent_plan.bound", {"on_step_failure": "adapt", "steps": steps}, task_id=first)
    record_event(run.pk, "step.started", steps[0], task_id=first, step_id=f"{first}.p1")
    record_event(run.pk, "step.completed", {**steps[0], "outcome": "failed", "result": "", "error": "no tables"},
                 task_id=first, step_id=f"{first}.p1")
    record_event(run.pk, "crew_plan.deviated", {"reason": "step 1 did not complete successfully",
                                                "before": ["Write the report"], "after": ["Estimate <it>"]},
                 task_id=first)

    record_event(run.pk, "run.awaiting_approval", {"plan_id": 7, "version": 3, "task_id": first,
                                                   "reason": "step 1 failed", "kind": "deviation"})

    html = signed_in(builder).get(detail(run)).content.decode()

    assert "The approved plan" in html and "The agent&#x27;s plan" not in html
    assert "Read &lt;the&gt; tables" in html and 'data-status="failed"' in html
    assert "The agent changed the approved plan" in html
    assert "<del>Write the report</del>" in html and "<ins>Estimate &lt;it&gt;</ins>" in html
    assert "the agent proposes new steps" in html
    assert reverse("crews:plan-diff", args=[7]) + "?from=2&amp;to=3" in html


def test_why_a_step_was_skipped_reads_in_peoples_words_in_the_readers_language(builder):
    from django.utils import translation

    agent = make_agent(builder, "Planner")
    run = Run.objects.create(agent=agent, created_by=builder, message="Plan Lisbon",
                             snapshot={"agent": {"name": "Planner", "role": "Trip Planner"}})
    for type_, data, step in [
        ("run.queued", {}, None), ("run.started", {}, None), ("agent_plan.started", {"attempt": 1}, None),
        ("agent_plan.completed", {"attempt": 1, "plan": "p", "ready": True, "steps": [
            {"step_id": "k.s1", "number": 1, "description": "Find sights"}]}, None),
        ("step.skipped", {"step_id": "k.s1", "number": 1, "reason": "cancelled"}, "k.s1"),
        ("run.cancelled", {}, None),
    ]:
        record_event(run.pk, type_, data, step_id=step)

    view = RunView.build(run)  # built before the reader's language is known, as a socket's is
    [step] = [s for item in view.scope.plan if item.kind == "segment" for s in item.steps]
    assert str(step.reason) == "the run was stopped"
    with translation.override("pt-br"):
        assert str(step.reason) == "a execução foi parada"
    page = signed_in(builder).get(detail(run), HTTP_ACCEPT_LANGUAGE="pt-br").content.decode()
    assert "Pulada: a execução foi parada" in page and "Pulada: cancelled" not in page


def test_the_event_log_says_what_happened_in_words_with_the_type_as_its_tooltip(builder):
    agent = make_agent(builder, "Planner")
    run = Run.objects.create(agent=agent, created_by=builder, message="Plan Lisbon", snapshot={"agent": {"name": "P"}})
    for type_, data in [("run.queued", {}), ("run.started", {}), ("llm.started", {"model": "m", "purpose": "react"}),
                        ("run.cancelled", {})]:
        record_event(run.pk, type_, data)

    client = signed_in(builder)
    assert '<span class="run-event-type" title="llm.started">Asked the model</span>' in client.get(detail(run)).content.decode()
    page = client.get(detail(run), HTTP_ACCEPT_LANGUAGE="pt-br").content.decode()
    assert '<span class="run-event-type" title="llm.started">Pergunta ao modelo</span>' in page
