"""Without JavaScript, a deleted step's Undo stays on the editor's pages that follow (a step's edit
form, Add after, Cancel, a reload) until it is undone or another change is saved."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from crews.models import Crew, Plan
from tests.crews.test_plan_views import client, crew, first_task, plan, steps, url  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def undo_note(html: str) -> str | None:
    match = re.search(r'<li class="step-undo".*?</li>', html, re.S)
    return match.group(0) if match else None


def delete_plainly(client: Client, plan: Plan, uid: int, version: int) -> str:  # noqa: F811 - names the fixtures
    response = client.post(url("plan-step-delete", plan.pk, uid), {"version": version}, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def test_undo_stays_while_another_step_is_edited_and_brings_the_step_back(
        client: Client, crew: Crew, plan: Plan) -> None:  # noqa: F811
    task = first_task(crew)
    original = steps(plan, task)
    gone, other = original[1], original[0]
    assert undo_note(delete_plainly(client, plan, gone.uid, 1))

    # Edit another step: its form opens in the page, and the Undo note is still where step 2 was.
    html = client.get(url("plan-step-update", plan.pk, other.uid)).content.decode()
    note = undo_note(html)
    assert note and "Step 2 deleted:" in note and gone.text[:20] in note
    assert f'action="{url("plan-step-undelete", plan.pk, gone.uid)}"' in note
    assert 'name="deleted_in" value="2"' in note
    assert " autofocus" not in note  # the open form's text field has the focus
    assert html.index(f'id="step-{other.uid}-text"') < html.index('class="step-undo"')  # step 1, then the note
    assert re.search(rf'<textarea id="step-{other.uid}-text"[^>]* autofocus', html)

    # Add after, and Cancel (the editor again, no query): still there.
    html = client.get(url("plan-step-create", plan.pk, task.pk) + f"?after={other.uid}").content.decode()
    assert undo_note(html) and f'id="step-{other.uid}-new"' in html
    html = client.get(url("plan-detail", plan.pk)).content.decode()
    assert undo_note(html) and " autofocus" in undo_note(html)  # type: ignore[operator]

    # Undo from the edit page's note: the same step comes back, and the note goes.
    response = client.post(url("plan-step-undelete", plan.pk, gone.uid), {"version": 2, "deleted_in": 2}, follow=True)
    assert response.status_code == 200 and "Step 2 is back." in response.content.decode()
    assert [s.uid for s in steps(plan, task)] == [s.uid for s in original]
    assert undo_note(response.content.decode()) is None
    assert undo_note(client.get(url("plan-step-update", plan.pk, other.uid)).content.decode()) is None


def test_saving_another_change_ends_the_undo_note(client: Client, crew: Crew, plan: Plan) -> None:  # noqa: F811
    task = first_task(crew)
    gone, other = steps(plan, task)[1], steps(plan, task)[0]
    delete_plainly(client, plan, gone.uid, 1)

    response = client.post(url("plan-step-update", plan.pk, other.uid), {"text": "Changed", "version": 2}, follow=True)

    assert response.status_code == 200 and steps(plan, task)[0].text == "Changed"
    assert undo_note(response.content.decode()) is None
    assert undo_note(client.get(url("plan-step-update", plan.pk, other.uid)).content.decode()) is None


def test_the_undo_note_is_the_deleting_plans_and_a_failed_edit_keeps_it(
        client: Client, crew: Crew, plan: Plan, django_capture_on_commit_callbacks: Any) -> None:  # noqa: F811
    from tests.crews.test_plan_views import draft

    task = first_task(crew)
    gone, other = steps(plan, task)[1], steps(plan, task)[0]
    delete_plainly(client, plan, gone.uid, 1)

    # An edit that fails (empty text) shows the page with its error, and the note stays.
    response = client.post(url("plan-step-update", plan.pk, other.uid), {"text": " ", "version": 2})
    assert response.status_code == 422 and undo_note(response.content.decode())

    another = draft(client, crew, django_capture_on_commit_callbacks, topic="waves")
    assert undo_note(client.get(url("plan-detail", another.pk)).content.decode()) is None
    assert undo_note(client.get(url("plan-detail", plan.pk)).content.decode())


def test_approving_the_plan_ends_the_undo_note(client: Client, crew: Crew, plan: Plan) -> None:  # noqa: F811
    """Approving keeps the version: the note's Undo would make the approved plan a draft again."""
    gone = steps(plan, first_task(crew))[1]
    delete_plainly(client, plan, gone.uid, 1)
    assert undo_note(client.get(url("plan-detail", plan.pk)).content.decode()) is not None
    assert client.post(url("plan-approve", plan.pk), {"version": 2}, follow=True).status_code == 200
    plan.refresh_from_db()
    assert plan.status == Plan.Status.APPROVED
    assert undo_note(client.get(url("plan-detail", plan.pk)).content.decode()) is None
