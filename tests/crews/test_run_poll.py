"""The run page's polling fallback (crews:run-poll): the socket's messages over HTTP, for a page
whose websocket cannot connect."""

from __future__ import annotations

import pytest
from django.urls import reverse

from crews import runs
from crews.bridge import payload_of, record_event
from crews.models import RunEvent
from crews.run_view import RunView, render_event_html
from crews.views import run_poll
from tests.conftest import signed_in
from tests.crews.run_helpers import make_agent, make_crew
from tests.crews.test_run_views import ESCAPED, EVIL, detail, queued_run, started, task_ids

pytestmark = pytest.mark.django_db


def poll(client, run, after=0):
    return client.get(reverse("crews:run-poll", args=[run.pk]), {"after": after})


def test_a_poll_answers_each_event_after_the_seq_with_the_message_the_socket_sends(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    shown = run.events.count()
    record_event(run.pk, "task.started", {"task_id": str(first), "agent": f"Writer {EVIL}"}, task_id=first)
    record_event(run.pk, "llm.started", {"model": "m", "purpose": "react"}, task_id=first)

    response = poll(signed_in(builder), run, after=shown)

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    body = response.json()
    socket = RunView.build(run, upto=shown)  # what the socket of a page showing `shown` events keeps
    expected = [render_event_html(socket, dict(payload_of(e)), can_write=True)
                for e in RunEvent.objects.filter(run=run, seq__gt=shown).order_by("seq")]
    assert [e["seq"] for e in body["events"]] == [shown + 1, shown + 2]
    assert [e["html"] for e in body["events"]] == expected
    assert f'id="event-{shown + 1}"' in body["events"][0]["html"] and ESCAPED in body["events"][0]["html"]
    assert EVIL not in response.content.decode()
    assert body["more"] is False and body["finished"] is False


def test_a_poll_after_the_last_event_is_empty_and_a_finished_run_says_so(builder):
    run = queued_run(builder)
    started(run)
    client = signed_in(builder)
    last = run.events.count()
    assert poll(client, run, after=last).json() == {"events": [], "more": False, "finished": False}

    record_event(run.pk, "run.cancelled", {})
    body = poll(client, run, after=last).json()
    assert [e["seq"] for e in body["events"]] == [last + 1] and body["finished"] is True


def test_the_page_tells_run_js_where_to_poll(builder):
    run = queued_run(builder)
    html = signed_in(builder).get(detail(run)).content.decode()
    assert f'data-poll-url="{reverse("crews:run-poll", args=[run.pk])}"' in html
    assert 'data-polling="Live updates by polling: the live connection failed."' in html


def test_another_users_run_is_a_404_to_poll_as_its_page_is(builder, other_builder):
    run = queued_run(builder)
    client = signed_in(other_builder)
    assert client.get(detail(run)).status_code == 404
    assert poll(client, run).status_code == 404
    assert poll(client, run).content.find(b"event-") < 0


def test_a_poll_without_a_signed_in_user_is_a_json_401_not_a_redirect_to_sign_in(builder, client):
    run = queued_run(builder)
    response = poll(client, run)
    assert response.status_code == 401 and response["Content-Type"] == "application/json"
    assert "Sign in" in response.json()["detail"] and b"event-" not in response.content


def test_a_poll_with_nothing_new_reads_no_more_than_the_run_and_its_new_events(
        builder, django_assert_max_num_queries):
    run = queued_run(builder)
    started(run)
    client = signed_in(builder)
    last = run.events.count()
    poll(client, run, after=last)  # the session's first read

    # The session, the user, their roles (twice, by the selector), the run, its new events: none, so
    # the run is not folded again.
    with django_assert_max_num_queries(6):
        body = poll(client, run, after=last).json()
    assert body == {"events": [], "more": False, "finished": False}


def test_a_run_that_finishes_between_two_polls_says_finished_once_nothing_is_left(builder):
    run = queued_run(builder)
    started(run)
    client = signed_in(builder)
    last = run.events.count()
    assert poll(client, run, after=last).json()["finished"] is False

    runs.run_finish(run_id=run.pk, status="succeeded", output="Done")
    body = poll(client, run, after=last).json()
    assert body["finished"] is True and [e["seq"] for e in body["events"]] == [last + 1]
    assert 'id="run-output"' in body["events"][0]["html"]
    assert poll(client, run, after=last + 1).json() == {"events": [], "more": False, "finished": True}


def test_more_says_a_page_was_not_enough_and_the_next_poll_goes_on_from_its_last_seq(builder, monkeypatch):
    monkeypatch.setattr(run_poll, "POLL_PAGE", 2)
    run = queued_run(builder)
    started(run)
    for n in range(3):
        record_event(run.pk, "task.started" if n == 0 else "llm.started", {"model": "m"}, task_id=task_ids(run)[0])
    client = signed_in(builder)
    shown = run.events.count() - 3

    first = poll(client, run, after=shown).json()
    second = poll(client, run, after=first["events"][-1]["seq"]).json()

    assert [e["seq"] for e in first["events"]] == [shown + 1, shown + 2] and first["more"] is True
    assert [e["seq"] for e in second["events"]] == [shown + 3] and second["more"] is False


def test_a_viewer_of_a_shared_crew_polls_its_run_without_the_controls(builder, viewer):
    run = queued_run(builder, shared=True)
    started(run)

    seen = poll(signed_in(viewer), run).json()
    owner = poll(signed_in(builder), run).json()

    assert [e["seq"] for e in seen["events"]] == [e["seq"] for e in owner["events"]]
    assert 'id="run-controls"' in seen["events"][-1]["html"]
    assert ">Stop<" in owner["events"][-1]["html"] and ">Stop<" not in seen["events"][-1]["html"]


def test_an_agents_private_run_is_a_404_to_poll_for_another_builder_on_a_crew_it_shares(builder, other_builder):
    agent = make_agent(builder, "Shared planner")
    make_crew(builder, agent=agent, shared=True)
    run = runs.run_kickoff_agent(actor=builder, agent=agent, message="Plan my week")

    assert poll(signed_in(builder), run).status_code == 200
    response = poll(signed_in(other_builder), run)
    assert response.status_code == 404 and b"event-" not in response.content


@pytest.mark.parametrize("after", ["soon", "-1"])
def test_a_poll_after_something_that_is_not_an_event_number_is_a_422(builder, after):
    run = queued_run(builder)
    response = poll(signed_in(builder), run, after=after)
    assert response.status_code == 422 and "after" in response.json()["detail"]


def test_a_poll_only_reads(builder):
    run = queued_run(builder)
    response = signed_in(builder).post(reverse("crews:run-poll", args=[run.pk]))
    assert response.status_code == 405
