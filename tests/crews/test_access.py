"""Issue #16's access holes: an agent's private runs stay private when its crew is shared, and a
crew or an agent is not deleted under a run that works."""

from __future__ import annotations

from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse
from ninja.testing import TestClient

from agents.models import Agent
from crews.models import RUN_WORKING, Crew, Run
from planner_site.api import api
from planner_site.asgi import application
from tests.crews.api_helpers import assert_error
from tests.crews.run_helpers import make_agent, make_crew


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def asked_then_shared(owner: Any) -> tuple[Crew, Run, Run]:
    """``owner`` asks its agent something (a private run), then shares the agent's crew, and a
    crew run follows: (crew, the agent's run, the crew's run)."""
    agent = make_agent(owner, "Trip planner")
    crew = make_crew(owner, agent=agent, name="Travel")
    private = Run.objects.create(agent=agent, created_by=owner, message="Plan my secret trip")
    crew.shared = True
    crew.save(update_fields=["shared"])
    crew_run = Run.objects.create(crew=crew, created_by=owner, inputs={"topic": "Lisbon"})
    return crew, private, crew_run


# Access hole 1: an agent's runs of its own -------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["other_builder", "viewer"])
def test_sharing_a_crew_hides_its_agents_own_runs_from_the_api(client, builder, who, request):
    other = request.getfixturevalue(who)
    crew, private, crew_run = asked_then_shared(builder)

    listed = client.get("/runs", user=other).json()
    in_crew = client.get(f"/runs?crew_id={crew.pk}", user=other).json()

    assert [r["id"] for r in listed["items"]] == [crew_run.pk] and listed["count"] == 1
    assert [r["id"] for r in in_crew["items"]] == [crew_run.pk]
    assert_error(client.get(f"/runs/{private.pk}", user=other), 404, "not_found")
    assert_error(client.get(f"/runs/{private.pk}/events", user=other), 404, "not_found")
    assert client.get(f"/runs/{crew_run.pk}", user=other).status_code == 200
    # The agent itself is shared with the crew; what its owner asked it is not.
    agent_id = private.agent_id
    assert client.get(f"/agents/{agent_id}", user=other).status_code == 200
    assert {r["id"] for r in client.get("/runs", user=builder).json()["items"]} == {private.pk, crew_run.pk}


@pytest.mark.django_db
def test_an_admin_and_the_runs_creator_still_see_an_agents_own_run(client, builder, admin_user):
    _crew, private, _crew_run = asked_then_shared(builder)

    assert client.get(f"/runs/{private.pk}", user=builder).json()["id"] == private.pk
    assert client.get(f"/runs/{private.pk}", user=admin_user).status_code == 200


@pytest.mark.django_db
def test_sharing_a_crew_hides_its_agents_own_runs_from_the_pages(builder, other_builder):
    _crew, private, crew_run = asked_then_shared(builder)
    other = signed_in(other_builder)

    page = other.get(reverse("crews:run-detail", args=[private.pk]))
    output = other.get(reverse("crews:run-output", args=[private.pk]))
    history = other.get(reverse("crews:run-list")).content.decode()

    assert page.status_code == 404 and output.status_code == 404
    assert reverse("crews:run-detail", args=[crew_run.pk]) in history
    assert reverse("crews:run-detail", args=[private.pk]) not in history
    assert "Plan my secret trip" not in history
    mine = signed_in(builder).get(reverse("crews:run-list")).content.decode()
    assert reverse("crews:run-detail", args=[private.pk]) in mine


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/ws/runs/{}/", "/ws/api/runs/{}/"])
async def test_sharing_a_crew_hides_its_agents_own_runs_from_the_sockets(builder, other_builder, path):
    from channels.db import database_sync_to_async

    _crew, private, crew_run = await database_sync_to_async(asked_then_shared)(builder)

    async def close_code(user: Any, run: Run) -> int | None:
        cookie = await database_sync_to_async(lambda: signed_in(user).cookies["sessionid"].value)()
        headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"),
                   (b"cookie", f"sessionid={cookie}".encode())]
        communicator = WebsocketCommunicator(application, path.format(run.pk), headers=headers)
        connected, _ = await communicator.connect(timeout=3)
        assert connected
        if await communicator.receive_nothing(timeout=0.5):
            await communicator.disconnect()
            return None  # still open: following the run (which has no events yet)
        message = await communicator.receive_output(timeout=1)
        await communicator.disconnect()
        return message.get("code") if message["type"] == "websocket.close" else None

    assert await close_code(other_builder, private) == 4404
    assert await close_code(other_builder, crew_run) != 4404
    assert await close_code(builder, private) != 4404


