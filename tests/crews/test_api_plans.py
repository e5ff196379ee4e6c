"""The plans part of the REST API: draft in the background, edit as versions, regenerate, approve."""

from __future__ import annotations

from typing import Any

import pytest
from ninja.testing import TestClient

from crews.models import Plan, PlanStep, PlanVersion
from planner_site.api import api
from tests.crews.api_helpers import (
    approve,
    assert_error,
    assert_invalid,
    draft_plan,
    private_crew,
)


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


@pytest.fixture
def crew(builder: Any) -> Any:
    return private_crew(builder)


@pytest.fixture
def plan(client, builder, crew, django_capture_on_commit_callbacks) -> dict[str, Any]:
    """A drafted plan (version 1) of ``builder``'s private crew."""
    return draft_plan(client, builder, crew, django_capture_on_commit_callbacks)


def steps_of(plan: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    return {task["task_id"]: task["steps"] for task in plan["tasks"]}


def put(client: TestClient, user: Any, plan_id: int, tasks: list, if_match: Any = "1") -> Any:
    headers = {} if if_match is None else {"If-Match": str(if_match)}
    return client.put(f"/plans/{plan_id}", json={"tasks": tasks}, headers=headers, user=user)


# Drafting --------------------------------------------------------------------------------------


def test_drafting_answers_at_once_with_a_generating_plan_that_lists_every_task(
    client, builder, demo_crew
):
    response = client.post(
        f"/crews/{demo_crew.pk}/plans", json={"inputs": {"topic": "tides"}}, user=builder
    )

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "generating" and body["version"] == 0
    assert body["crew_id"] == demo_crew.pk
    assert body["inputs"] == {"topic": "tides", "current_year": "2026"}  # the crew's default
    assert [(t["task_number"], t["task_name"], t["steps"]) for t in body["tasks"]] == [
        (1, "Research", []),
        (2, "Report", []),
    ]
    assert body["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    assert body["error"] is None and body["approved_version"] is None


def test_the_demo_model_drafts_steps_for_both_demo_tasks(
    client, builder, demo_crew, django_capture_on_commit_callbacks
):
    plan = draft_plan(client, builder, demo_crew, django_capture_on_commit_callbacks)

    assert plan["version"] == 1
    assert plan["llm_id"] is not None
    research, report = demo_crew.tasks.order_by("order")
    assert [t["task_id"] for t in plan["tasks"]] == [research.pk, report.pk]
    steps = [s for task in plan["tasks"] for s in task["steps"]]
    assert all(task["steps"] for task in plan["tasks"])
    assert [s["id"] for s in steps] == list(range(1, len(steps) + 1))  # stable ids from 1
    assert all(s["text"] and s["pinned"] is False for s in steps)
    assert [s["order"] for s in plan["tasks"][0]["steps"]] == list(
        range(len(plan["tasks"][0]["steps"]))
    )
    assert plan["usage"]["prompt_tokens"] > 0 and isinstance(plan["usage"]["cost_usd"], float)


def test_get_gives_the_version_as_an_etag(client, builder, plan):
    response = client.get(f"/plans/{plan['id']}", user=builder)

    assert response.status_code == 200
    assert response["ETag"] == '"1"'


def test_drafting_names_a_missing_input(client, builder, crew):
    response = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {}}, user=builder)

    assert_invalid(response, "inputs.topic")
    assert not Plan.objects.exists()


def test_drafting_refuses_inputs_that_are_not_an_object(client, builder, crew):
    response = client.post(f"/crews/{crew.pk}/plans", json={"inputs": ["tides"]}, user=builder)

    assert_invalid(response, "inputs")


def test_a_plan_of_a_crew_with_a_new_task_lists_that_task_without_steps(
    client, builder, crew, plan
):
    crew.tasks.create(name="Review", description="Check it", expected_output="OK", order=2)

    body = client.get(f"/plans/{plan['id']}", user=builder).json()

    assert [(t["task_number"], t["task_name"]) for t in body["tasks"]][-1] == (3, "Review")
    assert body["tasks"][-1]["steps"] == []


# Editing ---------------------------------------------------------------------------------------


