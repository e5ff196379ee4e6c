"""The crews app's REST API: crews and their tasks."""

from __future__ import annotations

from typing import Any

import pytest
from ninja.testing import TestClient

from agents.models import LLM
from crews.models import Crew, Task
from planner_site.api import api


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def assert_invalid(response: Any, field: str) -> dict[str, Any]:
    """A 422 in API.md's error format whose first error names ``field``."""
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"detail", "code", "errors"}
    assert body["errors"][0]["field"] == field, body
    return body


def create_agent(client: TestClient, user: Any, name: str, **fields: Any) -> int:
    body = {"name": name, "role": f"{name} role", "goal": f"{name} goal", **fields}
    response = client.post("/agents", json=body, user=user)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def create_crew(client: TestClient, user: Any, **fields: Any) -> dict[str, Any]:
    response = client.post("/crews", json={"name": "Crew", **fields}, user=user)
    assert response.status_code == 201, response.content
    return response.json()


def create_task(client: TestClient, user: Any, crew_id: int, name: str, **fields: Any) -> dict:
    body = {"name": name, "description": f"Do {name}", "expected_output": "Done", **fields}
    response = client.post(f"/crews/{crew_id}/tasks", json=body, user=user)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def crew(client: TestClient, builder: Any) -> dict[str, Any]:
    """A private crew of ``builder`` with tasks A → B → C; C uses A's output."""
    writer = create_agent(client, builder, "Writer")
    crew = create_crew(client, builder, agent_ids=[writer])
    a = create_task(client, builder, crew["id"], "A", agent_id=writer)
    b = create_task(client, builder, crew["id"], "B")
    c = create_task(client, builder, crew["id"], "C", context_task_ids=[a["id"]])
    return {**crew, "writer": writer, "a": a["id"], "b": b["id"], "c": c["id"]}


# Crews -----------------------------------------------------------------------------------------


def test_a_builder_creates_a_crew_with_the_documented_defaults(client, builder):
    response = client.post("/crews", json={"name": "Research"}, user=builder)

    assert response.status_code == 201
    body = response.json()
    assert body == {
        **body,
        "name": "Research",
        "description": "",
        "process": "sequential",
        "manager_llm_id": None,
        "agent_ids": [],
        "planning": False,
        "planning_llm_id": None,
        "review_plan": False,
        "on_step_failure": "continue",
        "max_rpm": None,
        "budget": {"max_tokens": None, "max_cost_usd": None},
        "default_inputs": {},
        "input_names": [],
        "tasks": [],
    }
    assert Crew.objects.get(pk=body["id"]).owner == builder


def test_a_crew_is_created_with_every_field(client, builder):
    manager = LLM.objects.get(builtin=True).pk
    researcher = create_agent(client, builder, "Researcher", goal="Study {topic}")

    body = create_crew(
        client,
        builder,
        description="Research then report.",
        process="hierarchical",
        manager_llm_id=manager,
        agent_ids=[researcher],
        planning=True,
        planning_llm_id=manager,
        review_plan=True,
        run_without_plan_on_failure=True,
        on_step_failure="ask",
        max_rpm=30,
        budget={"max_tokens": 50_000, "max_cost_usd": 1.25},
        default_inputs={"topic": "AI", "year": 2026},
        shared=True,
    )

    assert body["process"] == "hierarchical"
    assert body["manager_llm_id"] == manager and body["planning_llm_id"] == manager
    assert body["agent_ids"] == [researcher]
    assert body["budget"] == {"max_tokens": 50_000, "max_cost_usd": 1.25}
    assert body["default_inputs"] == {"topic": "AI", "year": 2026}
    assert body["input_names"] == ["topic"]
    assert body["shared"] is True
    assert body["on_step_failure"] == "ask"


def test_a_crew_shows_its_tasks_and_the_inputs_its_texts_use(client, builder, demo_crew):
    response = client.get(f"/crews/{demo_crew.pk}", user=builder)

    assert response.status_code == 200
    body = response.json()
    assert body["input_names"] == ["topic", "current_year"]
    assert [t["name"] for t in body["tasks"]] == ["Research", "Report"]
    research, report = body["tasks"]
    assert report["context_task_ids"] == [research["id"]]
    assert set(research) >= {
        "id",
        "crew_id",
        "order",
        "name",
        "description",
        "expected_output",
        "agent_id",
        "context_task_ids",
        "async_execution",
        "human_input",
    }