# Access hole 2: no delete under a working run ---------------------------------------------------


def working_runs(owner: Any) -> tuple[Crew, Agent, Run, Run]:
    """A crew whose run works and an agent (not in it) whose own run works too."""
    crew = make_crew(owner, name="Busy crew")
    agent = make_agent(owner, "Busy agent")
    crew_run = Run.objects.create(crew=crew, created_by=owner, status=Run.Status.RUNNING, worker_id="w1")
    agent_run = Run.objects.create(agent=agent, created_by=owner, status=Run.Status.AWAITING_INPUT, worker_id="w1")
    return crew, agent, crew_run, agent_run


def untouched(run: Run) -> None:
    before = (run.status, run.worker_id, run.crew_id, run.agent_id)
    run.refresh_from_db()
    assert (run.status, run.worker_id, run.crew_id, run.agent_id) == before


@pytest.mark.django_db
def test_deleting_a_crew_or_an_agent_whose_run_works_is_a_409_naming_the_run(client, builder):
    crew, agent, crew_run, agent_run = working_runs(builder)

    crew_answer = assert_error(client.delete(f"/crews/{crew.pk}", user=builder), 409, "run_working")
    agent_answer = assert_error(client.delete(f"/agents/{agent.pk}", user=builder), 409, "run_working")

    assert crew_answer["detail"] == f"Run {crew_run.pk} is still working: stop it first."
    assert agent_answer["detail"] == f"Run {agent_run.pk} is still working: stop it first."
    assert Crew.objects.filter(pk=crew.pk).exists() and Agent.objects.filter(pk=agent.pk).exists()
    untouched(crew_run)
    untouched(agent_run)


@pytest.mark.django_db
@pytest.mark.parametrize("status", sorted(RUN_WORKING))
def test_every_working_state_keeps_the_crew(client, builder, status):
    crew = make_crew(builder, name="Busy crew")
    Run.objects.create(crew=crew, created_by=builder, status=status)

    assert_error(client.delete(f"/crews/{crew.pk}", user=builder), 409, "run_working")


@pytest.mark.django_db
def test_a_crew_or_an_agent_whose_runs_ended_or_wait_in_the_queue_is_deleted(client, builder):
    crew, agent, crew_run, agent_run = working_runs(builder)
    Run.objects.filter(pk=crew_run.pk).update(status=Run.Status.SUCCEEDED)
    Run.objects.filter(pk=agent_run.pk).update(status=Run.Status.QUEUED)

    assert client.delete(f"/crews/{crew.pk}", user=builder).status_code == 204
    assert client.delete(f"/agents/{agent.pk}", user=builder).status_code == 204
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_the_delete_pages_say_which_run_works_and_delete_nothing(builder):
    crew, agent, crew_run, agent_run = working_runs(builder)
    browser = signed_in(builder)

    crew_page = browser.post(reverse("crews:crew-delete", args=[crew.pk]))
    agent_page = browser.post(reverse("agents:agent-delete", args=[agent.pk]))

    assert crew_page.status_code == 409 and agent_page.status_code == 409
    assert f"Run {crew_run.pk} is still working: stop it first." in crew_page.content.decode()
    assert f"Run {agent_run.pk} is still working: stop it first." in agent_page.content.decode()
    assert 'role="alert"' in crew_page.content.decode()
    untouched(crew_run)
    untouched(agent_run)
    assert Crew.objects.filter(pk=crew.pk).exists() and Agent.objects.filter(pk=agent.pk).exists()


def test_the_openapi_document_lists_the_409_of_both_deletes():
    paths = api.get_openapi_schema()["paths"]

    assert 409 in paths["/api/crews/{id}"]["delete"]["responses"]
    assert 409 in paths["/api/agents/{id}"]["delete"]["responses"]
