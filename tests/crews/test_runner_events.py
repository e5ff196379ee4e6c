"""``record_event``'s task roll-ups: the prepared UPDATEs write what the ORM's update() wrote."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db.models import F

from crews import runs
from crews.bridge import record_event
from crews.models import RunTask
from tests.crews.run_helpers import make_crew


@pytest.fixture
def two_runs(builder: Any) -> tuple[int, int, list[int]]:
    crew = make_crew(builder)
    first = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    second = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    task_ids = [t["id"] for t in first.snapshot["tasks"]]
    return first.pk, second.pk, task_ids


def _rows(run_id: int) -> list[tuple[Any, ...]]:
    return list(RunTask.objects.filter(run_id=run_id).order_by("order").values_list(
        "status", "output", "error", "prompt_tokens", "completion_tokens", "cost_usd", "llm_calls"))


@pytest.mark.django_db(transaction=True)
def test_task_roll_ups_match_the_orm_update(two_runs: tuple[int, int, list[int]]) -> None:
    """The same events applied through record_event to one run and through the ORM to the other
    leave identical task rows, down to the last cost digit."""
    mine, reference, (first, second) = two_runs
    costs = [0.000213, 0.1, None, 1.234567, 0.0000015]
    record_event(mine, "task.started", {"name": "Research"}, task_id=first)
    RunTask.objects.filter(run_id=reference, task_id_snapshot=first).update(status="running", output="", error="")
    for n, cost in enumerate(costs):
        record_event(mine, "llm.completed", {"prompt_tokens": 10 + n, "completion_tokens": n, "cost_usd": cost},
                     task_id=first)
        RunTask.objects.filter(run_id=reference, task_id_snapshot=first).update(
            prompt_tokens=F("prompt_tokens") + 10 + n, completion_tokens=F("completion_tokens") + n,
            cost_usd=F("cost_usd") + Decimal(str(cost or 0)), llm_calls=F("llm_calls") + 1)
    record_event(mine, "task.completed", {"output": "It is done."}, task_id=first)
    RunTask.objects.filter(run_id=reference, task_id_snapshot=first).update(status="done", output="It is done.")
    record_event(mine, "task.failed", {"error": "No luck."}, task_id=second)
    RunTask.objects.filter(run_id=reference, task_id_snapshot=second).update(status="failed", error="No luck.")

    assert _rows(mine) == _rows(reference)
    done, failed = _rows(mine)
    assert done == ("done", "It is done.", "", 60, 10, Decimal("1.334782"), 5)
    assert failed[:3] == ("failed", "", "No luck.")


@pytest.mark.django_db(transaction=True)
def test_task_started_clears_an_earlier_attempt_and_skipped_keeps_texts(two_runs: tuple[int, int, list[int]]) -> None:
    run_id, _, (first, second) = two_runs
    RunTask.objects.filter(run_id=run_id, task_id_snapshot=first).update(status="failed", output="old", error="bad")
    record_event(run_id, "task.started", {}, task_id=first)
    RunTask.objects.filter(run_id=run_id, task_id_snapshot=second).update(output="kept", error="kept too")
    record_event(run_id, "task.skipped", {}, task_id=second)
    rows = _rows(run_id)
    assert rows[0][:3] == ("running", "", "")
    assert rows[1][:3] == ("skipped", "kept", "kept too")


@pytest.mark.django_db(transaction=True)
def test_events_without_a_task_or_for_another_run_touch_no_task_row(two_runs: tuple[int, int, list[int]]) -> None:
    run_id, other, (first, _) = two_runs
    before = _rows(other)
    record_event(run_id, "llm.completed", {"prompt_tokens": 5, "completion_tokens": 1, "cost_usd": 0.5})
    record_event(run_id, "task.completed", {"output": "x"})
    record_event(run_id, "llm.completed", {"prompt_tokens": 5, "completion_tokens": 1, "cost_usd": 0.5}, task_id=first)
    assert _rows(other) == before
    assert [r[6] for r in _rows(run_id)] == [1, 0]