def test_an_edit_changes_adds_deletes_and_reorders_steps_as_a_new_version(
    client, builder, crew, plan
):
    research, report = crew.tasks.order_by("order")
    before = steps_of(plan)
    first, second, *rest = before[research.pk]
    highest = max(s["id"] for steps in before.values() for s in steps)
    edited = [
        {"id": rest[-1]["id"], "text": rest[-1]["text"]},  # the last step moves to the front
        {"id": first["id"], "text": "Read the brief about tides twice", "pinned": True},
        {"text": "Ask what a spring tide is"},  # new; the second step is gone
    ]

    response = put(client, builder, plan["id"], [{"task_id": research.pk, "steps": edited}])

    assert response.status_code == 200, response.content
    assert response["ETag"] == '"2"'
    body = response.json()
    assert body["version"] == 2 and body["status"] == "draft"
    after = steps_of(body)
    assert after[research.pk] == [
        {"id": rest[-1]["id"], "order": 0, "text": rest[-1]["text"], "pinned": False},
        {"id": first["id"], "order": 1, "text": "Read the brief about tides twice", "pinned": True},
        {"id": highest + 1, "order": 2, "text": "Ask what a spring tide is", "pinned": False},
    ]
    assert second["id"] not in {s["id"] for s in after[research.pk]}
    assert after[report.pk] == before[report.pk]  # a task left out keeps its steps
    assert client.get(f"/plans/{plan['id']}", user=builder).json() == body


def test_the_tasks_a_get_returns_can_be_sent_back_as_they_are(client, builder, plan):
    response = put(client, builder, plan["id"], plan["tasks"])

    assert response.status_code == 200, response.content
    assert response.json()["version"] == 2 and response.json()["tasks"] == plan["tasks"]


def test_versions_are_listed_newest_first_and_each_reads_as_it_was(client, builder, crew, plan):
    research = crew.tasks.order_by("order").first()
    put(client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "Only this"}]}])

    listed = client.get(f"/plans/{plan['id']}/versions", user=builder).json()
    old = client.get(f"/plans/{plan['id']}/versions/1", user=builder).json()
    new = client.get(f"/plans/{plan['id']}/versions/2", user=builder).json()

    assert listed["count"] == 2
    two, one = listed["items"]
    total = sum(len(steps) for steps in steps_of(plan).values())
    assert (two["number"], two["note"], two["created_by"]) == (2, "edited", "bob")
    assert (one["number"], one["note"], one["created_by"]) == (1, "drafted", None)
    assert one["step_count"] == total
    assert two["step_count"] == total - len(steps_of(plan)[research.pk]) + 1
    assert old["version"] == 1 and old["tasks"] == plan["tasks"]
    assert new["version"] == 2 and steps_of(new)[research.pk][0]["text"] == "Only this"
    page = client.get(f"/plans/{plan['id']}/versions?limit=1&offset=1", user=builder).json()
    assert [v["number"] for v in page["items"]] == [1]


def test_an_edit_of_one_task_leaves_every_version_with_steps_of_its_own(client, builder, crew, plan):
    research, report = crew.tasks.order_by("order")
    put(client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "Only this"}]}])
    put(client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "Now this"}]}], if_match=2)

    rows = {n: list(PlanStep.objects.filter(version__plan_id=plan["id"], version__number=n)
                    .order_by("task__order", "order").values_list("version_id", "uid", "task_id", "text"))
            for n in (1, 2, 3)}

    kept = [(uid, text) for _v, uid, task, text in rows[1] if task == report.pk]
    for n in (2, 3):  # the task left out is copied into each version, ids and texts alike
        assert [(uid, text) for _v, uid, task, text in rows[n] if task == report.pk] == kept
        assert len({version for version, *_rest in rows[n]}) == 1
    assert [text for *_rest, task, text in rows[3] if task == research.pk] == ["Now this"]
    assert rows[1][0][0] != rows[2][0][0] != rows[3][0][0]  # rows of their own, never shared


def test_a_missing_version_is_404(client, builder, plan):
    assert_error(client.get(f"/plans/{plan['id']}/versions/9", user=builder), 404, "not_found")


