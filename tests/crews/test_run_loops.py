"""Runs whose model does not follow the agent's format end honestly, and the run page says so
(issue #14): real runs through the worker against the fake OpenAI-compatible server, and pages
folded from recorded events."""

from __future__ import annotations

import pytest

from crews import runner, runs
from crews.bridge import record_event
from crews.models import Run, RunEvent
from tests.conftest import signed_in
from tests.crews.run_helpers import fake_llm, make_agent, make_crew, stop_leftover_runs  # noqa: F401
from tests.crews.test_run_views import ESCAPED, EVIL, detail, queued_run, started, task_ids
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.plain_models import prose, stuck

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")

REASON = "the model did not follow the answer format: it sent the same reply 3 times in a row"


# Through the worker, against the fake server ----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_model_stuck_on_one_action_fails_its_run_in_four_calls_and_the_page_shows_why(builder):
    with FakeLLMServer() as server:
        server.default = stuck("calculator", {"expression": "1+1"})
        llm = fake_llm(server)
        agent = make_agent(builder, "Counter", llm=llm, tools=["calculator"], max_retry_limit=2)
        crew = make_crew(builder, tasks=["Research"], agent=agent)
        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

        runner.execute(run.pk)

        assert server.request_count == 4  # three turns, one forced answer; the task is not retried
        run.refresh_from_db()
        assert run.status == Run.Status.FAILED
        assert REASON in run.error
        stuck_event = RunEvent.objects.get(run=run, type="react.stuck").data
        assert (stuck_event["turn"], stuck_event["repeats"], stuck_event["reason"]) == (3, 3, REASON)
        turns = [e["turn"] for e in RunEvent.objects.filter(run=run, type="react.turn").values_list("data", flat=True)]
        assert turns == [1, 2, 3]

        page = signed_in(builder).get(detail(run)).content.decode()

    assert f"Failed: Agent &#x27;Counter&#x27; failed: {REASON}" in page
    assert "Stopped at turn 3 of 25: the same reply 3 times in a row" in page
    # The replies it kept sending, escaped: the native call, then the forced answer's text.
    assert "calculator({&quot;expression&quot;: &quot;1+1&quot;})" in page
    assert "Action: calculator\nAction Input: {&quot;expression&quot;: &quot;1+1&quot;}" in page
    assert "Reply not understood (turn 4 of 25)" in page


@pytest.mark.django_db(transaction=True)
def test_an_agent_without_tools_answering_prose_succeeds_in_one_call(builder):
    with FakeLLMServer() as server:
        server.default = prose("Tides follow the moon, twice a day.")
        crew = make_crew(builder, tasks=["Research"], llm=fake_llm(server))
        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

        runner.execute(run.pk)

        run.refresh_from_db()
        assert (run.status, server.request_count) == (Run.Status.SUCCEEDED, 1)
        assert run.output == "Tides follow the moon, twice a day."
        body = server.requests[0].body
        assert "stop" not in body and "Final Answer" not in body["messages"][0]["content"]


# The page, folded from recorded events ----------------------------------------------------------


@pytest.mark.django_db
def test_the_page_shows_the_turn_of_the_working_task_and_of_its_working_step(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    step = {"step_id": f"{first}.s1", "number": 1, "description": "Count"}
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "react.turn", {"turn": 2, "max_turns": 25}, task_id=first)
    record_event(run.pk, "agent_plan.completed", {"attempt": 1, "ready": True, "steps": [step]}, task_id=first)
    record_event(run.pk, "step.started", step, task_id=first, step_id=step["step_id"])
    record_event(run.pk, "react.turn", {"turn": 3, "max_turns": 4}, task_id=first, step_id=step["step_id"])

    page = signed_in(builder).get(detail(run)).content.decode()

    assert '<span class="muted task-head__turn">turn 2 of 25</span>' in page
    assert '<span class="badge step-head__turn">turn 3 of 4</span>' in page


@pytest.mark.django_db
def test_each_rejected_reply_is_on_the_page_collapsed_and_escaped(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "react.format_error", {"turn": 1, "max_turns": 25, "error": "no Final Answer",
                                                "reply": f"I think {EVIL}", "reply_chars": 2500}, task_id=first)
    record_event(run.pk, "react.format_error", {"turn": 2, "max_turns": 25, "error": "your reply was empty.",
                                                "reply": "", "reply_chars": 0}, task_id=first)

    page = signed_in(builder).get(detail(run)).content.decode()

    assert page.count('class="entry entry--rejected" data-status="format_error"') == 2
    assert "Reply not understood (turn 1 of 25)" in page and "Reply not understood (turn 2 of 25)" in page
    assert f"<pre tabindex=\"0\">I think {ESCAPED}</pre>" in page and EVIL not in page
    assert f"… and {2500 - len(f'I think {EVIL}')} more characters" in page  # what the event left out
    assert "(an empty reply)" in page


@pytest.mark.django_db
def test_a_forced_answer_carries_a_visible_warning(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "react.forced_answer", {"reason": "max_turns", "turn": 26, "max_turns": 25}, task_id=first)
    record_event(run.pk, "task.completed", {"output": "My best guess."}, task_id=first)
    record_event(run.pk, "run.succeeded", {"output": "My best guess."})

    page = signed_in(builder).get(detail(run)).content.decode()

    assert '<span class="badge badge--warning">Forced answer</span>' in page
    assert "Forced answer: the agent used all 25 turns without giving an answer" in page
    assert "Finished, with forced answers." in page  # the run is no silent success
    assert "The model gave no answer of its own for: Research." in page


@pytest.mark.django_db
def test_a_stopped_run_no_longer_says_it_drafts_plans_or_works(builder):
    run = queued_run(builder, planning=True)
    started(run)
    first = task_ids(run)[0]
    step = {"step_id": f"{first}.s1", "number": 1, "description": "Count"}
    record_event(run.pk, "crew_plan.started", {})
    record_event(run.pk, "task.started", {"task_id": str(first)}, task_id=first)
    record_event(run.pk, "agent_plan.completed", {"attempt": 1, "ready": True, "steps": [step]}, task_id=first)
    record_event(run.pk, "step.started", step, task_id=first, step_id=step["step_id"])
    record_event(run.pk, "agent_plan.started", {"attempt": 1, "replan": 1}, task_id=first)
    record_event(run.pk, "tool.started", {"name": "calculator", "args": {"expression": "1+1"}},
                 task_id=first, step_id=step["step_id"])
    client = signed_in(builder)
    working = client.get(detail(run)).content.decode()
    assert "Drafting" in working and "Planning…" in working and 'data-status="running"' in working

    record_event(run.pk, "run.cancelled", {})
    page = client.get(detail(run)).content.decode()

    assert "Drafting" not in page and "Planning…" not in page
    assert 'data-status="running"' not in page and "running…" not in page
    assert f'id="step-{first}-{first}-s1-head" class="step-head" data-status="stopped"' in page
