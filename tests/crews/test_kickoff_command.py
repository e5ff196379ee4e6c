"""manage.py kickoff: a crew run in the foreground with its progress, output and exit status."""

from __future__ import annotations

import signal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from crews import plans, runner
from crews.management.commands.kickoff import parse_input
from crews.models import Plan, Run, RunEvent
from tests.crews.run_helpers import (
    TaskReplies,
    event_types,
    fake_llm,
    kickoff_process,
    make_crew,
    scripted,
    wait_for,
)
from tests.fakes.openai_server import FakeLLMServer

pytestmark = pytest.mark.django_db(transaction=True)


def kickoff(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("kickoff", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_inputs_are_json_when_they_parse_and_text_otherwise():
    assert parse_input("topic=AI LLMs") == ("topic", "AI LLMs")
    assert parse_input("n=3") == ("n", 3)
    assert parse_input('opts={"a": [1, 2]}') == ("opts", {"a": [1, 2]})
    assert parse_input("eq=a=b") == ("eq", "a=b")
    with pytest.raises(CommandError):
        parse_input("topic")


def test_kickoff_runs_the_crew_showing_progress_and_prints_the_output(demo_crew):
    out, err = kickoff("AI LLMs", "--input", "topic=tides")

    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED
    assert out.strip() == run.output.strip() and run.output
    assert run.inputs["topic"] == "tides"
    assert "-> drafting the crew plan" in err
    assert "-> task 1/2 Research (tides Senior Data Researcher)" in err
    assert "-> task 2/2 Report (tides Reporting Analyst)" in err
    assert f"Run {run.pk} succeeded: {run.prompt_tokens + run.completion_tokens:,} tokens" in err
    assert "$0.0000, 3 LLM calls" in err


def test_kickoff_executes_the_run_itself_and_queues_nothing(demo_crew):
    backend = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
    with override_settings(TASKS=backend):
        kickoff(str(demo_crew.pk), "--input", "topic=tides", "--plan", "none")

    assert Run.objects.get().status == Run.Status.SUCCEEDED
    assert DBTaskResult.objects.count() == 0  # no worker will pick the run up a second time


def test_plan_auto_drafts_and_approves_a_plan_that_the_run_uses_verbatim(demo_crew, builder):
    _out, err = kickoff("AI LLMs", "--input", "topic=tides", "--plan", "auto", "--user", "bob")

    plan = Plan.objects.get()
    run = Run.objects.get()
    assert plan.status == Plan.Status.APPROVED and plan.created_by == builder
    assert (run.plan, run.plan_version, run.status) == (plan, 1, Run.Status.SUCCEEDED)
    types = event_types(run)
    assert "crew_plan.approved" in types and "crew_plan.started" not in types
    first_step = plans.current_steps(plan)[run.snapshot["tasks"][0]["id"]][0].text
    assert first_step[:60] in err and f"Approved plan {plan.pk} v1." in err


def test_plan_none_runs_a_planning_crew_without_a_plan(demo_crew):
    kickoff("AI LLMs", "--input", "topic=tides", "--plan", "none")

    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED and run.plan is None
    assert not [t for t in event_types(run) if t.startswith("crew_plan.")]


def test_plan_id_takes_an_approved_plan_and_refuses_a_draft(demo_crew, builder):
    plan = plans.plan_draft(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    runner.generate_plan(plan.pk)

    with pytest.raises(CommandError, match="plan_id: Approve the plan"):
        kickoff("AI LLMs", "--plan", str(plan.pk))
    plans.plan_approve(actor=builder, plan=Plan.objects.get(pk=plan.pk))
    kickoff("AI LLMs", "--plan", str(plan.pk))

    run = Run.objects.get()
    assert run.plan_id == plan.pk and run.status == Run.Status.SUCCEEDED
    assert "crew_plan.started" not in event_types(run)


def test_a_missing_input_fails_before_any_run(builder):
    make_crew(builder, name="Tides")

    with pytest.raises(CommandError, match=r"inputs\.topic") as caught:
        kickoff("Tides")

    assert caught.value.returncode == 1
    assert not Run.objects.exists()


def test_a_crew_the_user_cannot_see_is_not_found(builder, other_builder):
    crew = make_crew(builder, name="Tides")

    with pytest.raises(CommandError, match="No crew"):
        kickoff(str(crew.pk), "--input", "topic=x", "--user", other_builder.username)


def test_a_failed_run_exits_non_zero_with_its_error(builder, monkeypatch):
    make_crew(builder, name="Tides", budget_max_tokens=5)
    scripted(monkeypatch, default="Final Answer: " + "words " * 50)

    with pytest.raises(CommandError, match="failed: budget exceeded: max_tokens") as caught:
        kickoff("Tides", "--input", "topic=x")

    assert caught.value.returncode == 1
    assert Run.objects.get().status == Run.Status.FAILED


def test_ctrl_c_stops_the_run_and_no_llm_request_follows(builder):
    tasks = ["Research", "Report"]
    with FakeLLMServer() as server:
        server.default = replies = TaskReplies(tasks, hold=["Research"])
        crew = make_crew(builder, name="Tides", tasks=tasks, llm=fake_llm(server))
        process = kickoff_process(str(crew.pk), "--input", "topic=tides")
        try:
            wait_for(lambda: server.request_count == 1 or process.poll() is not None,
                     timeout=90, what="the first LLM request")  # a cold litellm import under load
            process.send_signal(signal.SIGINT)
            code = process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        _out, err = process.communicate()

        assert code == 130, err
        run = Run.objects.get(crew=crew)
        assert run.status == Run.Status.CANCELLED
        assert event_types(run)[-2:] == ["run.cancelling", "run.cancelled"]
        assert server.request_count == 1 and replies.counts == {"Research": 1}
        assert "Stopping the run" in err and f"Run {run.pk} was stopped." in err


def test_sigterm_leaves_the_run_interrupted_for_a_resume(builder):
    tasks = ["Research", "Report"]
    with FakeLLMServer() as server:
        server.default = TaskReplies(tasks, hold=["Report"])
        crew = make_crew(builder, name="Tides", tasks=tasks, llm=fake_llm(server))
        process = kickoff_process(str(crew.pk), "--input", "topic=tides")
        try:
            wait_for(lambda: server.request_count == 2 or process.poll() is not None,
                     timeout=90, what="the second task's LLM request")
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=20)
        finally:
            if process.poll() is None:
                process.kill()
        _out, err = process.communicate()

        assert code == 1, err
        run = Run.objects.get(crew=crew)
        assert run.status == Run.Status.INTERRUPTED and run.finished_at is None
        assert [r.status for r in run.task_results.order_by("order")] == ["done", "waiting"]
        assert f"Run {run.pk} was interrupted" in err
        assert RunEvent.objects.filter(run=run, type="task.completed").count() == 1
