"""Plan versions stay as approved: a deleted task keeps its steps in them, a run says which of its
tasks changed since the approval, and a regeneration never writes a pinned step twice."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from ninja.testing import TestClient

from agents.models import LLM
from crews import plans, runner, runs, selectors, services
from crews.models import Crew, Plan, PlanStep, PlanVersion
from crews.plan_diff import diff_versions
from planner_site.api import api
from tests.conftest import signed_in
from tests.crews.run_helpers import make_agent, make_crew, scripted

pytestmark = pytest.mark.django_db


def drafted_plan(builder: Any, crew: Any) -> Plan:
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"})
    runner.generate_plan(plan.pk)  # the background task, in the foreground (demo model)
    plan.refresh_from_db()
    assert plan.status == Plan.Status.DRAFT
    return plan


# An approved version is immutable ----------------------------------------------------------------


def test_deleting_a_task_keeps_its_steps_in_the_approved_version_a_queued_run_follows(builder):
    crew = make_crew(builder, tasks=("Research", "Report"))
    research, report = crew.tasks.order_by("order")
    report_id = report.pk
    plan = plans.plan_approve(actor=builder, plan=drafted_plan(builder, crew))
    approved = plans.steps_by_task_key(plan, plan.approved_version)
    assert approved[str(report_id)]
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)

    services.task_delete(actor=builder, task=report)

    # The queued run still runs Report (its snapshot has it), with the steps a person approved.
    assert [t["id"] for t in run.snapshot["tasks"]] == [research.pk, report_id]
    assert plans.steps_by_task_key(plan, run.plan_version) == approved
    kept = PlanStep.objects.filter(version__plan=plan, task_id_snapshot=report_id)
    assert kept.exists() and not kept.filter(task__isnull=False).exists()
    # The next version is for the crew as it is now: the deleted task's steps are not carried on.
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version, tasks=[])
    assert set(plans.version_steps(plan)) == {research.pk}
    assert set(plans.version_steps(plan, 1)) == {research.pk, report_id}


def test_a_run_names_its_tasks_that_changed_after_its_plan_was_approved(builder):
    crew = make_crew(builder, tasks=("Research", "Report", "Summary"))
    research, report, summary = crew.tasks.order_by("order")
    summary_id = summary.pk
    plan = plans.plan_approve(actor=builder, plan=drafted_plan(builder, crew))
    services.task_update(actor=builder, task=research, description="Research it all again about {topic}")
    services.task_update(actor=builder, task=report, agent=make_agent(builder, "Editor"),
                         expected_output="A shorter report")
    services.task_delete(actor=builder, task=summary)
    extra = services.task_create(actor=builder, crew=crew, name="Review", description="Review it",
                                 expected_output="Notes", agent=research.agent)

    crew = Crew.objects.get(pk=crew.pk)  # as a request reads it: with its tasks as they are now
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)
    body = TestClient(api).get(f"/runs/{run.pk}", user=builder).json()

    assert body["plan_changes"] == [
        {"task_id": research.pk, "name": "Research", "change": "description"},
        {"task_id": report.pk, "name": "Report", "change": "expected_output"},
        {"task_id": report.pk, "name": "Report", "change": "agent"},
        {"task_id": extra.pk, "name": "Review", "change": "added"},
        {"task_id": summary_id, "name": "Summary", "change": "deleted"},
    ]
    listed = TestClient(api).get("/runs", user=builder).json()["items"]
    assert [r["plan_changes"] for r in listed] == [body["plan_changes"]]
    # The run page says it plainly.
    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert "Tasks changed after the plan was approved:" in page
    assert "Summary was deleted: it does not run, and its approved steps with it." in page
    # Edits after the kickoff change nothing for the run: it runs its tasks as they were then.
    services.task_update(actor=builder, task=extra, description="Something else")
    assert selectors.run_plan_changes(run=run) == body["plan_changes"]


def test_a_run_without_changes_or_without_a_plan_has_none(builder):
    crew = make_crew(builder)
    plan = plans.plan_approve(actor=builder, plan=drafted_plan(builder, crew))

    with_plan = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)
    without = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    assert selectors.run_plan_changes(run=with_plan) == []
    assert selectors.run_plan_changes(run=without) == []


def test_the_plan_changes_partial_says_what_each_change_means_in_both_languages():
    from django.utils import translation

    changes = [
        {"task_id": 1, "name": "Research <b>", "change": "description"},
        {"task_id": 2, "name": "Summary", "change": "deleted"},
        {"task_id": 3, "name": "Review", "change": "added"},
    ]

    html = render_to_string("crews/_plan_changes.html", {"plan_changes": changes})
    with translation.override("pt-br"):
        portuguese = render_to_string("crews/_plan_changes.html", {"plan_changes": changes})

    assert "Tasks changed after the plan was approved:" in html
    assert "Research &lt;b&gt;: its description changed; the approved steps were written for the old one." in html
    assert "Summary was deleted: it does not run, and its approved steps with it." in html
    assert "Review was added: it runs without approved steps." in html
    assert "Tarefas alteradas depois da aprovação do plano:" in portuguese
    assert "A tarefa Summary foi excluída: ela não é executada, nem as suas etapas aprovadas." in portuguese
    assert render_to_string("crews/_plan_changes.html", {"plan_changes": []}).strip() == ""


# Regenerating with pinned steps ------------------------------------------------------------------


def regenerate(builder: Any, plan: Plan, task: Any, monkeypatch: Any, texts: list[str]) -> Plan:
    """Regenerate ``task`` in the foreground; the planner (text mode) answers ``texts``."""
    LLM.objects.filter(is_default=True).update(supports_tools=False)
    scripted(monkeypatch, [json.dumps({"plans": [{"task_number": 1, "steps": texts}]})])
    runner.regenerate_plan(plan.pk, task.pk, "", builder.pk)
    plan.refresh_from_db()
    return plan


def test_a_regeneration_that_repeats_a_pinned_step_keeps_it_once(builder, monkeypatch):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = drafted_plan(builder, crew)
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version, tasks=[
        {"task_id": research.pk, "steps": [{"text": "Read the tide tables"},
                                           {"text": "Check the harbour gauge", "pinned": True}]},
    ])
    pinned = plans.current_steps(plan)[research.pk][1]

    # The planner was shown the pinned step and writes it out again, spacing and case aside.
    plan = regenerate(builder, plan, research, monkeypatch,
                      ["Read the tables again", "check the  harbour gauge", "Write it down"])

    now = plans.current_steps(plan)[research.pk]
    assert [(s.text, s.pinned) for s in now] == [
        ("Read the tables again", False), ("Check the harbour gauge", True), ("Write it down", False),
    ]
    assert now[1].uid == pinned.uid


def test_the_diff_shows_a_step_a_regeneration_wrote_again_as_unchanged(builder, monkeypatch):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = drafted_plan(builder, crew)
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version, tasks=[
        {"task_id": research.pk, "steps": [{"text": "Read the tide tables"}, {"text": "Compare the years"}]},
    ])

    plan = regenerate(builder, plan, research, monkeypatch, ["Read the tide tables", "Compare the decades"])

    before, after = plans.version_steps(plan, plan.version - 1), plans.version_steps(plan)
    assert before[research.pk][0][0] != after[research.pk][0][0]  # a new step, with the same text
    diff = diff_versions(before, after, [research.pk])
    task = next(t for t in diff.tasks if t.task_id == research.pk)
    assert [(s.text, s.status, s.same) for s in task.steps] == [
        ("Read the tide tables", "kept", True),
        ("Compare the years", "removed", False),
        ("Compare the decades", "added", False),
    ]
    assert diff.counts == {"added": 1, "removed": 1, "changed": 0, "moved": 0}
    page = signed_in(builder).get(reverse("crews:plan-diff", args=[plan.pk]), HTTP_HX_REQUEST="true")
    page = page.content.decode()
    assert "1 added" in page and "1 removed" in page
    assert PlanVersion.objects.filter(plan=plan).count() == plan.version