def test_restoring_a_version_saves_its_steps_as_the_next_version(client, builder, crew, plan):
    research = crew.tasks.order_by("order").first()
    put(client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "Only this"}]}])

    response = client.post(f"/plans/{plan['id']}/versions/1/restore", user=builder)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["version"] == 3 and body["tasks"] == plan["tasks"]  # the same ids, too
    notes = list(PlanVersion.objects.filter(plan_id=plan["id"]).values_list("note", flat=True))
    assert notes[0] == "restored v1"
    assert_error(client.post(f"/plans/{plan['id']}/versions/7/restore", user=builder), 404)


@pytest.mark.parametrize("if_match", ["1", '"1"', 'W/"1"', ' "1" '])
def test_if_match_takes_the_version_bare_quoted_or_weak(client, builder, crew, plan, if_match):
    research = crew.tasks.order_by("order").first()

    response = put(
        client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "x"}]}], if_match
    )

    assert response.status_code == 200, response.content
    assert response.json()["version"] == 2


def test_a_stale_version_is_a_conflict_and_saves_nothing(client, builder, crew, plan):
    research = crew.tasks.order_by("order").first()
    tasks = [{"task_id": research.pk, "steps": [{"text": "Mine"}]}]
    assert put(client, builder, plan["id"], tasks, if_match=1).status_code == 200

    response = put(client, builder, plan["id"], [{"task_id": research.pk, "steps": []}], 1)

    assert_error(response, 409, "stale_version")
    current = client.get(f"/plans/{plan['id']}", user=builder).json()
    assert current["version"] == 2
    assert [s["text"] for s in steps_of(current)[research.pk]] == ["Mine"]
    assert PlanVersion.objects.filter(plan_id=plan["id"]).count() == 2


@pytest.mark.parametrize("if_match", [None, "abc", "*", '"1", "2"', "W/", "-1"])
def test_an_edit_without_a_usable_if_match_is_refused_on_the_header(
    client, builder, crew, plan, if_match
):
    research = crew.tasks.order_by("order").first()

    response = put(
        client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"text": "x"}]}], if_match
    )

    assert_invalid(response, "If-Match")
    assert Plan.objects.get(pk=plan["id"]).version == 1


def test_an_invalid_edit_names_the_exact_field(client, builder, crew, plan, demo_crew):
    research, report = crew.tasks.order_by("order")
    step = steps_of(plan)[research.pk][0]
    foreign = demo_crew.tasks.first().pk

    cases = [
        ([{"task_id": research.pk, "steps": [step, {"text": "  "}]}], "tasks[0].steps[1].text"),
        ([{"task_id": report.pk, "steps": []}, {"task_id": foreign, "steps": []}], "tasks[1].task_id"),
        ([{"task_id": research.pk, "steps": [{"id": 999, "text": "x"}]}], "tasks[0].steps[0].id"),
        ([{"task_id": report.pk, "steps": [{"text": "a"}, {"text": "x" * 2001}]}],
         "tasks[0].steps[1].text"),
        ([{"task_id": research.pk, "steps": []}, {"task_id": research.pk, "steps": []}],
         "tasks[1].task_id"),
    ]  # fmt: skip
    for tasks, field in cases:
        assert_invalid(put(client, builder, plan["id"], tasks), field)
    assert Plan.objects.get(pk=plan["id"]).version == 1


def test_a_step_id_under_another_task_is_refused_on_that_id(client, builder, crew, plan):
    research, report = crew.tasks.order_by("order")
    step = steps_of(plan)[research.pk][0]
    moved = [*steps_of(plan)[report.pk], step]

    for tasks in (
        [{"task_id": report.pk, "steps": moved}],  # its own task left out: it would keep the id too
        [{"task_id": research.pk, "steps": []}, {"task_id": report.pk, "steps": moved}],
    ):
        assert_invalid(put(client, builder, plan["id"], tasks), f"tasks[{len(tasks) - 1}].steps[{len(moved) - 1}].id")
    assert Plan.objects.get(pk=plan["id"]).version == 1
    assert PlanVersion.objects.filter(plan_id=plan["id"]).count() == 1


