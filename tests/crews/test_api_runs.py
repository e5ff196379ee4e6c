"""The runs part of the REST API: kickoff, follow the events, stop, answer people, resume, re-run."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from ninja.testing import TestClient

from agents.models import Agent
from crews import plans, runs
from crews.models import FeedbackRequest, Plan, Run, ToolApproval
from planner_site.api import api
from planner_site.errors import Conflict
from planner_site.tokens import token_create
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
def approved_plan(client, builder, crew, django_capture_on_commit_callbacks) -> dict[str, Any]:
    plan = draft_plan(client, builder, crew, django_capture_on_commit_callbacks)
    return approve(client, builder, plan["id"])


def kickoff(client: TestClient, user: Any, crew: Any, **body: Any) -> Any:
    """Kick off without executing: the run stays queued (its task is enqueued on commit)."""
    body.setdefault("inputs", {"topic": "tides"})
    return client.post(f"/crews/{crew.pk}/kickoff", json=body, user=user)


def run_to_the_end(client: TestClient, user: Any, crew: Any, capture: Any, **body: Any) -> dict:
    """Kick off; the immediate task backend executes the run when the transaction commits."""
    with capture(execute=True):
        response = kickoff(client, user, crew, **body)
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    return client.get(f"/runs/{response.json()['id']}", user=user).json()


def working(client: TestClient, user: Any, crew: Any) -> Run:
    """A run a worker has claimed (status running), for the states a person answers."""
    run_id = kickoff(client, user, crew).json()["id"]
    return runs.run_claim(run_id=run_id, worker_id="test-worker")


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


# Kickoff ---------------------------------------------------------------------------------------


def test_a_kickoff_with_the_approved_plan_runs_it_verbatim_to_the_end(
    client, builder, crew, approved_plan, django_capture_on_commit_callbacks
):
    run = run_to_the_end(
        client, builder, crew, django_capture_on_commit_callbacks, plan_id=approved_plan["id"]
    )

    assert run["status"] == "succeeded", run["error"]
    assert (run["crew_id"], run["agent_id"]) == (crew.pk, None)
    assert (run["plan_id"], run["plan_version"]) == (approved_plan["id"], 1)
    assert run["inputs"] == {"topic": "tides"}
    research, report = crew.tasks.order_by("order")
    outputs = run["task_outputs"]
    assert [(t["task_id"], t["status"]) for t in outputs] == [
        (research.pk, "done"),
        (report.pk, "done"),
    ]
    assert all(t["output"] for t in outputs) and run["output"] == outputs[-1]["output"]
    assert run["usage"]["prompt_tokens"] > 0
    assert run["started_at"] and run["finished_at"] and run["error"] is None
    events = client.get(f"/runs/{run['id']}/events?limit=1000", user=builder).json()
    # Each approved step ran as a step of its own, under its stable id, in order; no agent planned.
    approved_ids = [f"{t['task_id']}.p{s['id']}" for t in approved_plan["tasks"] for s in t["steps"]]
    assert [e["step_id"] for e in events["items"] if e["type"] == "step.started"] == approved_ids
    purposes = [e["data"]["purpose"] for e in events["items"] if e["type"] == "llm.started"]
    assert "agent_plan" not in purposes and "crew_plan" not in purposes
    assert purposes.count("step") == len(approved_ids) and run["usage"]["llm_calls"] == len(purposes)
    assert [e["seq"] for e in events["items"]] == list(range(1, len(events["items"]) + 1))
    assert events["next_after"] == len(events["items"]) == run["last_seq"]
    assert "crew_plan.approved" in types(events["items"])
    assert "crew_plan.started" not in types(events["items"])  # the planner is not called again
    assert types(events["items"])[-1] == "run.succeeded"
    approved = next(e for e in events["items"] if e["type"] == "crew_plan.approved")
    assert approved["data"] == {"plan_id": approved_plan["id"], "version": 1}


def test_a_kickoff_answers_at_once_with_the_queued_run(client, builder, crew):
    response = kickoff(client, builder, crew, review_plan=True)

    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["review_plan"] is True
    assert body["output"] is None and body["plan_id"] is None
    assert body["created_by"] == "bob"
    assert body["pending"] == {"plan_id": None, "feedback": None, "approvals": []}
    assert [t["status"] for t in body["task_outputs"]] == ["waiting", "waiting"]


def test_a_kickoff_reads_no_pending_requests_and_no_planning_config_per_agent(client, builder, crew):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents.models import PlanningConfig
    from crews.models import RunTask

    planner, plain = sorted(crew.agents.all(), key=lambda a: a.pk)[0], Agent.objects.create(
        owner=builder, name="Plain", role="r", goal="g", backstory=""
    )
    crew.agents.add(plain)
    PlanningConfig.objects.create(agent=planner, max_steps=7)

    with CaptureQueriesContext(connection) as queries:
        response = kickoff(client, builder, crew)

    assert response.status_code == 202, response.content
    tables = (FeedbackRequest._meta.db_table, ToolApproval._meta.db_table)  # nothing pending yet
    marks = [f'"{t}"' for t in tables]
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and any(m in q["sql"] for m in marks)]
    assert reads == []
    # The agents' planning settings in one read for all of them (however many agents), not one each.
    planning = f'"{PlanningConfig._meta.db_table}"'
    assert sum(q["sql"].startswith("SELECT") and planning in q["sql"] for q in queries) == 1
    snapshot = Run.objects.get(pk=response.json()["id"]).snapshot
    configs = {a["id"]: a["planning_config"] for a in snapshot["agents"]}
    assert configs[planner.pk]["max_steps"] == 7 and configs[plain.pk] is None
    outputs = response.json()["task_outputs"]
    assert [(t["task_id"], t["name"], t["status"]) for t in outputs] == [
        (r.task_id_snapshot, r.name, "waiting")
        for r in RunTask.objects.filter(run_id=response.json()["id"]).order_by("order")
    ]


def test_a_kickoff_without_a_plan_drafts_one_inside_the_run(
    client, builder, crew, django_capture_on_commit_callbacks
):
    run = run_to_the_end(client, builder, crew, django_capture_on_commit_callbacks)

    assert run["status"] == "succeeded", run["error"]
    events = types(client.get(f"/runs/{run['id']}/events", user=builder).json()["items"])
    assert events.index("crew_plan.started") < events.index("crew_plan.approved")
    assert run["plan_id"] is not None and run["plan_version"] == 1


def test_a_kickoff_names_a_missing_input(client, builder, crew):
    assert_invalid(kickoff(client, builder, crew, inputs={}), "inputs.topic")
    assert not Run.objects.exists()


def test_a_kickoff_with_a_plan_that_is_not_usable_is_refused_on_plan_id(
    client, builder, other_builder, crew, django_capture_on_commit_callbacks
):
    draft = draft_plan(client, builder, crew, django_capture_on_commit_callbacks)
    other_crew = private_crew(builder, name="Other")
    foreign = approve(
        client,
        builder,
        draft_plan(client, builder, other_crew, django_capture_on_commit_callbacks)["id"],
    )
    theirs = private_crew(other_builder, name="Theirs")
    hidden = Plan.objects.create(
        crew=theirs, status=Plan.Status.APPROVED, version=1, approved_version=1
    )

    for plan_id in (draft["id"], foreign["id"], hidden.pk, 999_999):
        assert_invalid(kickoff(client, builder, crew, plan_id=plan_id), "plan_id")
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"inputs": "tides"}, "inputs"),
        ({"inputs": {"topic": "x"}, "plan_id": 0}, "plan_id"),
        ({"inputs": {"topic": "x"}, "review_plan": "maybe"}, "review_plan"),
        ({"inputs": {"topic": "x"}, "planid": 1}, "planid"),
    ],
)
def test_a_kickoff_body_of_the_wrong_shape_is_refused(client, builder, crew, body, field):
    response = client.post(f"/crews/{crew.pk}/kickoff", json=body, user=builder)

    assert_invalid(response, field)


def test_kickoffs_beyond_the_rate_limit_are_429(client, builder, crew, settings):
    settings.PLANNER_KICKOFF_RATE_PER_MINUTE = 1
    assert kickoff(client, builder, crew).status_code == 202

    assert_error(kickoff(client, builder, crew), 429, "rate_limited")
    assert Run.objects.count() == 1


def test_an_agent_is_kicked_off_alone(
    client, builder, demo_crew, django_capture_on_commit_callbacks
):
    agent = Agent.objects.get(owner=builder, name="Trip planner")

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/agents/{agent.pk}/kickoff", json={"message": "Plan a day in Lisbon"}, user=builder
        )

    assert response.status_code == 202, response.content
    body = response.json()
    assert (body["crew_id"], body["agent_id"], body["task_outputs"]) == (None, agent.pk, [])
    assert body["message"] == "Plan a day in Lisbon"
    run = client.get(f"/runs/{body['id']}", user=builder).json()
    assert run["status"] == "succeeded" and run["output"], run["error"]


def test_an_agent_kickoff_needs_a_message(client, builder, demo_crew):
    agent = Agent.objects.get(owner=builder, name="Trip planner")

    assert_invalid(
        client.post(f"/agents/{agent.pk}/kickoff", json={"message": " "}, user=builder), "message"
    )
    assert_invalid(client.post(f"/agents/{agent.pk}/kickoff", json={}, user=builder), "message")


# Reading ---------------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_and_filtered(client, builder, crew, demo_crew):
    first = kickoff(client, builder, crew).json()
    second = kickoff(client, builder, demo_crew).json()
    client.post(f"/runs/{first['id']}/cancel", user=builder)

    everything = client.get("/runs", user=builder).json()
    of_crew = client.get(f"/runs?crew_id={crew.pk}", user=builder).json()
    queued = client.get("/runs?status=queued", user=builder).json()
    paged = client.get("/runs?limit=1&offset=1", user=builder).json()

    assert everything["count"] == 2
    assert [r["id"] for r in everything["items"]] == [second["id"], first["id"]]
    assert [r["id"] for r in of_crew["items"]] == [first["id"]]
    assert [r["id"] for r in queued["items"]] == [second["id"]]
    assert [r["id"] for r in paged["items"]] == [first["id"]] and paged["count"] == 2
    assert_invalid(client.get("/runs?status=done", user=builder), "status")
    assert_invalid(client.get("/runs?crew_id=0", user=builder), "crew_id")


def test_events_are_paged_by_seq(client, builder, crew, django_capture_on_commit_callbacks):
    run = run_to_the_end(client, builder, crew, django_capture_on_commit_callbacks)
    everything = client.get(f"/runs/{run['id']}/events", user=builder).json()["items"]

    page = client.get(f"/runs/{run['id']}/events?after=2&limit=3", user=builder).json()
    end = client.get(f"/runs/{run['id']}/events?after={run['last_seq']}", user=builder).json()

    assert page == {"items": everything[2:5], "next_after": 5}
    assert end == {"items": [], "next_after": run["last_seq"]}
    first = everything[0]
    assert set(first) == {"seq", "type", "at", "task_id", "step_id", "data"}
    assert (first["seq"], first["type"]) == (1, "run.queued") and first["at"].endswith("Z")
    started = next(e for e in everything if e["type"] == "task.started")
    assert started["task_id"] == crew.tasks.order_by("order").first().pk
    assert_invalid(client.get(f"/runs/{run['id']}/events?limit=0", user=builder), "limit")
    assert_invalid(client.get(f"/runs/{run['id']}/events?after=-1", user=builder), "after")


def test_money_is_a_json_number_to_six_decimals(client, builder, crew):
    run = kickoff(client, builder, crew).json()
    Run.objects.filter(pk=run["id"]).update(cost_usd=Decimal("0.001750"))
    Run.objects.get(pk=run["id"]).task_results.filter(order=0).update(cost_usd=Decimal("1.234567"))

    body = client.get(f"/runs/{run['id']}", user=builder).json()

    assert body["usage"]["cost_usd"] == 0.00175
    assert body["task_outputs"][0]["usage"]["cost_usd"] == 1.234567
    raw = client.get(f"/runs/{run['id']}", user=builder).content.decode()
    assert '"cost_usd": 0.00175' in raw


# Stopping --------------------------------------------------------------------------------------


def test_stopping_a_queued_run_ends_it_and_a_finished_run_cannot_be_stopped(client, builder, crew):
    run = kickoff(client, builder, crew).json()

    response = client.post(f"/runs/{run['id']}/cancel", user=builder)

    assert response.status_code == 202, response.content
    assert response.json()["status"] == "cancelled" and response.json()["finished_at"]
    assert_error(client.post(f"/runs/{run['id']}/cancel", user=builder), 409, "finished")


def test_stopping_a_working_run_is_idempotent(client, builder, crew):
    run = working(client, builder, crew)

    first = client.post(f"/runs/{run.pk}/cancel", user=builder)
    second = client.post(f"/runs/{run.pk}/cancel", user=builder)

    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["status"] == second.json()["status"] == "cancelling"
    events = types(client.get(f"/runs/{run.pk}/events", user=builder).json()["items"])
    assert events.count("run.cancelling") == 1


# People's answers ------------------------------------------------------------------------------


def awaiting_approval(client: TestClient, user: Any, crew: Any) -> tuple[Run, Plan]:
    """A working run waiting for a person to approve the plan it drafted: Research a, b; Report c."""
    run = working(client, user, crew)
    research, report = crew.tasks.order_by("order")
    plan = Plan.objects.create(crew=crew, status=Plan.Status.GENERATING, inputs=run.inputs)
    plans.plan_store_draft(
        plan_id=plan.pk, steps={str(research.pk): ["a", "b"], str(report.pk): ["c"]}, usage={},
        task_ids=[research.pk, report.pk],
    )  # fmt: skip
    runs.run_wait_for_plan_approval(run_id=run.pk, plan=Plan.objects.get(pk=plan.pk))
    return run, plan


def test_a_run_awaiting_approval_shows_its_plan_and_continues_with_the_edited_one(
    client, builder, crew
):
    run, plan = awaiting_approval(client, builder, crew)
    research, _report = crew.tasks.order_by("order")
    shown = client.get(f"/runs/{run.pk}", user=builder).json()
    assert (shown["status"], shown["pending"]["plan_id"]) == ("awaiting_approval", plan.pk)
    draft = client.get(f"/plans/{plan.pk}", user=builder).json()
    a, _b = draft["tasks"][0]["steps"]

    response = client.post(
        f"/runs/{run.pk}/approve-plan",
        json={"plan": {"tasks": [{"task_id": research.pk, "steps": [a, {"text": "new"}]}]}},
        user=builder,
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["status"], body["version"], body["approved_version"]) == (
        plan.pk, "approved", 2, 2,
    )  # fmt: skip
    assert [s["text"] for s in body["tasks"][0]["steps"]] == ["a", "new"]


def test_approving_a_runs_plan_that_changed_since_it_was_reviewed_is_a_conflict(client, builder, crew):
    run, plan = awaiting_approval(client, builder, crew)
    _research, report = crew.tasks.order_by("order")
    reviewed = client.get(f"/plans/{plan.pk}", user=builder).json()  # version 1
    # Meanwhile someone else edits Report in the editor: version 2.
    plans.plan_update(actor=builder, plan=Plan.objects.get(pk=plan.pk), expected_version=1,
                      tasks=[{"task_id": report.pk, "steps": [{"text": "c, checked twice"}]}])

    edit = {"plan": {"tasks": [{"task_id": report.pk, "steps": [{"text": "c"}]}]}}
    stale_edit = client.post(f"/runs/{run.pk}/approve-plan", json=edit, user=builder,
                             headers={"If-Match": str(reviewed["version"])})
    stale_approval = client.post(f"/runs/{run.pk}/approve-plan", user=builder, headers={"If-Match": "1"})

    assert_error(stale_edit, 409, "stale_version")
    assert_error(stale_approval, 409, "stale_version")
    plan.refresh_from_db()
    assert (plan.status, plan.version) == (Plan.Status.DRAFT, 2)  # the other edit is kept
    approved = client.post(f"/runs/{run.pk}/approve-plan", user=builder, headers={"If-Match": '"2"'})
    assert approved.status_code == 200, approved.content
    assert approved.json()["approved_version"] == 2


def test_a_resumed_run_lists_no_question_its_stopped_worker_asked(client, builder, crew):
    run = working(client, builder, crew)
    runs.run_wait_for_approval(run_id=run.pk, approval_id="old", tool="http_get", args={})
    runs.run_finish(run_id=run.pk, status=Run.Status.INTERRUPTED)  # the worker stopped meanwhile
    ToolApproval.objects.create(run=run, approval_id="decided", tool="http_get", status="approved")

    runs.run_resume(actor=builder, run=run)
    runs.run_claim(run_id=run.pk, worker_id="next-worker")

    shown = client.get(f"/runs/{run.pk}", user=builder).json()
    assert shown["pending"]["approvals"] == []
    assert_error(client.post(f"/runs/{run.pk}/approvals/old", json={"approve": True}, user=builder),
                 404, "not_found")
    assert ToolApproval.objects.filter(run=run, approval_id="decided").exists()  # decisions stay


def test_a_run_stopped_after_the_approval_was_read_is_not_approved(builder, crew, client):
    run, plan = awaiting_approval(client, builder, crew)
    read = Run.objects.get(pk=run.pk)  # what the view read: awaiting approval
    runs.run_cancel(actor=builder, run=read)  # then the stop lands

    with pytest.raises(Conflict):
        runs.run_approve_plan(actor=builder, run=read)
    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.DRAFT


def test_approving_the_plan_of_a_run_that_is_not_waiting_is_a_conflict(client, builder, crew):
    run = kickoff(client, builder, crew).json()

    assert_error(client.post(f"/runs/{run['id']}/approve-plan", user=builder), 409, "not_waiting")


def test_a_feedback_request_is_shown_and_answered_once(client, builder, crew):
    run = working(client, builder, crew)
    task = crew.tasks.order_by("order").first()
    runs.run_wait_for_feedback(run_id=run.pk, task_key=str(task.pk), answer="My draft")
    pending = client.get(f"/runs/{run.pk}", user=builder).json()["pending"]["feedback"]
    assert (pending["task_id"], pending["answer"], pending["status"]) == (
        task.pk,
        "My draft",
        "pending",
    )

    response = client.post(f"/runs/{run.pk}/feedback", json={"text": " Shorter "}, user=builder)

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["text"]) == ("answered", "Shorter")
    assert FeedbackRequest.objects.get().answered_by == builder
    assert_error(client.post(f"/runs/{run.pk}/feedback", json={}, user=builder), 409, "not_waiting")


def test_feedback_to_a_run_that_is_not_waiting_is_a_conflict(client, builder, crew):
    run = kickoff(client, builder, crew).json()

    response = client.post(f"/runs/{run['id']}/feedback", json={"text": ""}, user=builder)

    assert_error(response, 409, "not_waiting")


def test_a_stopped_run_takes_no_more_answers(client, builder, crew):
    run = working(client, builder, crew)
    runs.run_wait_for_feedback(run_id=run.pk, task_key="1", answer="My draft")
    runs.run_wait_for_approval(run_id=run.pk, approval_id="call-1", tool="calculator", args={})
    assert client.post(f"/runs/{run.pk}/cancel", user=builder).json()["status"] == "cancelling"

    feedback = client.post(f"/runs/{run.pk}/feedback", json={"text": "x"}, user=builder)
    decision = client.post(f"/runs/{run.pk}/approvals/call-1", json={"approve": True}, user=builder)

    assert_error(feedback, 409, "not_waiting")
    assert_error(decision, 409, "not_waiting")
    assert FeedbackRequest.objects.get().status == FeedbackRequest.Status.PENDING
    pending = client.get(f"/runs/{run.pk}", user=builder).json()["pending"]
    assert pending == {"plan_id": None, "feedback": None, "approvals": []}


def test_a_tool_call_waiting_for_approval_is_shown_and_decided_once(client, builder, crew):
    run = working(client, builder, crew)
    runs.run_wait_for_approval(
        run_id=run.pk, approval_id="call-1", tool="calculator", args={"expression": "2+2"}
    )
    pending = client.get(f"/runs/{run.pk}", user=builder).json()["pending"]["approvals"]
    assert [(a["approval_id"], a["tool"], a["args"]) for a in pending] == [
        ("call-1", "calculator", {"expression": "2+2"})
    ]
    path = f"/runs/{run.pk}/approvals/call-1"

    response = client.post(path, json={"approve": False, "note": "Not now"}, user=builder)

    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["note"]) == ("denied", "Not now")
    assert ToolApproval.objects.get().decided_by == builder
    assert_error(client.post(path, json={"approve": True}, user=builder), 409, "already_decided")
    assert client.get(f"/runs/{run.pk}", user=builder).json()["pending"]["approvals"] == []
    assert_error(
        client.post(f"/runs/{run.pk}/approvals/call-9", json={"approve": True}, user=builder), 404
    )
    assert_invalid(client.post(path, json={}, user=builder), "approve")


# Resume and re-run -----------------------------------------------------------------------------


def test_an_interrupted_run_resumes_and_others_do_not(
    client, builder, crew, django_capture_on_commit_callbacks
):
    run = working(client, builder, crew)
    runs.run_finish(run_id=run.pk, status=Run.Status.INTERRUPTED)

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{run.pk}/resume", user=builder)

    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    finished = client.get(f"/runs/{run.pk}", user=builder).json()
    assert finished["status"] == "succeeded", finished["error"]
    assert_error(client.post(f"/runs/{run.pk}/resume", user=builder), 409, "not_interrupted")


def test_a_rerun_is_a_new_run_with_the_same_inputs_and_plan(
    client, builder, crew, approved_plan, django_capture_on_commit_callbacks
):
    run = run_to_the_end(
        client, builder, crew, django_capture_on_commit_callbacks, plan_id=approved_plan["id"]
    )
    report = crew.tasks.order_by("order").last()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/runs/{run['id']}/rerun", json={"from_task_id": report.pk}, user=builder
        )

    assert response.status_code == 202, response.content
    again = client.get(f"/runs/{response.json()['id']}", user=builder).json()
    assert again["id"] != run["id"] and again["rerun_of_id"] == run["id"]
    assert (again["inputs"], again["plan_id"], again["plan_version"]) == (
        run["inputs"], run["plan_id"], run["plan_version"],
    )  # fmt: skip
    assert again["status"] == "succeeded", again["error"]
    assert again["task_outputs"][0]["output"] == run["task_outputs"][0]["output"]  # reused
    assert again["task_outputs"][0]["usage"]["llm_calls"] == 0
    assert again["usage"]["llm_calls"] == again["task_outputs"][1]["usage"]["llm_calls"] > 0


def test_a_rerun_follows_the_runs_plan_version_even_after_the_plan_changed(
    client, builder, crew, approved_plan, django_capture_on_commit_callbacks
):
    run = run_to_the_end(
        client, builder, crew, django_capture_on_commit_callbacks, plan_id=approved_plan["id"]
    )
    task = crew.tasks.order_by("order").first()
    edit = {"tasks": [{"task_id": task.pk, "steps": [{"text": "Something else"}]}]}
    client.put(f"/plans/{approved_plan['id']}", json=edit, headers={"If-Match": "1"}, user=builder)
    assert client.get(f"/plans/{approved_plan['id']}", user=builder).json()["status"] == "draft"

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/runs/{run['id']}/rerun", json={}, user=builder)

    assert response.status_code == 202, response.content
    assert (response.json()["plan_id"], response.json()["plan_version"]) == (approved_plan["id"], 1)
    events = client.get(f"/runs/{response.json()['id']}/events", user=builder).json()["items"]
    assert "crew_plan.started" not in types(events)
    assert next(e for e in events if e["type"] == "crew_plan.approved")["data"]["version"] == 1
    assert types(events)[-1] == "run.succeeded"


def test_a_rerun_needs_no_body_and_refuses_a_task_that_was_not_in_the_run(client, builder, crew):
    run = kickoff(client, builder, crew).json()

    assert_invalid(
        client.post(f"/runs/{run['id']}/rerun", json={"from_task_id": 999}, user=builder),
        "from_task_id",
    )
    response = client.post(f"/runs/{run['id']}/rerun", user=builder)
    assert response.status_code == 202 and response.json()["rerun_of_id"] == run["id"]


# Who may do what -------------------------------------------------------------------------------


def test_another_users_run_is_404_on_every_operation(client, builder, other_builder, crew):
    run = working(client, builder, crew)
    runs.run_wait_for_approval(run_id=run.pk, approval_id="call-1", tool="calculator", args={})
    rid = run.pk
    agent = crew.agents.get()

    responses = [
        kickoff(client, other_builder, crew),
        client.post(f"/agents/{agent.pk}/kickoff", json={"message": "Hi"}, user=other_builder),
        client.get(f"/runs/{rid}", user=other_builder),
        client.get(f"/runs/{rid}/events", user=other_builder),
        client.post(f"/runs/{rid}/cancel", user=other_builder),
        client.post(f"/runs/{rid}/approve-plan", user=other_builder),
        client.post(f"/runs/{rid}/feedback", json={"text": "x"}, user=other_builder),
        client.post(f"/runs/{rid}/approvals/call-1", json={"approve": True}, user=other_builder),
        client.post(f"/runs/{rid}/rerun", user=other_builder),
        client.post(f"/runs/{rid}/resume", user=other_builder),
    ]

    for response in responses:
        assert_error(response, 404, "not_found")
    assert client.get("/runs", user=other_builder).json()["count"] == 0
    assert Run.objects.get(pk=rid).status == Run.Status.AWAITING_INPUT
    assert ToolApproval.objects.get().status == ToolApproval.Status.PENDING
    assert Run.objects.count() == 1


def test_a_viewer_reads_a_shared_crews_runs_but_cannot_act_on_them(
    client, builder, viewer, demo_crew
):
    run = kickoff(client, builder, demo_crew).json()
    rid = run["id"]
    agent = demo_crew.agents.first()

    assert client.get(f"/runs/{rid}", user=viewer).status_code == 200
    assert client.get(f"/runs/{rid}/events", user=viewer).json()["items"][0]["type"] == "run.queued"
    assert [r["id"] for r in client.get("/runs", user=viewer).json()["items"]] == [rid]
    writes = [
        kickoff(client, viewer, demo_crew),
        client.post(f"/agents/{agent.pk}/kickoff", json={"message": "Hi"}, user=viewer),
        client.post(f"/runs/{rid}/cancel", user=viewer),
        client.post(f"/runs/{rid}/approve-plan", user=viewer),
        client.post(f"/runs/{rid}/feedback", json={"text": "x"}, user=viewer),
        client.post(f"/runs/{rid}/approvals/call-1", json={"approve": True}, user=viewer),
        client.post(f"/runs/{rid}/rerun", user=viewer),
        client.post(f"/runs/{rid}/resume", user=viewer),
    ]
    for response in writes:
        assert_error(response, 403, "forbidden")
    assert Run.objects.get(pk=rid).status == Run.Status.QUEUED and Run.objects.count() == 1


def test_another_builder_sees_a_shared_crews_run_but_cannot_stop_it(
    client, builder, other_builder, demo_crew
):
    run = kickoff(client, builder, demo_crew).json()

    assert client.get(f"/runs/{run['id']}", user=other_builder).status_code == 200
    assert_error(client.post(f"/runs/{run['id']}/cancel", user=other_builder), 404)


# Through the real URL --------------------------------------------------------------------------


def test_a_token_drafts_approves_runs_and_follows_a_plan_through_the_real_urls(
    builder, crew, django_capture_on_commit_callbacks
):
    _token, raw = token_create(user=builder)
    http = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {raw}")

    def post(path: str, body: Any = None, **extra: Any) -> Any:
        data = json.dumps(body) if body is not None else ""
        return http.post(path, data=data, content_type="application/json", **extra)

    with django_capture_on_commit_callbacks(execute=True):
        drafted = post(f"/api/crews/{crew.pk}/plans", {"inputs": {"topic": "tides"}})
    assert drafted.status_code == 202, drafted.content
    plan_id = drafted.json()["id"]
    plan = http.get(f"/api/plans/{plan_id}")
    assert plan["ETag"] == '"1"'
    task = plan.json()["tasks"][0]
    edited = http.put(
        f"/api/plans/{plan_id}",
        data=json.dumps({"tasks": [{**task, "steps": [*task["steps"], {"text": "Also this"}]}]}),
        content_type="application/json",
        HTTP_IF_MATCH=plan["ETag"],
    )
    assert edited.status_code == 200, edited.content
    assert post(f"/api/plans/{plan_id}/approve", HTTP_IF_MATCH='W/"2"').status_code == 200

    with django_capture_on_commit_callbacks(execute=True):
        started = post(
            f"/api/crews/{crew.pk}/kickoff", {"inputs": {"topic": "tides"}, "plan_id": plan_id}
        )

    assert started.status_code == 202, started.content
    run = http.get(f"/api/runs/{started.json()['id']}").json()
    assert (run["status"], run["plan_version"]) == ("succeeded", 2)
    events = http.get(f"/api/runs/{run['id']}/events?after=0").json()["items"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert "crew_plan.approved" in types(events) and "crew_plan.started" not in types(events)
    assert post(f"/api/runs/{run['id']}/cancel").status_code == 409
