"""The kickoff request through the real URL: what it answers, and the reads it does not need."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from crews.models import RunTask
from planner_site.tokens import token_create
from tests.crews.run_helpers import make_crew


def test_kickoff_answers_the_queued_run_without_reading_back_its_task_rows(builder: Any) -> None:
    crew = make_crew(builder, tasks=("Research", "Report"))
    _, raw = token_create(user=builder)
    client = Client(headers={"Authorization": f"Bearer {raw}"})

    with CaptureQueriesContext(connection) as queries:
        response = client.post(
            f"/api/crews/{crew.pk}/kickoff",
            json.dumps({"inputs": {"topic": "tides"}}),
            content_type="application/json",
        )

    assert response.status_code == 202, response.content
    run = response.json()
    rows = RunTask.objects.filter(run_id=run["id"]).order_by("order")
    assert run["task_outputs"] == [
        {"task_id": r.task_id_snapshot, "name": r.name, "agent": r.agent_name, "status": "waiting",
         "output": None, "output_json": None, "error": None,
         "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "llm_calls": 0}}
        for r in rows
    ]  # fmt: skip
    assert [t["name"] for t in run["task_outputs"]] == ["Research", "Report"]
    assert len(queries) > 5
    assert not [q for q in queries if q["sql"].startswith("SELECT") and "crews_runtask" in q["sql"]]


def kickoff_by_token(raw: str, crew: Any) -> Any:
    client = Client(headers={"Authorization": f"Bearer {raw}"})
    return client.post(
        f"/api/crews/{crew.pk}/kickoff",
        json.dumps({"inputs": {"topic": "tides"}}),
        content_type="application/json",
    )


def test_a_builder_token_reads_its_groups_once_per_request(builder: Any) -> None:
    crew = make_crew(builder)
    _, raw = token_create(user=builder)

    with CaptureQueriesContext(connection) as queries:
        response = kickoff_by_token(raw, crew)

    assert response.status_code == 202, response.content
    assert sum('"auth_group"' in q["sql"] for q in queries) == 1


def test_a_role_taken_away_holds_from_the_next_request(builder: Any) -> None:
    crew = make_crew(builder)
    _, raw = token_create(user=builder)
    assert kickoff_by_token(raw, crew).status_code == 202

    builder.groups.clear()

    assert kickoff_by_token(raw, crew).status_code == 403


def test_the_rate_check_counts_the_actors_runs_of_the_last_minute_only(
    builder: Any, other_builder: Any, settings: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from crews import runs
    from crews.models import Run
    from planner_site.errors import TooMany

    crew = make_crew(builder)
    now = timezone.now()
    for who, age in ((builder, 30), (builder, 90), (other_builder, 10), (builder, 5)):
        run = Run.objects.create(crew=crew, created_by=who, snapshot={})
        Run.objects.filter(pk=run.pk).update(created_at=now - timedelta(seconds=age))

    assert runs._recent_runs(builder, now - timedelta(minutes=1)) == 2
    assert runs._recent_runs(builder, now - timedelta(seconds=30)) == 2
    assert runs._recent_runs(builder, now - timedelta(seconds=29)) == 1
    assert runs._recent_runs(other_builder, now - timedelta(minutes=1)) == 1

    settings.PLANNER_KICKOFF_RATE_PER_MINUTE = 3
    runs._check_rate(builder)
    settings.PLANNER_KICKOFF_RATE_PER_MINUTE = 2
    with pytest.raises(TooMany):
        runs._check_rate(builder)


STORED_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}


def test_the_queued_event_takes_no_savepoint_of_its_own(builder: Any, settings: Any) -> None:
    settings.TASKS = STORED_TASKS
    crew = make_crew(builder)
    _, raw = token_create(user=builder)

    with CaptureQueriesContext(connection) as queries:
        response = kickoff_by_token(raw, crew)

    assert response.status_code == 202, response.content
    # The kickoff's own transaction (a savepoint inside the test's), and none for run.queued.
    assert sum(q["sql"].startswith("SAVEPOINT") for q in queries) == 1
    assert sum('"django_tasks_database_dbtaskresult"' in q["sql"] for q in queries) == 1


def test_the_rate_check_reads_only_the_starters_last_minute_through_an_index(builder: Any) -> None:
    """Not all of a prolific person's runs on every kickoff: (created_by, created_at) is indexed."""
    from django.utils import timezone

    from crews import runs

    sql, params = runs._RUNS_SINCE.sql(actor=builder.pk, since=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "INDEX crews_run_created" in plan and "(created_by_id=? AND created_at>?)" in plan, plan