def test_json_braces_in_a_task_are_text_not_inputs(client, builder, crew):
    create_task(
        client,
        builder,
        crew["id"],
        "D",
        description='Answer {"a": 1} about {audience}',
        expected_output="{ not-a-name }",
    )

    body = client.get(f"/crews/{crew['id']}", user=builder).json()

    assert body["input_names"] == ["audience"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"process": "parallel"}, "process"),
        ({"process": "hierarchical"}, "manager_llm_id"),
        ({"manager_llm_id": 9999}, "manager_llm_id"),
        ({"planning_llm_id": 9999}, "planning_llm_id"),
        ({"planning_llm_id": "x"}, "planning_llm_id"),
        ({"agent_ids": [9999]}, "agent_ids"),
        ({"agent_ids": "1"}, "agent_ids"),
        ({"agent_ids": [10**30]}, "agent_ids.0"),
        ({"max_rpm": 0}, "max_rpm"),
        ({"on_step_failure": "panic"}, "on_step_failure"),
        ({"budget": {"max_tokens": 0}}, "budget.max_tokens"),
        ({"budget": {"max_cost_usd": 0}}, "budget.max_cost_usd"),
        ({"budget": {"max_cost_usd": 10**12}}, "budget.max_cost_usd"),
        ({"budget": {"max_cost_usd": "NaN"}}, "budget.max_cost_usd"),
        ({"budget": {"max_cost_usd": 0.00001}}, "budget.max_cost_usd"),
        ({"budget": {"tokens": 5}}, "budget.tokens"),
        ({"default_inputs": {"bad name": 1}}, "default_inputs"),
        ({"default_inputs": [1, 2]}, "default_inputs"),
        ({"input_names": ["x"]}, "input_names"),
        ({"tasks": []}, "tasks"),
        ({"name": ""}, "name"),
        ({"name": None}, "name"),
    ],
)
def test_an_invalid_crew_is_refused_naming_the_field(client, builder, fields, field):
    assert_invalid(client.post("/crews", json={"name": "Crew", **fields}, user=builder), field)
    assert not Crew.objects.filter(owner=builder).exists()


def test_a_crew_cannot_use_another_users_agent(client, builder, other_builder):
    theirs = create_agent(client, other_builder, "Theirs")

    response = client.post("/crews", json={"name": "Crew", "agent_ids": [theirs]}, user=builder)

    assert_invalid(response, "agent_ids")


def test_a_duplicate_crew_name_is_refused_on_the_name(client, builder):
    create_crew(client, builder)

    assert_invalid(client.post("/crews", json={"name": "Crew"}, user=builder), "name")


def test_patch_changes_only_the_fields_sent(client, builder, crew):
    response = client.patch(
        f"/crews/{crew['id']}",
        json={"description": "New", "budget": {"max_tokens": 10}},
        user=builder,
    )

    assert response.status_code == 200
    body = response.json()
    assert body["description"] == "New"
    assert body["budget"] == {"max_tokens": 10, "max_cost_usd": None}
    assert body["agent_ids"] == [crew["writer"]]
    assert [t["name"] for t in body["tasks"]] == ["A", "B", "C"]


def test_patch_replaces_the_agent_list(client, builder, crew):
    editor = create_agent(client, builder, "Editor")

    response = client.patch(
        f"/crews/{crew['id']}", json={"agent_ids": [crew["writer"], editor]}, user=builder
    )

    assert response.status_code == 200
    assert sorted(response.json()["agent_ids"]) == sorted([crew["writer"], editor])


def test_an_agent_still_doing_a_task_cannot_leave_the_crew(client, builder, crew):
    response = client.patch(f"/crews/{crew['id']}", json={"agent_ids": []}, user=builder)

    body = assert_invalid(response, "agent_ids")
    assert "Writer" in body["detail"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"process": "hierarchical"}, "manager_llm_id"),
        ({"agent_ids": None}, "agent_ids"),
        ({"budget": {"max_cost_usd": -1}}, "budget.max_cost_usd"),
        ({"default_inputs": {"1st": "x"}}, "default_inputs"),
        ({"id": 3}, "id"),
    ],
)
def test_an_invalid_crew_patch_is_refused(client, builder, crew, fields, field):
    assert_invalid(client.patch(f"/crews/{crew['id']}", json=fields, user=builder), field)


def test_a_builder_lists_own_and_shared_crews(client, builder, other_builder, demo_crew):
    create_crew(client, other_builder, name="Private")

    body = client.get("/crews", user=builder).json()

    assert [c["name"] for c in body["items"]] == ["AI LLMs"]
    others = client.get("/crews", user=other_builder).json()
    assert sorted(c["name"] for c in others["items"]) == ["AI LLMs", "Private"]


