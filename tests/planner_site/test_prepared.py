"""planner_site.prepared: a queryset compiled once answers as the queryset itself."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from crews.models import Crew, Run
from planner_site.prepared import STAND_IN_ID, STAND_IN_ID_2, STAND_IN_TIME, Prepared


def _compiled(queryset: Any) -> tuple[str, list[Any]]:
    sql, params = queryset.query.get_compiler(using="default").as_sql()
    return sql, list(params)


@pytest.mark.django_db
def test_the_sql_and_parameters_are_the_querysets_own_for_every_value(
    builder: Any, viewer: Any
) -> None:
    def seen(crew: int, user: int) -> Any:
        return Crew.objects.filter(pk=crew, owner=user, shared=False).order_by("name")

    prepared = Prepared(seen, crew=STAND_IN_ID, user=STAND_IN_ID_2)
    for crew, user in ((1, builder.pk), (7, viewer.pk), (STAND_IN_ID, 3)):
        assert prepared.sql(crew=crew, user=user) == _compiled(seen(crew, user))


@pytest.mark.django_db
def test_rows_and_instances_are_what_the_queryset_returns(builder: Any) -> None:
    mine = Crew.objects.create(owner=builder, name="Mine")
    Crew.objects.create(owner=builder, name="Other")
    by_id = Prepared(lambda crew: Crew.objects.filter(pk=crew), crew=STAND_IN_ID)
    names = Prepared(
        lambda crew: Crew.objects.filter(pk=crew).values_list("name"), crew=STAND_IN_ID
    )

    assert by_id.one(Crew, crew=mine.pk) == mine
    assert by_id.one(Crew, crew=mine.pk).name == "Mine"
    assert by_id.one(Crew, crew=mine.pk + 100) is None
    assert names.rows(crew=mine.pk) == [("Mine",)]


@pytest.mark.django_db
def test_a_time_stand_in_is_adapted_as_the_backend_adapts_it(builder: Any) -> None:
    crew = Crew.objects.create(owner=builder, name="Crew")
    run = Run.objects.create(crew=crew, created_by=builder)
    since = Prepared(
        lambda at: Run.objects.filter(created_at__gte=at).values_list("pk"), at=STAND_IN_TIME
    )
    before = run.created_at - timedelta(seconds=1)
    assert since.sql(at=before) == _compiled(
        Run.objects.filter(created_at__gte=before).values_list("pk")
    )
    assert since.rows(at=before) == [(run.pk,)]
    assert since.rows(at=timezone.now() + timedelta(days=1)) == []


def test_values_must_name_the_stand_ins_and_stand_ins_must_reach_the_parameters() -> None:
    by_id = Prepared(lambda crew: Crew.objects.filter(pk=crew), crew=STAND_IN_ID)
    with pytest.raises(TypeError, match="expected values for"):
        by_id.sql(run=1)
    ignored = Prepared(lambda crew: Crew.objects.filter(pk=1), crew=STAND_IN_ID)
    with pytest.raises(RuntimeError, match="is not among the parameters"):
        ignored.sql(crew=2)
    assert connection.vendor in ("sqlite", "postgresql")


@pytest.mark.django_db
def test_a_lower_bound_below_64_bits_matches_every_row_and_an_id_beyond_them_none(builder: Any) -> None:
    crew = Crew.objects.create(owner=builder, name="Crew")
    after = Prepared(lambda after: Crew.objects.filter(pk__gt=after).values_list("pk"), after=STAND_IN_ID)
    by_id = Prepared(lambda crew: Crew.objects.filter(pk=crew), crew=STAND_IN_ID)

    assert after.rows(after=-1) == [(crew.pk,)]
    assert after.rows(after=-(2**70)) == [(crew.pk,)]
    assert after.rows(after=2**70) == []
    assert by_id.one(Crew, crew=2**70) is None
    assert by_id.one(Crew, crew=-(2**70)) is None
    assert by_id.one(Crew, crew=crew.pk) == crew


@pytest.mark.django_db
def test_instances_made_from_rows_equal_the_querysets_own_and_other_shapes_go_through_raw(builder: Any) -> None:
    """``all`` makes instances of a plain queryset straight from its rows, with every column
    converted (times, JSON, decimals) as the ORM converts it; any other shape is a raw query's."""
    from decimal import Decimal

    crew = Crew.objects.create(owner=builder, name="Mine", budget_max_cost_usd=Decimal("1.50"))
    run = Run.objects.create(crew=crew, created_by=builder, inputs={"topic": "tides"}, snapshot={"tasks": []},
                             cost_usd=Decimal("0.125"), started_at=timezone.now())
    plain = Prepared(lambda run: Run.objects.filter(pk=run), run=STAND_IN_ID)
    [made] = plain.all(Run, run=run.pk)
    [theirs] = Run.objects.filter(pk=run.pk)
    fields = [f.attname for f in Run._meta.concrete_fields]
    assert [getattr(made, f) for f in fields] == [getattr(theirs, f) for f in fields]
    assert made.inputs == {"topic": "tides"} and made.cost_usd == Decimal("0.125") and made.started_at.tzinfo
    assert not made._state.adding and made._state.db == "default"
    assert plain._making[("default", Run)] is not None
    for shape in (lambda run: Run.objects.filter(pk=run).only("status"),
                  lambda run: Run.objects.filter(pk=run).select_related("crew"),
                  lambda run: Run.objects.filter(pk=run).distinct().order_by("crew__name")):
        other = Prepared(shape, run=STAND_IN_ID)
        [found] = other.all(Run, run=run.pk)
        assert found.pk == run.pk and found.status == run.status and other._making[("default", Run)] is None
