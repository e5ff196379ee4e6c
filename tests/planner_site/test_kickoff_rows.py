"""insert_new: the kickoff's rows written in one prepared INSERT, as save() and bulk_create() write them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.forms.models import model_to_dict

from crews.models import Run, RunTask
from planner_site.models import AuditEvent
from planner_site.rows import insert_new
from tests.crews.run_helpers import make_crew


def stored(obj: Any) -> dict[str, Any]:
    row = type(obj).objects.get(pk=obj.pk)
    return {f.attname: getattr(row, f.attname) for f in row._meta.concrete_fields}


def test_a_new_row_is_stored_as_save_stores_it(builder: Any) -> None:
    crew = make_crew(builder)
    fields = dict(
        crew=crew, created_by=builder, inputs={"topic": "tides", "n": [1, 2.5, None]},
        snapshot={"crew": {"budget_max_cost_usd": "1.50"}, "tasks": []}, review_plan=True,
    )  # fmt: skip
    saved = Run.objects.create(**fields)
    inserted = Run(**fields)

    insert_new([inserted])

    assert inserted.pk is not None and inserted.pk != saved.pk
    assert not inserted._state.adding and inserted._state.db == "default"
    assert inserted.created_at is not None  # auto_now_add, as save() sets it
    ours, theirs = stored(inserted), stored(saved)
    for row in (ours, theirs):
        del row["id"], row["created_at"]
    assert ours == theirs
    assert ours["cost_usd"] == Decimal(0) and ours["status"] == Run.Status.QUEUED


def test_new_rows_are_stored_in_one_insert_with_their_keys(
    builder: Any, django_assert_num_queries: Any
) -> None:
    run = Run.objects.create(crew=make_crew(builder), created_by=builder)
    tasks = [
        RunTask(run=run, task_id_snapshot=i, order=i, name=f"T{i}", agent_name="A")
        for i in range(3)
    ]

    with django_assert_num_queries(1):
        insert_new(tasks)

    assert [t.pk for t in tasks] == list(
        RunTask.objects.filter(run=run).order_by("order").values_list("pk", flat=True)
    )
    assert [model_to_dict(t, exclude=["id"]) for t in tasks] == [
        model_to_dict(t, exclude=["id"]) for t in RunTask.objects.filter(run=run).order_by("order")
    ]


def test_insert_new_takes_one_model_and_nothing_is_nothing(builder: Any) -> None:
    insert_new([])
    with pytest.raises(TypeError):
        insert_new([AuditEvent(action="x"), RunTask(name="x")])


def test_an_audit_row_is_stored_with_its_actor_target_and_data(builder: Any) -> None:
    from django.contrib.auth.models import AnonymousUser

    from planner_site.audit import audit

    run = Run.objects.create(crew=make_crew(builder), created_by=builder)

    event = audit(actor=builder, action="run.started", target=run, crew=run.crew_id)
    anonymous = audit(actor=AnonymousUser(), action="run.started", target=run)

    row = AuditEvent.objects.get(pk=event.pk)
    assert (row.actor, row.action, row.target_type, row.target_id, row.data) == (
        builder,
        "run.started",
        "run",
        str(run.pk),
        {"crew": run.crew_id},
    )
    assert row.at is not None and row.at == event.at
    assert AuditEvent.objects.get(pk=anonymous.pk).actor is None


def test_more_rows_than_one_statement_takes_go_in_batches_as_bulk_create_sends_them(
    builder: Any, django_assert_num_queries: Any, monkeypatch: Any
) -> None:
    """A plan of a few hundred tasks' steps: no statement over the database's parameter limit
    (PostgreSQL's 65,535), here made small."""
    from django.db import connection

    run = Run.objects.create(crew=make_crew(builder), created_by=builder)
    tasks = [RunTask(run=run, task_id_snapshot=i, order=i, name=f"T{i}", agent_name="A") for i in range(250)]
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 100)
    with django_assert_num_queries(3):
        insert_new(tasks)
    assert [t.pk for t in tasks] == list(RunTask.objects.filter(run=run).order_by("order").values_list("pk", flat=True))
