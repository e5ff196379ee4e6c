"""Plan pages without a browser: the kickoff panel, the editor's fragments and their errors,
Approve & run, and the version diff.

htmx requests (HTTP_HX_REQUEST) get 200 with the fragment to swap, errors included (retargeted
onto the form that caused them); plain forms get the page with the message and 409/422.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils.html import escape

from crews import plans, runner
from crews.models import Crew, Plan, PlanStep, PlanVersion, Run, Task
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


# Helpers -------------------------------------------------------------------------------------


def private_crew(owner: Any, name: str = "Tides") -> Crew:
    """A planning crew only ``owner`` sees: Research → Report about ``{topic}``, no defaults."""
    from agents.models import Agent

    agent = Agent.objects.create(owner=owner, name=f"{name} writer", role="Writer on {topic}", goal="Write")
    crew = Crew.objects.create(owner=owner, name=name, planning=True)
    crew.agents.set([agent])
    for order, task in enumerate(["Research", "Report"]):
        Task.objects.create(crew=crew, order=order, name=task, agent=agent,
                            description=f"Do the {task} work about {{topic}}", expected_output=f"The {task}")
    return crew


def draft(client: Client, crew: Crew, capture: Any, **inputs: str) -> Plan:
    """Press Draft plan; the background drafting (demo model) runs when the request commits."""
    data = {"action": "draft", **{f"inputs-{k}": v for k, v in inputs.items()}}
    with capture(execute=True):
        response = client.post(reverse("crews:crew-kickoff", args=[crew.pk]), data)
    plan = Plan.objects.filter(crew=crew).latest("id")
    assert response.status_code == 302 and response["Location"] == reverse("crews:plan-detail", args=[plan.pk])
    plan.refresh_from_db()
    assert plan.status == Plan.Status.DRAFT, plan.error
    return plan


def steps(plan: Plan, task: Task | None = None) -> list[PlanStep]:
    plan.refresh_from_db()
    current = plans.current_steps(plan)
    if task is not None:
        return current.get(task.pk, [])
    return [s for task_steps in current.values() for s in task_steps]


def first_task(crew: Crew) -> Task:
    return crew.tasks.order_by("order").first()


def url(name: str, *args: Any) -> str:
    return reverse(f"crews:{name}", args=args)


def textarea_value(html: str, element_id: str) -> str:
    match = re.search(rf'<textarea id="{element_id}"[^>]*>(.*?)</textarea>', html, re.S)
    assert match, f"no textarea #{element_id}"
    return match.group(1)


@pytest.fixture
def client(builder: Any) -> Client:
    return signed_in(builder)


@pytest.fixture
def crew(builder: Any) -> Crew:
    return private_crew(builder)


@pytest.fixture
def plan(client: Client, crew: Crew, django_capture_on_commit_callbacks: Any) -> Plan:
    return draft(client, crew, django_capture_on_commit_callbacks, topic="tides")


# Kickoff panel ---------------------------------------------------------------------------------


def test_crew_page_has_a_kickoff_panel_with_inputs_defaults_planner_and_cost(
    client: Client, demo_crew: Crew
) -> None:
    html = client.get(url("crew-detail", demo_crew.pk)).content.decode()

    assert 'id="kickoff"' in html
    assert 'name="inputs-topic"' in html and 'value="AI LLMs"' in html
    assert 'name="inputs-current_year"' in html and 'value="2026"' in html
    assert ">Draft plan<" in html and ">Run now<" in html
    assert "Offline demo model" in html  # the planner is the demo model, and the panel says so
    assert "$0.0000 · 0 tokens · 0 plans" in html
    assert "Recent runs" in html


def test_planning_cost_and_latest_plans_add_up_the_crews_plans(
    client: Client, crew: Crew, plan: Plan
) -> None:
    Plan.objects.filter(pk=plan.pk).update(prompt_tokens=100, completion_tokens=20, cost_usd="0.0125")

    html = client.get(url("crew-detail", crew.pk)).content.decode()

    assert "$0.0125 · 120 tokens · 1 plan" in html
    assert f'href="{url("plan-detail", plan.pk)}"' in html and ">Draft<" in html


def test_a_missing_input_is_shown_next_to_its_field(client: Client, crew: Crew) -> None:
    response = client.post(url("crew-kickoff", crew.pk), {"action": "draft", "inputs-topic": " "})

    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="id_inputs-topic_error"' in html and "Give a value for {topic}." in html
    assert not Plan.objects.exists()


def test_kickoff_errors_replace_the_panel_in_place_with_htmx(client: Client, crew: Crew) -> None:
    response = client.post(url("crew-kickoff", crew.pk), {"action": "run", "inputs-topic": ""}, **HX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith("<div id=\"kickoff\"")
    assert "Give a value for {topic}." in html and "<html" not in html
    assert not Run.objects.exists()


def test_draft_plan_opens_the_editor_with_the_drafted_steps(
    client: Client, crew: Crew, plan: Plan
) -> None:
    html = client.get(url("plan-detail", plan.pk)).content.decode()

    assert plan.inputs == {"topic": "tides"}
    assert all(escape(s.text) in html for s in steps(plan))
    assert "Research" in html and "Report" in html
    assert "Approve & run" in html
    assert 'hx-trigger="every 1s"' not in html  # nothing to wait for


def test_run_now_starts_a_run_without_a_plan_and_opens_the_run_page(client: Client, crew: Crew) -> None:
    response = client.post(url("crew-kickoff", crew.pk), {"action": "run", "inputs-topic": "tides"}, **HX)

    run = Run.objects.get()
    assert response.status_code == 200 and response["HX-Redirect"] == url("run-detail", run.pk)
    assert run.plan is None and run.inputs == {"topic": "tides"}


def test_a_viewer_sees_the_kickoff_panel_read_only_and_cannot_start(viewer: Any, demo_crew: Crew) -> None:
    client = signed_in(viewer)

    html = client.get(url("crew-detail", demo_crew.pk)).content.decode()
    assert "Run this crew" in html and ">Draft plan<" not in html and "AI LLMs" in html

    response = client.post(url("crew-kickoff", demo_crew.pk), {"action": "draft", "inputs-topic": "x"})
    assert response.status_code == 403 and not Plan.objects.exists()


# Drafting in the background ------------------------------------------------------------------


def test_the_editor_polls_while_drafting_and_fills_in_when_the_steps_are_there(
    client: Client, builder: Any, crew: Crew
) -> None:
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    html = client.get(url("plan-detail", plan.pk)).content.decode()
    assert 'hx-trigger="every 1s"' in html and "<progress" in html and "Approve & run" not in html
    assert client.get(url("plan-detail", plan.pk), {"poll": 1}, **HX).status_code == 204

    runner.generate_plan(plan.pk)

    response = client.get(url("plan-detail", plan.pk), {"poll": 1}, **HX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<div id="plan-editor"')
    assert 'hx-trigger="every 1s"' not in html and "Approve & run" in html
    assert all(escape(s.text) in html for s in steps(plan))
    assert "The plan is ready" in html  # announced in the live region, out of band


def test_a_failed_draft_shows_its_error_escaped_and_a_try_again_button(
    client: Client, builder: Any, crew: Crew
) -> None:
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    plans.plan_fail(plan_id=plan.pk, error="The LLM said <b>no</b>.")

    html = client.get(url("plan-detail", plan.pk)).content.decode()

    assert "The LLM said &lt;b&gt;no&lt;/b&gt;." in html
    assert ">Try again<" in html and "Approve & run" not in html


def test_try_again_drafts_a_fresh_plan_with_the_same_inputs(client: Client, crew: Crew, plan: Plan) -> None:
    response = client.post(url("plan-regenerate", plan.pk), **HX)

    fresh = Plan.objects.latest("id")
    assert fresh.pk != plan.pk and fresh.inputs == plan.inputs
    assert response["HX-Redirect"] == url("plan-detail", fresh.pk)


# Editing steps --------------------------------------------------------------------------------


def test_editing_a_step_saves_a_new_version_and_answers_with_its_card(
    client: Client, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    step = steps(plan, task)[0]

    form = client.get(url("plan-step-update", plan.pk, step.uid), **HX).content.decode()
    assert textarea_value(form, f"step-{step.uid}-text") == escape(step.text)

    response = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "Read the tide tables", "version": 1}, **HX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<li class="step" id="step-{step.uid}"')  # only its card
    assert "Read the tide tables" in html
    # Out of band: every form's version input and the head follow the save; the versions list
    # gets the new version on top and the one before it without "Current", not the whole list.
    assert 'value="2" class="plan-version" hx-swap-oob="outerHTML:.plan-version"' in html
    assert 'id="plan-head" class="plan-head" hx-swap-oob="true"' in html
    assert re.search(r'<ol hx-swap-oob="afterbegin:#plan-versions-list">\s*<li class="version version--current" id="plan-version-2">', html)
    assert re.search(r'<li class="version" id="plan-version-1" hx-swap-oob="true">', html)
    assert 'id="plan-compare" hx-swap-oob="true"' in html and '<option value="2" selected>v2</option>' in html
    assert 'id="plan-versions"' not in html
    assert "Saved: version 2." in html
    saved = steps(plan, task)[0]
    assert plan.version == 2 and (saved.uid, saved.text) == (step.uid, "Read the tide tables")


def test_a_plain_form_edit_goes_back_to_the_step(client: Client, crew: Crew, plan: Plan) -> None:
    step = steps(plan, first_task(crew))[0]

    page = client.get(url("plan-step-update", plan.pk, step.uid)).content.decode()
    assert "<html" in page and textarea_value(page, f"step-{step.uid}-text") == escape(step.text)

    response = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "New words", "version": 1})

    assert response.status_code == 302
    assert response["Location"] == url("plan-detail", plan.pk) + f"#step-{step.uid}"


def test_an_empty_step_text_is_a_message_under_the_field_and_saves_nothing(
    client: Client, crew: Crew, plan: Plan
) -> None:
    step = steps(plan, first_task(crew))[0]

    response = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "   ", "version": 1}, **HX)

    html = response.content.decode()
    assert response.status_code == 200
    assert response["HX-Retarget"] == f"#step-{step.uid}" and response["HX-Reswap"] == "outerHTML"
    assert "A step needs some text." in html and 'aria-invalid="true"' in html
    assert "plan-version" not in html.split("</li>")[-1]  # the version is not moved on
    plan.refresh_from_db()
    assert plan.version == 1

    plain = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "", "version": 1})
    assert plain.status_code == 422 and "A step needs some text." in plain.content.decode()


def test_a_stale_version_says_the_plan_changed_and_keeps_the_typed_text(
    client: Client, builder: Any, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    step = steps(plan, task)[0]
    plans.plan_update(actor=builder, plan=plan, expected_version=1, tasks=[
        {"task_id": task.pk, "steps": [{"id": s.uid, "text": s.text + "!"} for s in steps(plan, task)]}])

    response = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "My <careful> words", "version": 1}, **HX)

    html = response.content.decode()
    assert response.status_code == 200 and response["HX-Retarget"] == f"#step-{step.uid}"
    assert "This plan changed elsewhere" in html and "Reload the plan" in html
    assert textarea_value(html, f"step-{step.uid}-text") == "My &lt;careful&gt; words"
    assert "data-stale" in html
    assert steps(plan, task)[0].text == step.text + "!" and plan.version == 2

    plain = client.post(url("plan-step-update", plan.pk, step.uid), {"text": "Mine", "version": 1})
    assert plain.status_code == 409 and "This plan changed elsewhere" in plain.content.decode()
    assert textarea_value(plain.content.decode(), f"step-{step.uid}-text") == "Mine"


def test_adding_a_step_after_another_puts_it_right_there(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    before = steps(plan, task)

    form = client.get(url("plan-step-create", plan.pk, task.pk), {"after": before[0].uid}, **HX).content.decode()
    assert f'id="step-{before[0].uid}-new"' in form and 'name="after"' in form
    page = client.get(url("plan-step-create", plan.pk, task.pk), {"after": before[0].uid}).content.decode()
    assert "<html" in page and f'id="step-{before[0].uid}-new"' in page  # the no-JS way: the page with it open

    response = client.post(url("plan-step-create", plan.pk, task.pk),
                           {"text": "Check the moon phase", "after": before[0].uid, "version": 1}, **HX)

    after = steps(plan, task)
    assert response.status_code == 200 and "Step added" in response.content.decode()
    assert [s.text for s in after] == [before[0].text, "Check the moon phase", *[s.text for s in before[1:]]]
    assert 'autofocus' in response.content.decode()  # focus goes to the new step's Edit link


def test_adding_a_step_at_the_end_and_an_empty_one_is_refused_in_place(
    client: Client, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)

    client.post(url("plan-step-create", plan.pk, task.pk), {"text": "Last one", "version": 1}, **HX)
    assert steps(plan, task)[-1].text == "Last one"

    response = client.post(url("plan-step-create", plan.pk, task.pk), {"text": "", "version": 2}, **HX)
    assert response["HX-Retarget"] == f"#plan-task-{task.pk}-add"
    assert "A step needs some text." in response.content.decode()


def test_delete_offers_undo_which_brings_the_same_step_back(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    original = steps(plan, task)
    gone = original[1]

    response = client.post(url("plan-step-delete", plan.pk, gone.uid), {"version": 1}, **HX)
    html = response.content.decode()
    assert gone.uid not in [s.uid for s in steps(plan, task)]
    assert "Step 2 deleted" in html and ">Undo<" in html and 'name="deleted_in" value="2"' in html

    response = client.post(url("plan-step-undelete", plan.pk, gone.uid), {"version": 2, "deleted_in": 2}, **HX)

    assert response.status_code == 200 and "Step 2 is back." in response.content.decode()
    assert [(s.uid, s.text) for s in steps(plan, task)] == [(s.uid, s.text) for s in original]
    assert plan.version == 3


def test_undo_after_another_edit_puts_the_text_back_in_its_place(
    client: Client, crew: Crew, plan: Plan
) -> None:
    research, report = crew.tasks.order_by("order")
    original = steps(plan, research)
    client.post(url("plan-step-delete", plan.pk, original[0].uid), {"version": 1}, **HX)
    other = steps(plan, report)[0]
    client.post(url("plan-step-update", plan.pk, other.uid), {"text": "Meanwhile", "version": 2}, **HX)

    client.post(url("plan-step-undelete", plan.pk, original[0].uid), {"version": 3, "deleted_in": 2}, **HX)

    assert [s.text for s in steps(plan, research)] == [s.text for s in original]
    assert steps(plan, report)[0].text == "Meanwhile"  # the other edit is kept


def test_a_plain_delete_comes_back_to_the_page_with_undo(client: Client, crew: Crew, plan: Plan) -> None:
    gone = steps(plan, first_task(crew))[0]

    response = client.post(url("plan-step-delete", plan.pk, gone.uid), {"version": 1}, follow=True)

    html = response.content.decode()
    assert response.redirect_chain[-1][0].startswith(url("plan-detail", plan.pk) + f"?undo={gone.uid}&deleted_in=2")
    assert ">Undo<" in html and "Step 1 deleted" in html


def test_move_buttons_reorder_and_the_first_step_cannot_go_up(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    first, second = steps(plan, task)[:2]

    response = client.post(url("plan-step-move", plan.pk, second.uid), {"direction": "up", "version": 1}, **HX)
    assert "Step moved up: now step 1" in response.content.decode()
    assert [s.uid for s in steps(plan, task)][:2] == [second.uid, first.uid]

    response = client.post(url("plan-step-move", plan.pk, second.uid), {"direction": "up", "version": 2}, **HX)
    assert response.status_code == 200 and "This step is already first." in response.content.decode()
    assert response["HX-Retarget"] == f"#plan-task-{task.pk}"
    plan.refresh_from_db()
    assert plan.version == 2

    plain = client.post(url("plan-step-move", plan.pk, first.uid), {"direction": "down", "version": 2})
    assert plain.status_code == 302 and [s.uid for s in steps(plan, task)][1:3] != [first.uid, second.uid]


def test_pin_and_unpin_mark_the_step(client: Client, crew: Crew, plan: Plan) -> None:
    step = steps(plan, first_task(crew))[0]

    html = client.post(url("plan-step-pin", plan.pk, step.uid), {"pinned": "1", "version": 1}, **HX).content.decode()
    assert steps(plan, first_task(crew))[0].pinned
    assert "step--pinned" in html and ">Unpin<" in html and "Pinned" in html

    client.post(url("plan-step-pin", plan.pk, step.uid), {"pinned": "0", "version": 2}, **HX)
    assert not steps(plan, first_task(crew))[0].pinned


def test_drag_and_drop_posts_the_new_order(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    uids = [s.uid for s in steps(plan, task)]

    response = client.post(url("plan-task-reorder", plan.pk, task.pk), {"order": uids[::-1], "version": 1}, **HX)

    assert response.status_code == 200 and "New order saved" in response.content.decode()
    assert [s.uid for s in steps(plan, task)] == uids[::-1]
    unchanged = client.post(url("plan-task-reorder", plan.pk, task.pk), {"order": uids[::-1], "version": 2}, **HX)
    assert "No changes." in unchanged.content.decode() and plan.version == 2


def test_an_order_that_does_not_match_the_task_is_refused_in_place(
    client: Client, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    uids = [s.uid for s in steps(plan, task)]

    response = client.post(url("plan-task-reorder", plan.pk, task.pk), {"order": uids[1:], "version": 1}, **HX)

    assert "changed elsewhere" in response.content.decode() and plan.version == 1


def test_regenerating_a_task_keeps_pinned_steps_and_polls_until_done(
    client: Client, crew: Crew, plan: Plan, django_capture_on_commit_callbacks: Any
) -> None:
    task = first_task(crew)
    pinned = steps(plan, task)[0]
    client.post(url("plan-step-pin", plan.pk, pinned.uid), {"pinned": "1", "version": 1}, **HX)

    # While it runs, the section shows progress and asks for itself every second.
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[task.pk])
    html = client.get(url("plan-detail", plan.pk)).content.decode()
    assert f'hx-get="{url("plan-detail", plan.pk)}?task={task.pk}" hx-trigger="every 1s"' in html
    assert client.get(url("plan-detail", plan.pk), {"task": task.pk}, **HX).status_code == 204
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[])

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url("plan-task-regenerate", plan.pk, task.pk), {"feedback": "Fewer steps"}, **HX)
    assert response.status_code == 200 and "Regenerating the unpinned steps" in response.content.decode()

    plan.refresh_from_db()
    assert plan.regenerating_task_ids == [] and plan.version == 3
    after = steps(plan, task)
    assert after[0].uid == pinned.uid and after[0].pinned
    done = client.get(url("plan-detail", plan.pk), {"task": task.pk}, **HX).content.decode()
    assert "hx-trigger" not in done.split("</header>")[0] and "New steps for “Research”." in done


def test_a_regenerating_tasks_poll_reads_neither_its_steps_nor_the_versions(
    client: Client, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[task.pk])

    with CaptureQueriesContext(connection) as queries:
        response = client.get(url("plan-detail", plan.pk), {"task": task.pk}, **HX)

    assert response.status_code == 204
    read = " ".join(q["sql"] for q in queries.captured_queries)
    assert PlanVersion._meta.db_table not in read and PlanStep._meta.db_table not in read


def test_regenerating_a_task_twice_at_once_is_a_message(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[task.pk])

    response = client.post(url("plan-task-regenerate", plan.pk, task.pk), {"feedback": ""}, **HX)

    assert response.status_code == 200 and "already being regenerated" in response.content.decode()


# Approve & run ----------------------------------------------------------------------------------


def test_approve_and_run_starts_a_run_with_the_approved_version(client: Client, crew: Crew, plan: Plan) -> None:
    response = client.post(url("plan-approve", plan.pk), {"version": 1}, **HX)

    run = Run.objects.get()
    plan.refresh_from_db()
    assert response["HX-Redirect"] == url("run-detail", run.pk)
    assert plan.status == Plan.Status.APPROVED and plan.approved_version == 1
    assert (run.plan_id, run.plan_version, run.inputs) == (plan.pk, 1, {"topic": "tides"})


def test_approving_a_stale_version_starts_nothing(client: Client, builder: Any, crew: Crew, plan: Plan) -> None:
    plans.plan_restore(actor=builder, plan=plan, number=1)

    response = client.post(url("plan-approve", plan.pk), {"version": 1})

    assert response.status_code == 409 and "changed elsewhere" in response.content.decode()
    plan.refresh_from_db()
    assert plan.status == Plan.Status.DRAFT and not Run.objects.exists()


def test_a_run_waiting_for_this_plan_continues_on_approve(
    client: Client, builder: Any, crew: Crew, plan: Plan
) -> None:
    run = Run.objects.create(crew=crew, created_by=builder, inputs=plan.inputs, plan=plan, planning_plan=plan,
                             status=Run.Status.AWAITING_APPROVAL)

    html = client.get(url("plan-detail", plan.pk)).content.decode()
    assert "Approve & continue" in html and f"Run #{run.pk} drafted this plan" in html

    response = client.post(url("plan-approve", plan.pk), {"version": 1}, **HX)

    plan.refresh_from_db()
    assert response["HX-Redirect"] == url("run-detail", run.pk)
    assert plan.status == Plan.Status.APPROVED and Run.objects.count() == 1


# Versions and their differences ----------------------------------------------------------------


def test_versions_list_who_saved_each_and_the_diff_shows_what_changed(
    client: Client, builder: Any, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    a, b, *rest = steps(plan, task)
    client.post(url("plan-step-update", plan.pk, a.uid), {"text": "Changed text", "version": 1}, **HX)
    client.post(url("plan-step-delete", plan.pk, rest[-1].uid), {"version": 2}, **HX)
    client.post(url("plan-step-create", plan.pk, task.pk), {"text": "Brand new", "version": 3}, **HX)
    client.post(url("plan-step-move", plan.pk, b.uid), {"direction": "up", "version": 4}, **HX)

    page = client.get(url("plan-detail", plan.pk)).content.decode()
    assert "Drafted by the planner" in page and "Step edited" in page and builder.username in page

    response = client.get(url("plan-diff", plan.pk), {"from": 1, "to": 5}, **HX)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="plan-diff"')
    assert "Changes from v1 to v5" in html
    for label in ("1 added", "1 removed", "1 changed", "1 moved"):
        assert label in html
    assert "<del>" in html and "Changed text" in html and "Brand new" in html

    plain = client.get(url("plan-diff", plan.pk), {"from": 1, "to": 5})
    assert plain.status_code == 200 and "<html" in plain.content.decode() and "1 moved" in plain.content.decode()
    bad = client.get(url("plan-diff", plan.pk), {"from": 1, "to": 99}, **HX)
    assert "Choose two versions this plan has" in bad.content.decode()


def test_restoring_a_version_saves_its_steps_as_the_newest(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    original = [s.text for s in steps(plan, task)]
    client.post(url("plan-step-update", plan.pk, steps(plan, task)[0].uid), {"text": "Oops", "version": 1}, **HX)

    response = client.post(url("plan-version-restore", plan.pk, 1), {"version": 2}, **HX)

    assert response.status_code == 200 and "Version 1 restored as version 3." in response.content.decode()
    assert [s.text for s in steps(plan, task)] == original and plan.version == 3


# Who may do what --------------------------------------------------------------------------------


def test_another_users_plan_is_not_found(
    other_builder: Any, crew: Crew, plan: Plan
) -> None:
    other = signed_in(other_builder)
    step = steps(plan)[0]

    assert other.get(url("plan-detail", plan.pk)).status_code == 404
    assert other.post(url("plan-step-update", plan.pk, step.uid), {"text": "x", "version": 1}).status_code == 404
    assert other.post(url("plan-approve", plan.pk), {"version": 1}).status_code == 404
    assert other.post(url("crew-kickoff", crew.pk), {"action": "draft"}).status_code == 404


def test_a_viewer_sees_a_shared_plan_read_only_and_cannot_edit_it(
    builder: Any, viewer: Any, demo_crew: Crew, django_capture_on_commit_callbacks: Any
) -> None:
    plan = draft(signed_in(builder), demo_crew, django_capture_on_commit_callbacks, topic="AI LLMs", current_year="2026")
    step = steps(plan)[0]
    client = signed_in(viewer)

    html = client.get(url("plan-detail", plan.pk)).content.decode()
    assert escape(step.text) in html and "Read-only" in html
    assert "Approve & run" not in html and 'id="step-' + str(step.uid) + '-edit"' not in html

    for name, args, data in [
        ("plan-step-update", (plan.pk, step.uid), {"text": "x", "version": 1}),
        ("plan-step-delete", (plan.pk, step.uid), {"version": 1}),
        ("plan-step-move", (plan.pk, step.uid), {"direction": "down", "version": 1}),
        ("plan-step-pin", (plan.pk, step.uid), {"pinned": "1", "version": 1}),
        ("plan-approve", (plan.pk,), {"version": 1}),
        ("plan-version-restore", (plan.pk, 1), {"version": 1}),
    ]:
        assert client.post(url(name, *args), data, **HX).status_code == 403, name
    plan.refresh_from_db()
    assert plan.version == 1


def test_step_text_from_the_llm_is_escaped(client: Client, builder: Any, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    plans.plan_update(actor=builder, plan=plan, expected_version=1,
                      tasks=[{"task_id": task.pk, "steps": [{"text": "<script>alert(1)</script>"}]}])

    html = client.get(url("plan-detail", plan.pk)).content.decode()

    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_step_cards_escape_the_step_text_and_speak_portuguese(client: Client, builder: Any, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    text = 'Check <img src=x onerror="alert(1)"> & the tide\'s "height"'
    plans.plan_update(actor=builder, plan=plan, expected_version=1,
                      tasks=[{"task_id": task.pk, "steps": [{"text": text, "pinned": True}, {"text": "Then more"}]}])
    first = steps(plan, task)[0]

    html = client.get(url("plan-detail", plan.pk), HTTP_ACCEPT_LANGUAGE="pt-br").content.decode()

    assert "<img" not in html and escape(text) in html
    card = html[html.index(f'<li class="step step--pinned" id="step-{first.uid}"'):]
    card = card[:card.index("</li>")]
    assert f'aria-label="Editar: etapa 1" href="{url("plan-step-update", plan.pk, first.uid)}"' in card
    assert 'aria-label="Mover para cima: etapa 1" disabled>' in card  # the first step cannot go up
    assert 'name="pinned" value="0"' in card and ">Desafixar<" in card
    assert card.count('name="csrfmiddlewaretoken"') == 3 and card.count('value="2" class="plan-version"') == 3


def test_a_regenerating_tasks_steps_and_a_viewers_have_no_controls(
    client: Client, viewer: Any, crew: Crew, plan: Plan
) -> None:
    research, report = crew.tasks.order_by("order")
    Plan.objects.filter(pk=plan.pk).update(regenerating_task_ids=[research.pk])

    html = client.get(url("plan-detail", plan.pk)).content.decode()

    busy, other = steps(plan, research)[0], steps(plan, report)[0]
    assert f'id="step-{busy.uid}"' in html and f'id="step-{busy.uid}-edit"' not in html
    assert f'data-edit-link="step-{busy.uid}-edit"' not in html and f'id="step-{other.uid}-edit"' in html


def test_a_save_sends_the_versions_list_only_what_changed(client: Client, crew: Crew, plan: Plan) -> None:
    task = first_task(crew)
    uids = [s.uid for s in steps(plan, task)]

    saved = client.post(url("plan-task-reorder", plan.pk, task.pk), {"order": uids[::-1], "version": 1}, **HX)
    same = client.post(url("plan-task-reorder", plan.pk, task.pk), {"order": uids[::-1], "version": 2}, **HX)
    page = client.get(url("plan-detail", plan.pk)).content.decode()

    html = saved.content.decode()
    assert '<ol hx-swap-oob="afterbegin:#plan-versions-list"><li class="version version--current" id="plan-version-2">' in html
    assert '<li class="version" id="plan-version-1" hx-swap-oob="true">' in html and "Restore version 1" in html
    assert 'id="plan-versions"' not in html
    nothing = same.content.decode()
    assert "No changes." in nothing and "plan-version-" not in nothing and 'id="plan-compare"' not in nothing
    # The page the answers keep up to date: rows with ids, newest first, in a list with an id.
    assert re.search(r'<ol class="versions" role="list" id="plan-versions-list"[^>]*>\s*<li class="version version--current" '
                     r'id="plan-version-2">', page)
    assert page.index('id="plan-version-2"') < page.index('id="plan-version-1"')
    assert '<option value="1" selected>v1</option>' in page and '<option value="2" selected>v2</option>' in page
