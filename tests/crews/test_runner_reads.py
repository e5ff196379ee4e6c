"""The runner's per-run reads, compiled once: they answer as the querysets they stand for."""

from __future__ import annotations

from typing import Any

import pytest

from agents.engine.runtime import CancelToken
from crews import runner, runs
from crews.models import Run, RunTask
from tests.crews.run_helpers import make_crew


@pytest.mark.django_db(transaction=True)
def test_the_watch_poll_sees_a_stop_request_of_its_own_run_only(builder: Any) -> None:
    crew = make_crew(builder)
    mine, other = (runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
                   for _ in range(2))
    followers = runner.DeltaFollowers(mine.pk)
    assert runner._poll(mine.pk, followers, beat=False) is False
    Run.objects.filter(pk=other.pk).update(cancel_requested=True)
    assert runner._poll(mine.pk, followers, beat=False) is False
    Run.objects.filter(pk=mine.pk).update(cancel_requested=True)
    assert runner._poll(mine.pk, followers, beat=False) is True


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
