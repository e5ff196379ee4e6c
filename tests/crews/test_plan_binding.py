"""An approved plan binds every agent kind (ENGINE.md §2b), through the API, the worker and real
litellm against the fake OpenAI-compatible server: no agent-planning request, each approved step
carried out by requests whose instruction is that step's text, per-step events in order, and the
crew's ``on_step_failure`` (continue, ask, adapt) as written."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ninja.testing import TestClient

from crews import plans, runner, runs
from crews.models import Plan, Run, RunEvent
from planner_site.api import api
from tests.crews.run_helpers import (
    Background,
    fake_llm,
    make_agent,
    make_crew,
    stop_leftover_runs,  # noqa: F401 - a fixture
    wait_for_status,
)
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")

CURRENT_STEP = re.compile(r"## Your current step\nStep \d+: (.+)")
AGENT_PLANNING = ("Write a plan to complete this task", "Create a step-by-step plan for this task")
REVIEW = '{"success": true, "learned": "", "plan_valid": true, "refinements": [], "needs_replan": false, "replan_reason": "", "goal_achieved": false}'  # noqa: E501


class Model:
    """The fake model: does the step its request names (failing those in ``fail``), approves
    every review, and answers a replan with ``new_steps``."""

    def __init__(self, *, fail: tuple[str, ...] = (), new_steps: tuple[str, ...] = ("Recover another way",)) -> None:
        self.fail = fail
        self.new_steps = new_steps

    def __call__(self, request: RecordedRequest) -> Reply:
        text = request.last_user_text()
        if "You are reviewing one step of a plan" in text:
            return Reply.text(REVIEW)
        if "## Why a new plan is needed" in text:
            steps = [{"number": i, "description": s, "tool": None, "depends_on": []}
                     for i, s in enumerate(self.new_steps, start=1)]
            return Reply.tool_call("create_plan", {"plan": "recover", "steps": steps, "ready": True})
        step = current_step(request)
        if step is not None and any(f in step for f in self.fail):
            return Reply.error(400, "this step cannot be done")
        return Reply.text(f"Final Answer: done: {step or 'the task'}")


def current_step(request: RecordedRequest) -> str | None:
    match = CURRENT_STEP.search(request.last_user_text())
    return match.group(1).strip() if match else None


def step_requests(server: FakeLLMServer) -> list[str]:
    return [s for s in (current_step(r) for r in server.requests) if s is not None]


def events(run: Run, type_: str) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type=type_).order_by("seq"))


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def approved_plan(client: TestClient, user: Any, crew: Any, steps: list[str]) -> Plan:
    """A drafted plan whose one task a person then edits through the API and approves."""
    (task,) = crew.tasks.all()
    plan = plans.plan_draft(actor=user, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    plans.plan_store_draft(plan_id=plan.pk, steps={str(task.pk): ["drafted step"]}, usage={}, task_ids=[task.pk])
    edit = {"tasks": [{"task_id": task.pk, "steps": [{"text": s} for s in steps]}]}
    response = client.put(f"/plans/{plan.pk}", json=edit, headers={"If-Match": "1"}, user=user)
    assert response.status_code == 200, response.content
    response = client.post(f"/plans/{plan.pk}/approve", user=user)
    assert response.status_code == 200, response.content
    return Plan.objects.get(pk=plan.pk)


def kickoff(client: TestClient, user: Any, crew: Any, plan: Plan, capture: Any) -> Run:
    with capture(execute=True):  # the tests' task backend runs the worker on commit
        response = client.post(f"/crews/{crew.pk}/kickoff", json={"inputs": {"topic": "tides"}, "plan_id": plan.pk},
                               user=user)
    assert response.status_code == 202, response.content
    return Run.objects.get(pk=response.json()["id"])


def bound_crew(user: Any, server: FakeLLMServer, kind: str, **crew_fields: Any) -> Any:
    llm = fake_llm(server)
    agent_fields: dict[str, Any] = {
        "react": {},
        "plan_and_act": {"planning": True},
        "plan_execute": {"agent_type": "plan_execute"},
    }[kind]
    agent = make_agent(user, f"{kind} agent", llm=llm, **agent_fields)
    if kind == "plan_and_act":
        from agents.models import PlanningConfig

        PlanningConfig.objects.create(agent=agent, reasoning_effort="medium")
    return make_crew(user, name=f"{kind} crew", tasks=["Research"], agent=agent, planning=True, **crew_fields)


@pytest.mark.parametrize("kind", ["react", "plan_and_act", "plan_execute"])
def test_every_agent_kind_carries_out_the_approved_steps_one_by_one(
    kind, builder, client, fake_llm_server, django_capture_on_commit_callbacks
):
    fake_llm_server.default = Model()
    crew = bound_crew(builder, fake_llm_server, kind)
    edited = ["Read the tide tables for {topic} edited", "Compare spring and neap tides", "Write the tide report"]
    plan = approved_plan(client, builder, crew, edited)

    run = kickoff(client, builder, crew, plan, django_capture_on_commit_callbacks)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    # No agent-planning request: the approved steps are the plan.
    for request in fake_llm_server.requests:
        assert not any(p in request.last_user_text() for p in AGENT_PLANNING)
        assert "create_plan" not in str(request.body.get("tools") or "")
    # Each approved step is the instruction of its own request, in order (text as approved).
    assert step_requests(fake_llm_server) == edited
    # Per-step events under the plan's stable ids, in order.
    uids = list(plan.versions.get(number=plan.approved_version).steps.order_by("order").values_list("uid", flat=True))
    ids = [f"{crew.tasks.get().pk}.p{uid}" for uid in uids]
    assert [e.step_id for e in events(run, "step.started")] == ids
    assert [e.step_id for e in events(run, "step.completed")] == ids
    assert [e.data["outcome"] for e in events(run, "step.completed")] == ["completed"] * 3
    started = [e.seq for e in events(run, "step.started")]
    completed = [e.seq for e in events(run, "step.completed")]
    assert all(s < c for s, c in zip(started, completed, strict=True)) and completed[0] < started[1]
    assert not events(run, "agent_plan.started") and not events(run, "crew_plan.started")


def test_continue_marks_a_failed_step_and_goes_on_without_replanning(
    builder, client, fake_llm_server, django_capture_on_commit_callbacks
):
    fake_llm_server.default = Model(fail=("Compare",))
    crew = bound_crew(builder, fake_llm_server, "react")  # on_step_failure defaults to continue
    plan = approved_plan(client, builder, crew, ["Read the tables", "Compare the tides", "Write the report"])

    run = kickoff(client, builder, crew, plan, django_capture_on_commit_callbacks)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert [e.data["outcome"] for e in events(run, "step.completed")] == ["completed", "failed", "completed"]
    assert step_requests(fake_llm_server) == ["Read the tables", "Compare the tides", "Write the report"]
    assert not events(run, "agent_plan.replanned") and not events(run, "crew_plan.deviated")
    assert not any("## Why a new plan is needed" in r.last_user_text() for r in fake_llm_server.requests)


def test_adapt_replans_after_a_failed_step_and_shows_the_deviation(
    builder, client, fake_llm_server, django_capture_on_commit_callbacks
):
    fake_llm_server.default = Model(fail=("Compare",), new_steps=("Estimate from the moon phase", "Write it up"))
    crew = bound_crew(builder, fake_llm_server, "react", on_step_failure="adapt")
    plan = approved_plan(client, builder, crew, ["Read the tables", "Compare the tides", "Write the report"])

    run = kickoff(client, builder, crew, plan, django_capture_on_commit_callbacks)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert step_requests(fake_llm_server) == [
        "Read the tables", "Compare the tides", "Estimate from the moon phase", "Write it up",
    ]  # fmt: skip
    (deviated,) = events(run, "crew_plan.deviated")
    assert deviated.data["before"] == ["Write the report"]
    assert deviated.data["after"] == ["Estimate from the moon phase", "Write it up"]
    assert (deviated.data["plan_id"], deviated.data["version"]) == (plan.pk, plan.approved_version)
    assert "step 2" in deviated.data["reason"]
    (skipped,) = events(run, "step.skipped")  # the approved step the new plan replaced
    assert skipped.data["reason"] == "replaced by a new plan" and ".p" in skipped.step_id


@pytest.mark.django_db(transaction=True)
def test_ask_pauses_with_the_agents_proposal_and_goes_on_with_what_the_person_approved(
    builder, client, fake_llm_server
):
    fake_llm_server.default = Model(fail=("Compare",), new_steps=("Agent's idea",))
    crew = bound_crew(builder, fake_llm_server, "react", on_step_failure="ask")
    plan = approved_plan(client, builder, crew, ["Read the tables", "Compare the tides", "Write the report"])
    task = crew.tasks.get()
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))

    waiting = wait_for_status(run, Run.Status.AWAITING_APPROVAL, timeout=90)  # litellm may import first
    # The run proposes on a copy of its version: the crew's plan, which others use, is untouched.
    assert Plan.objects.get(pk=plan.pk).status == "approved" and Plan.objects.get(pk=plan.pk).version == plan.version
    own = waiting.planning_plan
    assert own is not None and own.pk != plan.pk and waiting.plan_id == own.pk
    proposal = client.get(f"/plans/{own.pk}", user=builder).json()
    assert proposal["status"] == "draft" and proposal["version"] == 2
    texts = [s["text"] for s in proposal["tasks"][0]["steps"]]
    # The steps completed stay as they ran; the rest (the failed one too) is the proposal.
    assert texts == ["Read the tables", "Agent's idea"]
    (paused,) = events(run, "run.awaiting_approval")
    assert paused.data["kind"] == "deviation" and paused.data["task_id"] == task.pk
    assert (paused.data["plan_id"], paused.data["version"], paused.data["from_version"]) == (own.pk, 2, 1)
    kept = [{"id": s["id"], "text": s["text"]} for s in proposal["tasks"][0]["steps"][:1]]
    edit = {"tasks": [{"task_id": task.pk, "steps": [*kept, {"text": "The person's own fix"}]}]}
    response = client.post(f"/runs/{waiting.pk}/approve-plan", json={"plan": edit},
                           headers={"If-Match": str(proposal["version"])}, user=builder)
    assert response.status_code == 200, response.content
    worker.join(timeout=90)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert step_requests(fake_llm_server) == ["Read the tables", "Compare the tides", "The person's own fix"]
    assert run.plan_version == proposal["version"] + 1  # the version the person approved
    (deviated,) = events(run, "crew_plan.deviated")
    assert deviated.data["before"] == ["Write the report"] and deviated.data["after"] == ["The person's own fix"]
    assert deviated.data["approved_by_person"] is True and deviated.data["task_id"] == task.pk
    assert (deviated.data["plan_id"], deviated.data["from_version"], deviated.data["version"]) == (own.pk, 1, 3)
    # A new kickoff with the crew's plan still runs its approved steps.
    assert Plan.objects.get(pk=plan.pk).status == "approved"
    # The run page: the person's step joined the approved plan and is done; nothing is left "to do".
    from crews.run_view import RunView

    (view_task,) = RunView.build(run).tasks
    (segment,) = [s for s in view_task.plan if getattr(s, "status", "") == "approved"]
    assert [(s.description, s.status) for s in segment.steps] == [
        ("Read the tables", "completed"), ("Compare the tides", "failed"), ("Write the report", "skipped"),
        ("The person's own fix", "completed"),
    ]  # fmt: skip
    assert all(s.status != "pending" for s in view_task.steps)
    last = events(run, "step.started")[-1]
    assert last.step_id.startswith(f"{task.pk}.p")  # a step of the approved version, by its stable id


@pytest.mark.django_db(transaction=True)
def test_ask_from_the_pages_the_run_notice_leads_to_the_editor_whose_approval_lets_the_run_go_on(
    builder, client, fake_llm_server
):
    from django.urls import reverse

    from tests.conftest import signed_in

    fake_llm_server.default = Model(fail=("Compare",), new_steps=("Agent's idea",))
    crew = bound_crew(builder, fake_llm_server, "react", on_step_failure="ask")
    plan = approved_plan(client, builder, crew, ["Read the tables", "Compare the tides", "Write the report"])
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))
    own = wait_for_status(run, Run.Status.AWAITING_APPROVAL, timeout=90).planning_plan
    browser = signed_in(builder)

    page = browser.get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    editor = browser.get(reverse("crews:plan-detail", args=[own.pk])).content.decode()
    response = browser.post(reverse("crews:plan-approve", args=[own.pk]), {"version": own.version})
    worker.join(timeout=90)

    assert "the agent proposes new steps" in page and "See what changed" in page
    assert "Approve & continue" in editor and "Agent&#x27;s idea" in editor
    assert response.status_code == 302 and response["Location"] == reverse("crews:run-detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert step_requests(fake_llm_server) == ["Read the tables", "Compare the tides", "Agent's idea"]
    assert Plan.objects.filter(crew=crew, status="approved").count() == 2  # the crew's and the run's own
