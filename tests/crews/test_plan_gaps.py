"""Plans are checked before they are offered (issue #14). A placeholder step (the prompt's own
``"..."``, a bare "Step 1") is junk a model would be sent: it is flagged at its task and blocks
Approve (page and API: 409 ``plan_incomplete``). A task the planner left without steps is no block:
its agent plans it when it runs (ENGINE.md §2b), which the page says at the task and beside
Approve. Only the plan's own tasks count, not a task added to the crew since. The plan is drafted
by real litellm against the fake server acting as llama-cpp-python's server (it refuses a
json_schema response format)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape
from ninja.testing import TestClient

from crews import plans
from crews.bridge import crew_snapshot
from crews.models import Plan, Run, Task
from planner_site.api import api
from tests.conftest import signed_in
from tests.crews.run_helpers import fake_llm, make_crew
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import answers, forms_sent, refuses_json_schema

pytestmark = pytest.mark.django_db

# A weak model's plan: real steps for task 1, the prompt's own example for task 2.
WEAK_PLAN = {"plans": [{"task_number": 1, "steps": ["Read the tide tables"]},
                       {"task_number": 2, "steps": ["...", "..."]}]}
NO_STEPS = "The planner wrote no steps for task 2; it will run without a plan."


@pytest.fixture
def drafted(builder: Any, fake_llm_server: FakeLLMServer, django_capture_on_commit_callbacks: Any) -> Plan:
    """Draft a plan from the crew page, with a local model that refuses json_schema."""
    fake_llm_server.default = refuses_json_schema(answers(WEAK_PLAN))
    llm = fake_llm(fake_llm_server)
    llm.supports_tools = False
    llm.save()
    crew = make_crew(builder, name="Tides", planning=True, planning_llm=llm)
    client = signed_in(builder)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("crews:crew-kickoff", args=[crew.pk]),
                               {"action": "draft", "inputs-topic": "tides"})
    assert response.status_code == 302
    plan = Plan.objects.get(crew=crew)
    assert plan.status == Plan.Status.DRAFT, plan.error
    assert forms_sent(fake_llm_server) == ["json_schema", "json_object"]
    return plan


def report_task(plan: Plan) -> Any:
    return plan.crew.tasks.get(name="Report")


UNPLANNED = "Task 2 (Report) has no steps: its agent will plan it when it runs."


def test_the_planners_warnings_reach_the_plan_page_at_the_task_they_are_about(
    builder: Any, drafted: Plan
) -> None:
    html = signed_in(builder).get(reverse("crews:plan-detail", args=[drafted.pk])).content.decode()

    task = report_task(drafted)
    gap = html.split(f'id="plan-task-{task.pk}-gap"', 1)[1].split("</p>", 1)[0]
    assert UNPLANNED in gap
    assert escape(NO_STEPS) in gap and escape('placeholder step(s) for task 2 (like "...")') in gap
    research = drafted.crew.tasks.get(name="Research")
    assert f'id="plan-task-{research.pk}-gap"' not in html
    # A task without steps is no block: Approve & run stays, and says beside it what will happen.
    button = html.split('id="plan-approve"', 1)[1].split(">", 1)[0]
    assert "disabled" not in button and "plan-unplanned" in button
    beside = html.split('id="plan-unplanned"', 1)[1].split("</div>", 1)[0]
    assert UNPLANNED in beside and f'href="#plan-task-{task.pk}"' in beside
    assert 'id="plan-gaps"' not in html


def test_approving_on_the_page_with_a_task_without_steps_starts_the_run(builder: Any, drafted: Plan) -> None:
    response = signed_in(builder).post(reverse("crews:plan-approve", args=[drafted.pk]), {"version": drafted.version})

    assert response.status_code == 302
    drafted.refresh_from_db()
    assert drafted.status == Plan.Status.APPROVED and Run.objects.filter(plan=drafted).exists()


def placeholder(plan: Plan, text: str = "...") -> Plan:
    task = report_task(plan)
    return plans.plan_update(actor=plan.created_by, plan=plan, expected_version=plan.version,
                             tasks=[{"task_id": task.pk, "steps": [{"text": "Write it"}, {"text": text}]}])


def test_a_placeholder_step_holds_approve_back_on_the_page(builder: Any, drafted: Plan) -> None:
    placeholder(drafted, "Step 1")

    html = signed_in(builder).get(reverse("crews:plan-detail", args=[drafted.pk])).content.decode()

    task = report_task(drafted)
    gap = html.split(f'id="plan-task-{task.pk}-gap"', 1)[1].split("</p>", 1)[0]
    assert escape("Task 2 (Report) has a placeholder step (“Step 1”), not a real one.") in gap
    button = html.split('id="plan-approve"', 1)[1].split(">", 1)[0]
    assert "disabled" in button and "plan-gaps" in button
    assert 'id="plan-gaps"' in html and f'href="#plan-task-{task.pk}"' in html
    assert 'id="plan-unplanned"' not in html


def test_approving_a_placeholder_on_the_page_refuses_and_names_the_task(builder: Any, drafted: Plan) -> None:
    drafted = placeholder(drafted)

    response = signed_in(builder).post(reverse("crews:plan-approve", args=[drafted.pk]), {"version": drafted.version})

    assert response.status_code == 409
    assert escape("Task 2 (Report) has a placeholder step (“...”)") in response.content.decode()
    drafted.refresh_from_db()
    assert drafted.status == Plan.Status.DRAFT and not Run.objects.exists()


def test_the_apis_approve_answers_409_only_for_placeholder_steps(builder: Any, drafted: Plan) -> None:
    client = TestClient(api)
    task = report_task(drafted)
    shown = client.get(f"/plans/{drafted.pk}", user=builder).json()
    assert {"task_id": task.pk, "message": NO_STEPS} in shown["warnings"]

    # A person's placeholder is junk a model would be sent: refused, naming the task.
    edit = {"tasks": [{"task_id": task.pk, "steps": [{"text": "..."}]}]}
    assert client.put(f"/plans/{drafted.pk}", json=edit, headers={"If-Match": "1"}, user=builder).status_code == 200
    refused = client.post(f"/plans/{drafted.pk}/approve", user=builder)
    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "plan_incomplete" and "placeholder step (“...”)" in body["detail"]
    assert body["errors"][0]["field"] == f"tasks.{task.pk}"

    # No steps at all: its agent plans it when it runs.
    edit = {"tasks": [{"task_id": task.pk, "steps": []}]}
    assert client.put(f"/plans/{drafted.pk}", json=edit, headers={"If-Match": "2"}, user=builder).status_code == 200
    approved = client.post(f"/plans/{drafted.pk}/approve", user=builder)
    assert approved.status_code == 200 and approved.json()["status"] == "approved"


def test_a_task_with_real_steps_is_no_longer_flagged(builder: Any, drafted: Plan) -> None:
    task = report_task(drafted)
    plans.plan_update(actor=builder, plan=drafted, expected_version=1,
                      tasks=[{"task_id": task.pk, "steps": [{"text": "Write the tide report"}]}])

    html = signed_in(builder).get(reverse("crews:plan-detail", args=[drafted.pk])).content.decode()

    assert "-gap" not in html and NO_STEPS not in html and 'id="plan-unplanned"' not in html
    assert "disabled" not in html.split('id="plan-approve"', 1)[1].split(">", 1)[0]


def test_htmx_approve_answers_the_editor_with_what_is_missing(builder: Any, drafted: Plan) -> None:
    drafted = placeholder(drafted)
    client: Client = signed_in(builder)

    response = client.post(reverse("crews:plan-approve", args=[drafted.pk]), {"version": drafted.version},
                           HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    assert escape("Task 2 (Report) has a placeholder step (“...”)") in response.content.decode()
    assert not Run.objects.exists()


def add_task(plan: Plan, name: str = "Review") -> Task:
    """A builder adds a task to the crew after the plan was written."""
    return Task.objects.create(crew=plan.crew, order=9, name=name, agent=report_task(plan).agent,
                               description="Do the Review work", expected_output="A review")


def test_a_task_added_to_the_crew_since_is_not_the_plans(builder: Any, drafted: Plan) -> None:
    drafted = placeholder(drafted, "Write the tide report")  # every task of the plan has real steps
    added = add_task(drafted)

    html = signed_in(builder).get(reverse("crews:plan-detail", args=[drafted.pk])).content.decode()
    assert f'id="plan-task-{added.pk}-gap"' not in html and 'id="plan-unplanned"' not in html
    approved = TestClient(api).post(f"/plans/{drafted.pk}/approve", user=builder)
    assert approved.status_code == 200, approved.json()


def test_a_run_waiting_for_approval_is_approved_after_a_task_was_added_to_the_crew(
    builder: Any, drafted: Plan
) -> None:
    drafted = placeholder(drafted, "Write the tide report")
    run = Run.objects.create(crew=drafted.crew, created_by=builder, inputs=drafted.inputs, plan=drafted,
                             planning_plan=drafted, status=Run.Status.AWAITING_APPROVAL,
                             snapshot=crew_snapshot(drafted.crew))
    added = add_task(drafted)
    # An edit made while the run waits writes a version that knows the new task; the run's own
    # snapshot says which tasks the plan covers.
    drafted = plans.plan_update(actor=builder, plan=drafted, expected_version=drafted.version,
                                tasks=[{"task_id": report_task(drafted).pk, "steps": [{"text": "Write it up"}]}])
    assert plans.plan_tasks(drafted) == [(t["id"], t["name"]) for t in run.snapshot["tasks"]]
    assert added.pk not in plans.plan_gaps(drafted).unplanned

    approved = TestClient(api).post(f"/runs/{run.pk}/approve-plan", user=builder)

    assert approved.status_code == 200, approved.json()
    assert approved.json()["status"] == "approved"