def test_a_body_of_the_wrong_shape_is_refused_by_the_schema(client, builder, crew, plan):
    research = crew.tasks.order_by("order").first()

    missing_text = put(client, builder, plan["id"], [{"task_id": research.pk, "steps": [{}]}])
    unknown_key = put(
        client, builder, plan["id"], [{"task_id": research.pk, "steps": [{"txt": "a"}]}]
    )

    assert_invalid(missing_text, "tasks.0.steps.0.text")
    assert_error(unknown_key, 422)


def test_a_plan_still_generating_cannot_be_edited(client, builder, crew):
    created = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "x"}}, user=builder)
    task = crew.tasks.first()

    response = put(client, builder, created.json()["id"], [{"task_id": task.pk, "steps": []}], 0)

    assert_error(response, 409, "plan_state")


# Regenerating ----------------------------------------------------------------------------------


def test_regenerating_a_task_redrafts_only_its_unpinned_steps(
    client, builder, crew, plan, django_capture_on_commit_callbacks
):
    research, report = crew.tasks.order_by("order")
    steps = steps_of(plan)[research.pk]
    kept = {"id": steps[1]["id"], "text": "Keep me here", "pinned": True}
    body = [{"task_id": research.pk, "steps": [steps[0], kept, steps[2]]}]
    assert put(client, builder, plan["id"], body).status_code == 200

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/plans/{plan['id']}/tasks/{research.pk}/regenerate",
            json={"feedback": "Shorter"},
            user=builder,
        )
        assert response.status_code == 202, response.content
        assert response.json()["regenerating_task_ids"] == [research.pk]

    after = client.get(f"/plans/{plan['id']}", user=builder).json()
    assert after["version"] == 3 and after["regenerating_task_ids"] == []
    regenerated = steps_of(after)[research.pk]
    assert regenerated[1] == {**kept, "order": 1}
    assert {s["id"] for s in regenerated if not s["pinned"]}.isdisjoint(s["id"] for s in steps)
    assert steps_of(after)[report.pk] == steps_of(plan)[report.pk]
    notes = PlanVersion.objects.filter(plan_id=plan["id"]).values_list("note", flat=True)
    assert list(notes)[0] == "regenerated"


def test_regenerating_needs_no_body(client, builder, crew, plan):
    task = crew.tasks.first()

    response = client.post(f"/plans/{plan['id']}/tasks/{task.pk}/regenerate", user=builder)

    assert response.status_code == 202, response.content


def test_regenerating_a_task_twice_at_once_is_a_conflict(client, builder, crew, plan):
    task = crew.tasks.first()
    path = f"/plans/{plan['id']}/tasks/{task.pk}/regenerate"
    assert client.post(path, json={}, user=builder).status_code == 202  # not executed yet

    assert_error(client.post(path, json={}, user=builder), 409, "busy")


def test_regenerating_a_task_of_another_crew_is_404(client, builder, plan, demo_crew):
    foreign = demo_crew.tasks.first().pk

    response = client.post(f"/plans/{plan['id']}/tasks/{foreign}/regenerate", user=builder)

    assert_error(response, 404, "not_found")
    assert_error(client.post(f"/plans/{plan['id']}/tasks/999/regenerate", user=builder), 404)


# Approving -------------------------------------------------------------------------------------


def test_approval_binds_to_the_current_version_and_an_edit_needs_a_new_one(
    client, builder, crew, plan
):
    body = approve(client, builder, plan["id"])

    assert (body["status"], body["approved_version"], body["version"]) == ("approved", 1, 1)
    task = crew.tasks.first()
    edited = put(client, builder, plan["id"], [{"task_id": task.pk, "steps": [{"text": "x"}]}])
    assert (edited.json()["status"], edited.json()["approved_version"]) == ("draft", 1)
    again = client.post(f"/plans/{plan['id']}/approve", headers={"If-Match": "2"}, user=builder)
    assert again.json()["approved_version"] == 2


