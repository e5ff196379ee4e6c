"""The runner's per-run reads, compiled once: they answer as the querysets they stand for."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.engine.runtime import CancelToken
from crews import runner, runs
from crews.bridge import RunNotWorking, record_event
from crews.models import Plan, Run, RunEvent, RunTask
from tests.crews.run_helpers import make_crew, planned_run


@pytest.mark.django_db(transaction=True)
def test_the_watch_poll_sees_a_stop_request_of_its_own_run_only(builder: Any) -> None:
    crew = make_crew(builder)
    mine, other = (runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
                   for _ in range(2))
    for run in (mine, other):
        runs.run_claim(run_id=run.pk, worker_id="me#1")
    followers = runner.DeltaFollowers(mine.pk)
    for beat in (False, True):
        assert runner._poll(mine.pk, "me#1", followers, beat=beat) is False
    Run.objects.filter(pk=other.pk).update(cancel_requested=True)
    assert runner._poll(mine.pk, "me#1", followers, beat=False) is False
    Run.objects.filter(pk=mine.pk).update(cancel_requested=True)
    for beat in (False, True):
        assert runner._poll(mine.pk, "me#1", followers, beat=beat) is True


@pytest.mark.django_db(transaction=True)
def test_the_watch_poll_stops_an_execution_that_no_longer_owns_its_run(builder: Any) -> None:
    """Swept while it stalled, then resumed and claimed elsewhere: this execution must stop."""
    crew = make_crew(builder)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runs.run_claim(run_id=run.pk, worker_id="me#1")
    followers = runner.DeltaFollowers(run.pk)
    assert runs.run_mark_stale_interrupted(stale_after=0) == [run.pk]
    for beat in (False, True):
        assert runner._poll(run.pk, "me#1", followers, beat=beat) is True  # interrupted
    Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED)  # resumed (not run here) ...
    runs.run_claim(run_id=run.pk, worker_id="other#2")  # ... and claimed by another worker
    for beat in (False, True):
        assert runner._poll(run.pk, "me#1", followers, beat=beat) is True  # working, not for me
    assert runner._poll(run.pk, "other#2", followers, beat=True) is False
    runs.run_finish(run_id=run.pk, status=Run.Status.CANCELLED, owner="me#1")  # refused
    assert Run.objects.get(pk=run.pk).status == Run.Status.RUNNING
    # Its engine's events are refused too, and take no seq: the owner's next one is gapless.
    with pytest.raises(RunNotWorking):
        record_event(run.pk, "task.started", {}, working_only=True, owner="me#1")
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    taken = record_event(run.pk, "task.started", {}, working_only=True, owner="other#2")
    assert taken.seq == seqs[-1] + 1


@pytest.mark.django_db(transaction=True)
def test_the_start_reads_the_run_and_only_its_own_finished_outputs(builder: Any) -> None:
    crew = make_crew(builder)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    other = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    research, report = (t["id"] for t in run.snapshot["tasks"])
    RunTask.objects.filter(run=run, task_id_snapshot=research).update(status=RunTask.Status.DONE, output="Kept")
    RunTask.objects.filter(run=run, task_id_snapshot=report).update(status=RunTask.Status.FAILED, output="No")
    RunTask.objects.filter(run=other, task_id_snapshot=report).update(status=RunTask.Status.DONE, output="Not mine")

    start = runner._start(run.pk, CancelToken(), runner.DeltaFollowers(run.pk))

    assert start.run == run and start.run.snapshot == run.snapshot and start.run.inputs == {"topic": "tides"}
    assert start.done == {str(research): "Kept"}
    assert start.crew is not None and start.steps is None
    with pytest.raises(Run.DoesNotExist):
        runner._start(10**9, CancelToken(), runner.DeltaFollowers(0))


def _selects_from(queries: CaptureQueriesContext, table: str) -> int:
    return sum(1 for q in queries.captured_queries if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"])


@pytest.mark.django_db(transaction=True)
def test_a_run_stores_and_follows_its_own_draft_reading_the_tasks_once_and_the_steps_in_one_query(
    builder: Any, monkeypatch: Any
) -> None:
    """Every planned run stores its draft, approves it and reads its steps back: the crew's tasks
    are read once (the version keeps them and they say which ids are valid), the steps in one
    query without the version row, and the run's author is not loaded to name the plan's."""
    run = planned_run(builder, monkeypatch)

    with CaptureQueriesContext(connection) as queries:
        runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.plan is not None and run.plan.created_by_id == builder.pk
    assert run.plan.status == Plan.Status.APPROVED and run.plan.warnings == []
    research, report = (t["id"] for t in run.snapshot["tasks"])
    steps = list(RunEvent.objects.filter(run=run, type="step.started").order_by("seq").values_list("step_id", "data"))
    assert [(step_id, data["description"]) for step_id, data in steps] == [
        (f"{research}.p1", "Look it up"), (f"{report}.p2", "Sum up")]
    assert _selects_from(queries, "crews_task") == 1
    assert _selects_from(queries, "crews_planversion") == 0
    assert _selects_from(queries, "crews_planstep") == 0  # the steps it stored, never read back
    assert _selects_from(queries, "auth_user") == 0
    # The run row's snapshot is read once, at the start: each change of state reads the status.
    assert sum(1 for q in queries.captured_queries if '"crews_run"."snapshot"' in q["sql"]) == 1
