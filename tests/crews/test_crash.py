"""A worker killed mid-run: the run is marked interrupted and resumes without redoing finished work."""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from django.utils import timezone

from crews import runner, runs
from crews.models import Run, RunEvent, RunTask
from planner_site import worker
from planner_site.worker import heartbeat
from tests.crews.run_helpers import (
    TaskReplies,
    event_types,
    fake_llm,
    kickoff_process,
    make_crew,
    wait_for,
)
from tests.fakes.openai_server import FakeLLMServer

TASKS = ["Research", "Report", "Summary"]


@pytest.mark.django_db(transaction=True)
def test_a_killed_run_is_interrupted_then_resumes_from_its_first_unfinished_task(builder, settings):
    with FakeLLMServer() as server:
        server.default = replies = TaskReplies(TASKS, hold=["Report"])
        crew = make_crew(builder, name="Tides", tasks=TASKS, llm=fake_llm(server))
        process = kickoff_process(str(crew.pk), "--input", "topic=tides")
        try:
            # Research done, Report's request in flight (the server holds it): kill the worker.
            wait_for(lambda: replies.counts.get("Report") == 1 or process.poll() is not None,
                     timeout=90, what="the second task's LLM request")
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=10) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
        run = Run.objects.get(crew=crew)
        assert run.status == Run.Status.RUNNING  # nobody told the database
        assert [r.status for r in run.task_results.order_by("order")] == ["done", "running", "waiting"]

        # A worker process starting up sweeps: the run's heartbeat is older than the limit.
        settings.PLANNER_RUN_STALE_SECONDS = 0
        heartbeat.start()
        heartbeat.stop()
        run.refresh_from_db()
        assert run.status == Run.Status.INTERRUPTED
        runs.run_resume(actor=builder, run=run)  # queues it (the immediate backend runs it now)
        runner.execute(run.pk)  # what a worker does: a run already taken is left alone

        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert replies.counts == {"Research": 1, "Report": 2, "Summary": 1}
        assert [r.output for r in run.task_results.order_by("order")] == [
            "Research done", "Report done", "Summary done",
        ]
        assert all(r.status == RunTask.Status.DONE for r in run.task_results.all())
        assert run.output == "Summary done"
        types = event_types(run)
        assert types.count("task.completed") == 3  # Research's once, before the crash
        assert types.index("run.interrupted") < types.index("run.resumed") < types.index("run.succeeded")
        research = run.snapshot["tasks"][0]["id"]
        assert RunEvent.objects.filter(run=run, type="task.started", task_id=research).count() == 1
        seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))


def _claimed(builder, crew, *, beat_seconds_ago: float) -> Run:
    """A run a worker claimed, whose last heartbeat was ``beat_seconds_ago``."""
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runs.run_claim(run_id=run.pk, worker_id="gone-worker")
    Run.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=beat_seconds_ago))
    return Run.objects.get(pk=run.pk)


@pytest.mark.django_db(transaction=True)
def test_a_live_worker_process_sweeps_runs_whose_worker_stopped_beating(builder, settings, monkeypatch):
    monkeypatch.setattr(worker, "HEARTBEAT_SECONDS", 0.05)
    settings.PLANNER_RUN_STALE_SECONDS = 30
    crew = make_crew(builder, tasks=["Research"])
    alive = _claimed(builder, crew, beat_seconds_ago=1)
    heartbeat.start()  # this process's workers start: the first sweep finds nothing stale
    try:
        assert Run.objects.get(pk=alive.pk).status == Run.Status.RUNNING
        # Later, another worker dies: its run's heartbeat is 40 s old, one stop is being asked.
        dead = _claimed(builder, crew, beat_seconds_ago=40)
        stopped = _claimed(builder, crew, beat_seconds_ago=40)
        runs.run_cancel(actor=builder, run=stopped)
        wait_for(lambda: Run.objects.get(pk=dead.pk).status == Run.Status.INTERRUPTED
                 and Run.objects.get(pk=stopped.pk).status == Run.Status.CANCELLED,
                 timeout=10, what="the periodic sweep")
    finally:
        heartbeat.stop()
    assert Run.objects.get(pk=alive.pk).status == Run.Status.RUNNING  # it still beats
    assert event_types(dead)[-1] == "run.interrupted"
    assert event_types(stopped)[-2:] == ["run.cancelling", "run.cancelled"]
    assert runs.run_mark_stale_interrupted() == []  # each is marked once


@pytest.mark.django_db(transaction=True)
def test_a_failing_upkeep_hook_is_logged_and_the_others_still_run(monkeypatch, caplog):
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("database is locked")

    monkeypatch.setattr(worker, "_beat_hooks", [broken, lambda: ran.append("next")])
    heartbeat.start()
    heartbeat.stop()
    assert ran == ["next"]
    assert "worker upkeep broken failed" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_plan_drafts_and_regenerations_whose_worker_died_are_failed_by_the_sweep(builder, settings):
    from crews import plans
    from crews.models import Plan

    settings.PLANNER_PLAN_STALE_SECONDS = 600
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    old = timezone.now() - timedelta(seconds=601)
    lost = Plan.objects.create(crew=crew, created_by=builder, status=Plan.Status.GENERATING)
    drafting = Plan.objects.create(crew=crew, created_by=builder, status=Plan.Status.GENERATING)
    plan = Plan.objects.create(crew=crew, created_by=builder, status=Plan.Status.GENERATING)
    plan = plans.plan_store_draft(plan_id=plan.pk, steps={str(research.pk): ["a"]}, usage={}, task_ids=[research.pk])
    # A regeneration started 601 s ago whose worker died (set directly: the tests' task backend
    # would run it at once).
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[research.pk])
    Plan.objects.filter(pk__in=[lost.pk, plan.pk]).update(updated_at=old)

    heartbeat.start()
    heartbeat.stop()

    lost.refresh_from_db(), drafting.refresh_from_db(), plan.refresh_from_db()
    assert (lost.status, lost.error) == (Plan.Status.FAILED, plans.STOPPED_DRAFTING)
    assert drafting.status == Plan.Status.GENERATING  # started recently: still drafting
    assert (plan.status, plan.regenerating_task_ids, plan.error) == (
        Plan.Status.DRAFT, [], plans.STOPPED_REGENERATING)
    # ... so the task can be regenerated again.
    assert research.pk in plans.plan_regenerate(actor=builder, plan=plan, task=research).regenerating_task_ids
