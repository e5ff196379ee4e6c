"""The crew planner reads the crew's sources (issue #19): a plan drafted from the crew page (API)
or inside a run names each task's source titles and the best passages of the crew's shared
sources (never an agent's own: one request holds every task), on the fake OpenAI server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply
from tests.knowledge.files import pdf_with_text
from tests.knowledge.helpers import FACT, answers, fake_llm, island_crew, kickoff, paste, upload

PLANNER = "You are the planner of a crew"


def plans_or_answers(request: RecordedRequest) -> Reply:
    """The planner gets two steps per task; everything else answers at once."""
    if PLANNER in request.last_user_text():
        plan = {"plans": [{"task_number": n, "steps": ["Read the sources", "Answer"]} for n in (1, 2)]}
        return Reply.text(json.dumps(plan))
    return answers(request)


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as server:
        server.default = plans_or_answers
        yield server


@pytest.fixture
def crew(client, builder, server, django_capture_on_commit_callbacks) -> Any:
    """The island crew, planning on the fake server: the researcher's own PDF holds the keeper's
    name; the crew's pasted timetable is everyone's."""
    llm = fake_llm(server)
    crew = island_crew(builder, llm, planning=True, planning_llm=llm)
    researcher = crew.agents.get(role="Researcher")
    upload(client, builder, f"agents/{researcher.pk}", pdf_with_text("Island notes.", FACT), "keepers.pdf",
           django_capture_on_commit_callbacks, title="Keepers")
    paste(client, builder, f"crews/{crew.pk}", "Timetable", "Ferries to Ilha Verde leave at nine.",
          django_capture_on_commit_callbacks)
    return crew


def planner_tasks(server: FakeLLMServer) -> tuple[str, str]:
    """The planner's listing of task 1 and of task 2."""
    [request] = [r for r in server.requests if PLANNER in r.last_user_text()]
    first, second = request.last_user_text().split("## Task 2: Harbour")
    return first, second


def assert_no_private_passage(server: FakeLLMServer) -> None:
    """No planner request holds the researcher's own passage, in any of its messages."""
    planner = [r for r in server.requests if PLANNER in r.last_user_text()]
    assert planner and all("Marta Quill" not in json.dumps(r.body) for r in planner)


def assert_each_task_lists_its_own_sources(server: FakeLLMServer) -> None:
    keeper, harbour = planner_tasks(server)
    assert "Knowledge from your sources (Keepers, Timetable)" in keeper  # its agent's own, by title
    assert_no_private_passage(server)
    assert "Knowledge from your sources (Timetable)" in harbour
    assert "Keepers" not in harbour and "Marta Quill" not in harbour  # the researcher's own source
    assert "[Timetable] Ferries to Ilha Verde leave at nine." in harbour


def test_a_plan_drafted_from_the_crew_page_names_each_tasks_sources_and_best_passages(
    client, builder, server, crew, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {}}, user=builder)

    assert response.status_code == 202, response.content
    plan = client.get(f"/plans/{response.json()['id']}", user=builder).json()
    assert plan["status"] == "draft", plan
    assert_each_task_lists_its_own_sources(server)


def test_regenerating_one_task_still_shows_the_planner_its_sources(
    client, builder, server, crew, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        plan_id = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {}}, user=builder).json()["id"]
    server.requests.clear()
    keeper = crew.tasks.get(order=0)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/plans/{plan_id}/tasks/{keeper.pk}/regenerate", json={}, user=builder)

    assert response.status_code in (200, 202), response.content
    [request] = [r for r in server.requests if PLANNER in r.last_user_text()]
    assert "Knowledge from your sources (Keepers, Timetable)" in request.last_user_text()
    assert_no_private_passage(server)


def test_a_plan_drafted_inside_a_run_names_each_tasks_sources_too(
    client, builder, server, crew, django_capture_on_commit_callbacks
):
    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    assert run.events.filter(type="crew_plan.completed").exists()
    assert_each_task_lists_its_own_sources(server)


def test_a_crew_without_sources_drafts_as_before(client, builder, server, django_capture_on_commit_callbacks):
    llm = fake_llm(server)
    crew = island_crew(builder, llm, name="Bare", planning=True, planning_llm=llm)

    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/crews/{crew.pk}/plans", json={"inputs": {}}, user=builder)

    keeper, _harbour = planner_tasks(server)
    assert "Knowledge from your sources" not in keeper
