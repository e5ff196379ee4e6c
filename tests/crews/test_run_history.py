"""Run history's one filter form: status, crew, who started the run and the days it started, shown
as inputs, kept across pages, refused when bad, and never showing a run the person may not see."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from crews import selectors
from crews.models import Crew, Run
from tests.conftest import signed_in
from tests.crews.run_helpers import make_crew

pytestmark = pytest.mark.django_db


def listed(html: str) -> set[int]:
    """The run numbers the table lists."""
    return {int(n) for n in re.findall(r'<th scope="row"[^>]*><a href="[^"]*">#(\d+)</a>', html)}


def run_of(crew: Crew, by: Any, status: str = Run.Status.QUEUED, days_ago: int = 0) -> Run:
    run = Run.objects.create(crew=crew, created_by=by, status=status, inputs={"topic": "t"})
    if days_ago:
        Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(days=days_ago))
    return run


@pytest.fixture
def history(builder: Any, other_builder: Any) -> dict[str, Any]:
    """builder's crew (shared, so other_builder runs it too), a second crew, other_builder's private crew."""
    shared = make_crew(builder, name="Shared", shared=True)
    second = make_crew(builder, name="Second")
    private = make_crew(other_builder, name="Private")
    return {
        "shared": shared,
        "second": second,
        "private": private,
        "old_failed": run_of(shared, builder, Run.Status.FAILED, days_ago=10),
        "new_failed": run_of(second, builder, Run.Status.FAILED),
        "theirs": run_of(shared, other_builder, Run.Status.SUCCEEDED, days_ago=3),
        "hidden": run_of(private, other_builder, Run.Status.FAILED),
    }


def test_each_filter_narrows_the_list_and_they_combine(builder: Any, other_builder: Any, history: dict[str, Any]) -> None:
    client = signed_in(builder)
    url = reverse("crews:run-list")
    today = timezone.localdate()
    ids = {name: run.pk for name, run in history.items() if isinstance(run, Run)}

    everything = listed(client.get(url).content.decode())
    failed = listed(client.get(url, {"status": "failed"}).content.decode())
    in_shared = listed(client.get(url, {"crew": history["shared"].pk}).content.decode())
    by_them = listed(client.get(url, {"started_by": other_builder.pk}).content.decode())
    recent = listed(client.get(url, {"since": str(today - timedelta(days=5))}).content.decode())
    older = listed(client.get(url, {"until": str(today - timedelta(days=5))}).content.decode())
    both = listed(client.get(url, {"status": "failed", "crew": history["shared"].pk}).content.decode())

    assert everything == {ids["old_failed"], ids["new_failed"], ids["theirs"]}
    assert failed == {ids["old_failed"], ids["new_failed"]}
    assert in_shared == {ids["old_failed"], ids["theirs"]}
    assert by_them == {ids["theirs"]}  # their private crew's run stays hidden
    assert recent == {ids["new_failed"], ids["theirs"]}
    assert older == {ids["old_failed"]}
    assert both == {ids["old_failed"]}


def test_the_filters_in_use_are_shown_as_inputs_with_a_clear_link(builder: Any, other_builder: Any, history: dict[str, Any]) -> None:
    url = reverse("crews:run-list")
    since = str(timezone.localdate() - timedelta(days=5))
    html = signed_in(builder).get(
        url, {"status": "failed", "started_by": other_builder.pk, "since": since}
    ).content.decode()

    assert '<option value="failed" selected>' in html
    assert f'<option value="{other_builder.pk}" selected>{other_builder.username}</option>' in html
    assert f'type="date" name="since" value="{since}"' in html
    assert f'<a class="button button--small" href="{url}"' in html and "Clear filters" in html
    assert "No runs match these filters." in html
    assert "Clear filters" not in signed_in(builder).get(url).content.decode()


def test_only_crews_and_people_of_visible_runs_are_offered(builder: Any, other_builder: Any, admin_user: Any, history: dict[str, Any]) -> None:
    make_crew(builder, name="Never run")
    html = signed_in(other_builder).get(reverse("crews:run-list")).content.decode()
    crews = re.search(r'<select name="crew".*?</select>', html, re.S).group(0)
    people = re.search(r'<select name="started_by".*?</select>', html, re.S).group(0)

    assert ">Shared<" in crews and ">Private<" in crews
    assert ">Second<" not in crews and ">Never run<" not in crews  # not shared / no runs
    assert f">{builder.username}<" in people and f">{other_builder.username}<" in people
    assert f">{admin_user.username}<" not in people


@pytest.mark.parametrize("field", ["crew", "started_by"])
def test_a_filter_naming_what_the_person_may_not_see_is_refused_and_widens_nothing(
    builder: Any, other_builder: Any, history: dict[str, Any], field: str
) -> None:
    # builder sees no run started by other_builder outside the shared crew, nor their private crew.
    value = history["private"].pk if field == "crew" else other_builder.pk
    run_of(history["second"], builder)
    Run.objects.filter(created_by=other_builder, crew=history["shared"]).delete()
    response = signed_in(builder).get(reverse("crews:run-list"), {field: value})
    html = response.content.decode()

    assert response.status_code == 200
    assert "Select a valid choice" in html
    assert history["hidden"].pk not in listed(html)


def test_bad_values_are_errors_next_to_their_inputs_not_a_500(builder: Any, history: dict[str, Any]) -> None:
    today = timezone.localdate()
    response = signed_in(builder).get(reverse("crews:run-list"), {
        "status": "exploded", "since": "yesterday", "crew": "1 OR 1=1", "started_by": "-1",
    })
    html = response.content.decode()
    reversed_days = signed_in(builder).get(reverse("crews:run-list"), {
        "since": str(today), "until": str(today - timedelta(days=3)), "status": "failed",
    }).content.decode()

    assert response.status_code == 200
    assert re.search(r'id="run-filter-status_error".*?Select a valid choice', html, re.S)
    assert re.search(r'id="run-filter-since_error".*?Enter a valid date', html, re.S)
    assert html.count("field--error") == 4
    assert listed(html) == {history["old_failed"].pk, history["new_failed"].pk, history["theirs"].pk}
    assert "This day is before the “From” day." in reversed_days
    # The valid filters still apply (failed, from today); the refused end day is left out.
    assert listed(reversed_days) == {history["new_failed"].pk}


def test_page_links_keep_the_filters(builder: Any) -> None:
    crew = make_crew(builder)
    for _ in range(27):
        run_of(crew, builder, Run.Status.FAILED)
    run_of(crew, builder, Run.Status.SUCCEEDED)
    url = reverse("crews:run-list")
    client = signed_in(builder)

    first = client.get(url, {"status": "failed", "page": "1"}).content.decode()
    second = client.get(url, {"status": "failed", "page": "2"}).content.decode()

    assert f'href="{url}?status=failed&amp;page=2"' in first
    assert f'hx-get="{url}?status=failed&amp;page=2"' in first
    assert "Page 1 of 2" in first and len(listed(second)) == 2
    assert f'href="{url}?status=failed&amp;page=1"' in second


def test_htmx_gets_the_form_and_the_table_and_a_lost_history_entry_the_page(builder: Any, history: dict[str, Any]) -> None:
    client = signed_in(builder)
    url = reverse("crews:run-list")

    fragment = client.get(url, {"status": "exploded"}, HTTP_HX_REQUEST="true")
    restored = client.get(url, {"status": "failed"}, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    html = fragment.content.decode()

    assert html.strip().startswith('<div id="run-history">') and "<html" not in html
    assert f'hx-get="{url}" hx-target="#run-history"' in html
    assert "Select a valid choice" in html and 'name="since"' in html
    assert "HX-Request" in fragment["Vary"]
    assert "<html" in restored.content.decode()


def test_a_crews_history_has_no_crew_filter_and_offers_only_its_starters(builder: Any, other_builder: Any, history: dict[str, Any]) -> None:
    url = reverse("crews:crew-runs", args=[history["second"].pk])
    html = signed_in(builder).get(url, {"status": "failed"}).content.decode()
    people = re.search(r'<select name="started_by".*?</select>', html, re.S).group(0)

    assert 'name="crew"' not in html
    assert listed(html) == {history["new_failed"].pk}
    assert f">{builder.username}<" in people and f">{other_builder.username}<" not in people
    assert f'action="{url}"' in html


def test_a_day_runs_from_midnight_to_midnight_in_the_sites_time_zone(builder: Any, settings: Any) -> None:
    settings.TIME_ZONE = "America/Sao_Paulo"  # UTC-3: the site's 1 March is 03:00 to 03:00 UTC
    crew = make_crew(builder)
    at = {
        "before": datetime(2026, 3, 1, 2, 59, 59, tzinfo=UTC),
        "first": datetime(2026, 3, 1, 3, 0, 0, tzinfo=UTC),
        "last": datetime(2026, 3, 2, 2, 59, 59, 999999, tzinfo=UTC),
        "after": datetime(2026, 3, 2, 3, 0, 0, tzinfo=UTC),
    }
    ids = {}
    for name, moment in at.items():
        ids[name] = run_of(crew, builder).pk
        Run.objects.filter(pk=ids[name]).update(created_at=moment)

    day = listed(signed_in(builder).get(reverse("crews:run-list"), {"since": "2026-03-01", "until": "2026-03-01"})
                 .content.decode())

    assert day == {ids["first"], ids["last"]}


def test_the_day_filters_compare_the_start_time_itself_so_the_crews_index_serves_them(admin_user: Any) -> None:
    crew = make_crew(admin_user)
    day = timezone.localdate()

    plan = selectors.run_list(user=admin_user, crew_id=crew.pk, since=day, until=day).explain()

    # SQLite searches the (crew, -created_at) index with both ends of the range, not crew alone.
    assert re.search(r"USING INDEX \w+ \(crew_id=\? AND created_at>\? AND created_at<\?\)", plan), plan


def test_the_filter_button_is_in_the_page_for_when_htmx_does_not_load(builder: Any) -> None:
    html = signed_in(builder).get(reverse("crews:run-list")).content.decode()

    button = re.search(r'<button type="submit"[^>]*>Filter</button>', html)
    assert button and "without-htmx" in button.group(0)
    assert "<noscript><button" not in html[html.index('id="run-history"'):]


def test_the_first_and_last_days_a_date_input_allows_filter_nothing_out(builder: Any, history: dict[str, Any]) -> None:
    response = signed_in(builder).get(reverse("crews:run-list"), {"since": "0001-01-01", "until": "9999-12-31"})

    assert response.status_code == 200
    assert listed(response.content.decode()) == {history[n].pk for n in ("old_failed", "new_failed", "theirs")}
