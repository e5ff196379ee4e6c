"""A run on the paced offline demo model takes its time, and Stop ends it at once (issue #15)."""

from __future__ import annotations

import time

import pytest

from crews import runner, runs
from crews.models import Run, RunEvent
from tests.crews.run_helpers import Background, stop_leftover_runs, wait_for  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")


@pytest.mark.django_db(transaction=True)
def test_a_paced_demo_run_can_be_stopped_mid_answer(demo_crew, builder, settings):
    settings.PLANNER_DEMO_FIRST_TOKEN_SECONDS = 30.0  # every demo answer would take half a minute
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))
    wait_for(lambda: RunEvent.objects.filter(run=run, type="llm.started").exists(), what="the first LLM call")

    stopped = time.monotonic()
    runs.run_cancel(actor=builder, run=run)
    worker.join(timeout=10)

    assert time.monotonic() - stopped < 5
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert not RunEvent.objects.filter(run=run, type="llm.completed").exists()