def test_another_users_crew_and_its_tasks_are_404_on_every_operation(
    client, builder, other_builder, crew
):
    crew_id, task_id = crew["id"], crew["a"]
    responses = [
        client.get(f"/crews/{crew_id}", user=other_builder),
        client.patch(f"/crews/{crew_id}", json={"name": "Mine"}, user=other_builder),
        client.delete(f"/crews/{crew_id}", user=other_builder),
        client.get(f"/crews/{crew_id}/tasks", user=other_builder),
        client.post(
            f"/crews/{crew_id}/tasks",
            json={"name": "X", "description": "d", "expected_output": "e"},
            user=other_builder,
        ),
        client.post(
            f"/crews/{crew_id}/tasks/reorder",
            json={"task_ids": [crew["c"], crew["b"], crew["a"]]},
            user=other_builder,
        ),
        client.get(f"/tasks/{task_id}", user=other_builder),
        client.patch(f"/tasks/{task_id}", json={"name": "Mine"}, user=other_builder),
        client.delete(f"/tasks/{task_id}", user=other_builder),
    ]

    for response in responses:
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "not_found"
    assert Crew.objects.get(pk=crew_id).name == "Crew"
    assert Task.objects.filter(crew_id=crew_id).count() == 3


def test_a_shared_crew_is_readable_by_all_and_writable_by_its_owner_only(
    client, demo_crew, other_builder, viewer
):
    task_id = demo_crew.tasks.first().pk
    assert client.get(f"/crews/{demo_crew.pk}", user=viewer).status_code == 200
    assert client.get(f"/tasks/{task_id}", user=viewer).status_code == 200

    patch = {"description": "x"}
    assert client.patch(f"/crews/{demo_crew.pk}", json=patch, user=other_builder).status_code == 404
    assert client.patch(f"/crews/{demo_crew.pk}", json=patch, user=viewer).status_code == 403
    assert client.delete(f"/crews/{demo_crew.pk}", user=viewer).status_code == 403
    assert client.patch(f"/tasks/{task_id}", json=patch, user=viewer).status_code == 403
    assert client.delete(f"/tasks/{task_id}", user=viewer).status_code == 403


def test_a_viewer_cannot_create_crews(client, viewer):
    response = client.post("/crews", json={"name": "Mine"}, user=viewer)

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_deleting_a_crew_deletes_its_tasks(client, builder, crew):
    assert client.delete(f"/crews/{crew['id']}", user=builder).status_code == 204
    assert client.get(f"/crews/{crew['id']}", user=builder).status_code == 404
    assert not Task.objects.filter(pk=crew["a"]).exists()


# Tasks -----------------------------------------------------------------------------------------


def test_a_new_task_goes_last_and_its_agent_joins_the_crew(client, builder, crew):
    editor = create_agent(client, builder, "Editor")

    task = create_task(
        client,
        builder,
        crew["id"],
        "D",
        agent_id=editor,
        context_task_ids=[crew["b"], crew["a"]],
        async_execution=True,
        human_input=True,
    )

    assert task["order"] == 3
    assert task["crew_id"] == crew["id"]
    assert task["agent_id"] == editor
    assert task["context_task_ids"] == [crew["a"], crew["b"]]
    assert task["async_execution"] is True and task["human_input"] is True
    assert editor in client.get(f"/crews/{crew['id']}", user=builder).json()["agent_ids"]


def test_tasks_of_a_crew_are_listed_in_order(client, builder, crew):
    body = client.get(f"/crews/{crew['id']}/tasks", user=builder).json()

    assert body["count"] == 3
    assert [(t["name"], t["order"]) for t in body["items"]] == [("A", 0), ("B", 1), ("C", 2)]
    page = client.get(f"/crews/{crew['id']}/tasks?limit=1&offset=2", user=builder).json()
    assert [t["name"] for t in page["items"]] == ["C"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"agent_id": 9999}, "agent_id"),
        ({"agent_id": "writer"}, "agent_id"),
        ({"context_task_ids": [9999]}, "context_task_ids"),
        ({"context_task_ids": [10**30]}, "context_task_ids.0"),
        ({"context_task_ids": "1"}, "context_task_ids"),
        ({"description": ""}, "description"),
        ({"expected_output": None}, "expected_output"),
        ({"name": "x" * 101}, "name"),
        ({"order": 0}, "order"),
        ({"human_input": "sometimes"}, "human_input"),
    ],
)
def test_an_invalid_task_is_refused_naming_the_field(client, builder, crew, fields, field):
    body = {"name": "D", "description": "d", "expected_output": "e", **fields}

    assert_invalid(client.post(f"/crews/{crew['id']}/tasks", json=body, user=builder), field)
    assert Task.objects.filter(crew_id=crew["id"]).count() == 3


def test_a_task_cannot_use_another_users_agent(client, builder, other_builder, crew):
    theirs = create_agent(client, other_builder, "Theirs")

    response = client.post(
        f"/crews/{crew['id']}/tasks",
        json={"name": "D", "description": "d", "expected_output": "e", "agent_id": theirs},
        user=builder,
    )

    assert_invalid(response, "agent_id")