def test_approving_a_stale_version_is_a_conflict(client, builder, crew, plan):
    task = crew.tasks.first()
    put(client, builder, plan["id"], [{"task_id": task.pk, "steps": [{"text": "x"}]}])

    response = client.post(f"/plans/{plan['id']}/approve", headers={"If-Match": "1"}, user=builder)

    assert_error(response, 409, "stale_version")
    assert Plan.objects.get(pk=plan["id"]).status == Plan.Status.DRAFT


def test_approving_a_plan_supersedes_the_crews_earlier_approved_plan(
    client, builder, crew, plan, django_capture_on_commit_callbacks
):
    approve(client, builder, plan["id"])
    second = draft_plan(client, builder, crew, django_capture_on_commit_callbacks)

    approve(client, builder, second["id"])

    assert client.get(f"/plans/{plan['id']}", user=builder).json()["status"] == "superseded"
    assert_error(client.post(f"/plans/{plan['id']}/approve", user=builder), 409, "plan_state")


def test_a_generating_plan_cannot_be_approved(client, builder, crew):
    created = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "x"}}, user=builder)

    assert_error(client.post(f"/plans/{created.json()['id']}/approve", user=builder), 409)


# Who may do what -------------------------------------------------------------------------------


def test_another_users_plan_is_404_on_every_operation(client, other_builder, crew, plan):
    task = crew.tasks.first()
    pid = plan["id"]
    responses = [
        client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "x"}}, user=other_builder),
        client.get(f"/plans/{pid}", user=other_builder),
        put(client, other_builder, pid, [{"task_id": task.pk, "steps": []}]),
        client.post(f"/plans/{pid}/tasks/{task.pk}/regenerate", user=other_builder),
        client.post(f"/plans/{pid}/approve", user=other_builder),
        client.get(f"/plans/{pid}/versions", user=other_builder),
        client.get(f"/plans/{pid}/versions/1", user=other_builder),
        client.post(f"/plans/{pid}/versions/1/restore", user=other_builder),
    ]

    for response in responses:
        assert_error(response, 404, "not_found")
    assert Plan.objects.get(pk=pid).version == 1 and Plan.objects.count() == 1


def test_a_viewer_reads_a_shared_crews_plans_but_cannot_change_them(
    client, builder, viewer, demo_crew, django_capture_on_commit_callbacks
):
    plan = draft_plan(client, builder, demo_crew, django_capture_on_commit_callbacks)
    task = demo_crew.tasks.first()
    pid = plan["id"]

    assert client.get(f"/plans/{pid}", user=viewer).json() == plan
    assert client.get(f"/plans/{pid}/versions", user=viewer).json()["count"] == 1
    assert client.get(f"/plans/{pid}/versions/1", user=viewer).status_code == 200
    writes = [
        client.post(f"/crews/{demo_crew.pk}/plans", json={"inputs": {}}, user=viewer),
        put(client, viewer, pid, [{"task_id": task.pk, "steps": []}]),
        client.post(f"/plans/{pid}/tasks/{task.pk}/regenerate", user=viewer),
        client.post(f"/plans/{pid}/approve", user=viewer),
        client.post(f"/plans/{pid}/versions/1/restore", user=viewer),
    ]
    for response in writes:
        assert_error(response, 403, "forbidden")
    assert Plan.objects.get(pk=pid).status == Plan.Status.DRAFT


def test_another_builder_cannot_change_a_shared_crews_plan(
    client, builder, other_builder, demo_crew, django_capture_on_commit_callbacks
):
    plan = draft_plan(client, builder, demo_crew, django_capture_on_commit_callbacks)

    assert client.get(f"/plans/{plan['id']}", user=other_builder).status_code == 200
    assert_error(client.post(f"/plans/{plan['id']}/approve", user=other_builder), 404)


def test_drafting_beyond_the_rate_limit_is_429_and_starts_nothing(client, builder, crew, settings):
    settings.PLANNER_KICKOFF_RATE_PER_MINUTE = 2
    for _ in range(2):
        assert client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "tides"}}, user=builder).status_code == 202

    refused = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "tides"}}, user=builder)

    assert refused.status_code == 429
    assert refused.json()["code"] == "rate_limited"
    assert Plan.objects.filter(crew=crew).count() == 2
