"""GET /api/runs filtered as the run history page filters: status, crew, who started the run and
the days it started in (whole days of the site's time zone, both ends included); every filter
narrows what the caller sees, never widens it, and a bad value is a 422 naming its parameter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.test import Client

from crews.models import Run
from planner_site.tokens import token_create
from tests.crews.api_helpers import private_crew


def token_client(user: Any) -> Client:
    _token, raw = token_create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def started(crew: Any, person: Any, status: str, at: datetime) -> Run:
    run = Run.objects.create(crew=crew, created_by=person, status=status)
    Run.objects.filter(pk=run.pk).update(created_at=at)
    return run


@pytest.fixture
def history(builder: Any, other_builder: Any) -> dict[str, Any]:
    """bob's private crew and his shared one; olga runs the shared one and her own private crew."""
    tides = private_crew(builder, name="Tides")
    shared = private_crew(builder, name="Harbour", shared=True)
    secret = private_crew(other_builder, name="Olga's own")
    return {
        "shared": shared,
        "bob_tides": started(tides, builder, "succeeded", datetime(2026, 3, 1, 0, 10, tzinfo=UTC)),
        "bob_shared": started(shared, builder, "failed", datetime(2026, 3, 2, 23, 50, tzinfo=UTC)),
        "olga_shared": started(shared, other_builder, "succeeded", datetime(2026, 3, 3, 12, 0, tzinfo=UTC)),
        "olga_secret": started(secret, other_builder, "succeeded", datetime(2026, 3, 2, 12, 0, tzinfo=UTC)),
    }


def listed(http: Client, query: str, history: dict[str, Any]) -> list[str]:
    response = http.get(f"/api/runs?{query}")
    assert response.status_code == 200, response.content
    names = {run.pk: name for name, run in history.items() if isinstance(run, Run)}
    body = response.json()
    assert body["count"] == len(body["items"])
    return [names[item["id"]] for item in body["items"]]


def assert_refused(http: Client, query: str, field: str) -> None:
    response = http.get(f"/api/runs?{query}")
    assert response.status_code == 422, (query, response.content)
    body = response.json()
    assert body["code"] == "invalid" and body["errors"][0]["field"] == field, (query, body)


def test_each_filter_narrows_the_runs_the_caller_sees(builder, other_builder, history):
    http = token_client(builder)
    everything = ["olga_shared", "bob_shared", "bob_tides"]

    assert listed(http, "", history) == everything
    assert listed(http, f"started_by={other_builder.pk}", history) == ["olga_shared"]
    assert listed(http, f"started_by={builder.pk}", history) == ["bob_shared", "bob_tides"]
    assert listed(http, "from=2026-03-02", history) == ["olga_shared", "bob_shared"]
    assert listed(http, "to=2026-03-02", history) == ["bob_shared", "bob_tides"]
    assert listed(http, "from=2026-03-02&to=2026-03-02", history) == ["bob_shared"]  # 23:50 is that day
    assert listed(http, f"status=succeeded&started_by={builder.pk}", history) == ["bob_tides"]
    assert listed(http, f"crew_id={history['shared'].pk}&started_by={other_builder.pk}", history) == ["olga_shared"]
    assert listed(http, "from=0001-01-01&to=9999-12-31", history) == everything
    assert listed(http, "from=9999-12-31", history) == []
    assert listed(http, "to=0001-01-01", history) == []


def test_a_filter_never_widens_beyond_what_the_caller_sees(builder, other_builder, history):
    olga = token_client(other_builder)
    # bob's private crew stays his: olga sees only his run in the crew he shares.
    assert listed(olga, f"started_by={builder.pk}", history) == ["bob_shared"]
    assert listed(olga, "from=2026-03-01&to=2026-03-01", history) == []
    assert listed(olga, f"crew_id={history['bob_tides'].crew_id}", history) == []
    # And bob never gets olga's private crew's run, whatever he asks.
    bob = token_client(builder)
    assert "olga_secret" not in listed(bob, f"started_by={other_builder.pk}&from=2026-03-02&to=2026-03-02", history)


def test_days_are_the_site_time_zones(builder, history, settings):
    settings.TIME_ZONE = "America/Sao_Paulo"  # UTC-3: bob's 00:10 UTC run started on Feb 28 there
    http = token_client(builder)

    assert listed(http, "from=2026-03-01", history) == ["olga_shared", "bob_shared"]
    assert listed(http, "to=2026-02-28", history) == ["bob_tides"]


@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", "Pacific/Pago_Pago", "UTC"])
@pytest.mark.parametrize(
    "query", ["from=0001-01-01", "from=0001-01-02", "to=0001-01-01", "to=9999-12-31", "to=9999-12-30", "from=9999-12-31"]
)
def test_the_first_and_last_days_a_date_can_be_are_answered_in_any_zone(builder, history, settings, zone, query):
    settings.TIME_ZONE = zone

    assert token_client(builder).get(f"/api/runs?{query}").status_code == 200


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("started_by=abc", "started_by"),
        ("started_by=0", "started_by"),
        ("started_by=99999999999999999999", "started_by"),
        ("from=2026-02-30", "from"),
        ("from=02/03/2026", "from"),
        ("from=0000-12-31", "from"),
        ("to=10000-01-01", "to"),
        ("to=yesterday", "to"),
        ("from=2026-03-03&to=2026-03-02", "to"),  # "to" before "from", as the page says
        ("status=done", "status"),
    ],
)
def test_a_bad_filter_is_a_422_naming_it(builder, history, query, field):
    assert_refused(token_client(builder), query, field)


def test_a_person_whose_runs_the_caller_does_not_see_is_refused_as_on_the_page(builder, other_builder, admin_user):
    """The page offers only the people whose runs you see; anyone else is not a valid choice (a
    422, not a list that ignores the filter)."""
    secret = private_crew(other_builder, name="Olga's own")
    started(secret, other_builder, "succeeded", datetime(2026, 3, 2, 12, 0, tzinfo=UTC))

    assert_refused(token_client(builder), f"started_by={other_builder.pk}", "started_by")
    assert_refused(token_client(builder), f"started_by={admin_user.pk}", "started_by")  # no runs at all