def test_a_task_cannot_use_a_task_of_another_crew(client, builder, crew, demo_crew):
    foreign = demo_crew.tasks.first().pk

    response = client.patch(
        f"/tasks/{crew['c']}", json={"context_task_ids": [foreign]}, user=builder
    )

    assert_invalid(response, "context_task_ids")


def test_a_task_can_only_use_earlier_tasks(client, builder, crew):
    later = client.patch(
        f"/tasks/{crew['a']}", json={"context_task_ids": [crew["b"]]}, user=builder
    )
    itself = client.patch(
        f"/tasks/{crew['b']}", json={"context_task_ids": [crew["b"]]}, user=builder
    )

    assert_invalid(later, "context_task_ids")
    assert_invalid(itself, "context_task_ids")
    assert client.get(f"/tasks/{crew['a']}", user=builder).json()["context_task_ids"] == []


def test_a_task_is_read_and_changed(client, builder, crew):
    assert client.get(f"/tasks/{crew['b']}", user=builder).json()["name"] == "B"

    response = client.patch(
        f"/tasks/{crew['b']}",
        json={
            "description": "Write about {audience}",
            "agent_id": crew["writer"],
            "context_task_ids": [crew["a"]],
        },
        user=builder,
    )

    assert response.status_code == 200
    body = response.json()
    assert body["description"] == "Write about {audience}"
    assert body["agent_id"] == crew["writer"]
    assert body["context_task_ids"] == [crew["a"]]
    assert body["expected_output"] == "Done"
    assert "audience" in client.get(f"/crews/{crew['id']}", user=builder).json()["input_names"]


def test_patch_with_agent_id_null_unassigns_the_agent(client, builder, crew):
    response = client.patch(f"/tasks/{crew['a']}", json={"agent_id": None}, user=builder)

    assert response.json()["agent_id"] is None


def test_deleting_a_task_closes_the_gap_in_the_order(client, builder, crew):
    assert client.delete(f"/tasks/{crew['a']}", user=builder).status_code == 204

    body = client.get(f"/crews/{crew['id']}/tasks", user=builder).json()
    assert [(t["name"], t["order"]) for t in body["items"]] == [("B", 0), ("C", 1)]
    assert client.get(f"/tasks/{crew['a']}", user=builder).status_code == 404


def test_reordering_tasks(client, builder, crew):
    response = client.post(
        f"/crews/{crew['id']}/tasks/reorder",
        json={"task_ids": [crew["b"], crew["a"], crew["c"]]},
        user=builder,
    )

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert [(t["name"], t["order"]) for t in body["items"]] == [("B", 0), ("A", 1), ("C", 2)]
    listed = client.get(f"/crews/{crew['id']}/tasks", user=builder).json()["items"]
    assert [t["name"] for t in listed] == ["B", "A", "C"]


@pytest.mark.parametrize(
    "order",
    [
        ["c", "b", "a"],  # C would come before A, whose output it uses
        ["a", "b"],  # C missing
        ["a", "b", "c", "c"],  # C twice
        ["a", "b", "c", 9999],  # not a task of this crew
        [],
    ],
)
def test_an_invalid_reorder_is_refused_and_changes_nothing(client, builder, crew, order):
    task_ids = [crew[key] if isinstance(key, str) else key for key in order]

    response = client.post(
        f"/crews/{crew['id']}/tasks/reorder", json={"task_ids": task_ids}, user=builder
    )

    assert_invalid(response, "task_ids")
    listed = client.get(f"/crews/{crew['id']}/tasks", user=builder).json()["items"]
    assert [t["name"] for t in listed] == ["A", "B", "C"]


def test_listing_crews_reads_their_tasks_in_the_same_queries_however_many(
    client, builder, crew, django_assert_max_num_queries
):
    for n in range(3):
        other = create_crew(client, builder, name=f"More {n}", agent_ids=[crew["writer"]])
        create_task(client, builder, other["id"], "X {topic}", agent_id=crew["writer"])

    with django_assert_max_num_queries(8):
        items = client.get("/crews", user=builder).json()["items"]

    shown = {c["name"]: c for c in items}
    assert [t["name"] for t in shown["Crew"]["tasks"]] == ["A", "B", "C"]
    assert shown["Crew"]["tasks"][2]["context_task_ids"] == [crew["a"]]
    assert shown["More 0"]["input_names"] == ["topic"]


def test_a_crew_reads_its_tasks_once_for_the_tasks_and_the_input_names(
    client, builder, crew, django_assert_num_queries
):
    # The user's groups (role check), the crew, its agents, its tasks and their context.
    with django_assert_num_queries(5):
        shown = client.get(f"/crews/{crew['id']}", user=builder).json()

    assert [t["name"] for t in shown["tasks"]] == ["A", "B", "C"]
