"""The plan editor's repeated parts (templates/crews/plan_parts.jinja) read the same in the page and
in the htmx answers: one macro draws a step card or a version row for both. And the parts that
guide: the versions list (every version), the diff's words, Undo in place, keyboard shortcuts."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from crews import plans
from crews.models import Crew, Plan
from tests.conftest import signed_in
from tests.crews.test_plan_views import HX, draft, first_task, private_crew, steps, url

pytestmark = pytest.mark.django_db

# Each response masks the CSRF token anew; a fixed one lets the two read byte for byte alike.
TOKEN = "fixed-csrf-token"


def element(html: str, element_id: str) -> str:
    """The ``<li>`` with id ``element_id``, start tag to end tag (cards and rows nest no list)."""
    match = re.search(rf'<li [^>]*\bid="{re.escape(element_id)}"[^>]*>.*?</li>', html, re.S)
    assert match, f"no <li id={element_id!r}>"
    return match.group(0)


@pytest.fixture
def client(builder: Any) -> Client:
    return signed_in(builder)


@pytest.fixture
def crew(builder: Any) -> Crew:
    return private_crew(builder)


@pytest.fixture
def plan(client: Client, crew: Crew, django_capture_on_commit_callbacks: Any) -> Plan:
    return draft(client, crew, django_capture_on_commit_callbacks, topic="tides")


@pytest.fixture
def fixed_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("crews.views.plan_context.get_token", lambda request: TOKEN)


def test_a_step_edit_answers_with_the_card_and_version_rows_the_page_shows(
    client: Client, crew: Crew, plan: Plan, fixed_token: Any
) -> None:
    step = steps(plan, first_task(crew))[1]  # a middle step: both move buttons enabled
    text = 'Compare <b>tide</b> tables & the "harbour" notes'

    answer = client.post(url("plan-step-update", plan.pk, step.uid), {"text": text, "version": 1}, **HX)
    page = client.get(url("plan-detail", plan.pk)).content.decode()

    fragment = answer.content.decode()
    card = element(fragment, f"step-{step.uid}")
    assert fragment.lstrip().startswith(card)  # the card is what htmx swaps in
    assert card == element(page, f"step-{step.uid}")
    assert "&lt;b&gt;tide&lt;/b&gt; tables &amp; the &quot;harbour&quot; notes" in card
    assert f'value="{TOKEN}"' in card and 'value="2" class="plan-version"' in card
    # The new version's row goes on top of the list; the one before it is replaced in place.
    assert element(fragment, "plan-version-2") == element(page, "plan-version-2")
    before = element(fragment, "plan-version-1")
    assert ' hx-swap-oob="true"' in before and "Restore version 1" in before
    assert before.replace(' hx-swap-oob="true"', "", 1) == element(page, "plan-version-1")


def test_a_move_answers_with_the_section_whose_cards_the_page_shows(
    client: Client, crew: Crew, plan: Plan, fixed_token: Any
) -> None:
    task = first_task(crew)
    second = steps(plan, task)[1]
    portuguese = {"HTTP_ACCEPT_LANGUAGE": "pt-br"}

    answer = client.post(url("plan-step-move", plan.pk, second.uid), {"direction": "up", "version": 1},
                         **HX, **portuguese).content.decode()
    page = client.get(url("plan-detail", plan.pk), **portuguese).content.decode()

    cards = [element(answer, f"step-{s.uid}") for s in steps(plan, task)]
    assert cards == [element(page, f"step-{s.uid}") for s in steps(plan, task)]
    assert 'aria-label="Mover para cima: etapa 1" disabled>' in cards[0] and f'id="step-{second.uid}"' in cards[0]


# Versions, differences, Undo and shortcuts ------------------------------------------------------


def save_versions(builder: Any, crew: Crew, plan: Plan, count: int) -> None:
    """``count`` more versions of the first task, each a one-word edit of its first step."""
    task = first_task(crew)
    for n in range(count):
        current = steps(plan, task)
        rows = [{"id": s.uid, "text": s.text, "pinned": s.pinned} for s in current]
        rows[0]["text"] = f"Edit number {n + 1}"
        plans.plan_update(actor=builder, plan=plan, expected_version=plan.version,
                          tasks=[{"task_id": task.pk, "steps": rows}], note="edited a step")
        plan.refresh_from_db()


def test_the_versions_list_shows_every_version_newest_first_with_who_and_when(
    client: Client, builder: Any, crew: Crew, plan: Plan
) -> None:
    save_versions(builder, crew, plan, 14)

    page = client.get(url("plan-detail", plan.pk)).content.decode()

    listed = re.search(r'<ol class="versions"[^>]*>(.*?)</ol>', page, re.S)
    assert listed and 'tabindex="0" aria-labelledby="plan-versions-heading"' in listed.group(0)  # it scrolls
    numbers = [int(n) for n in re.findall(r'<li class="version[^"]*" id="plan-version-(\d+)"', listed.group(1))]
    assert numbers == list(range(15, 0, -1))
    rows = {n: element(page, f"plan-version-{n}") for n in numbers}
    assert [n for n, row in rows.items() if "version--current" in row] == [15]
    assert ">Current<" in rows[15] and all(">Current<" not in rows[n] for n in range(1, 15))
    for n, row in rows.items():
        assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+" title="[^"]+">', row), n
        assert ("the planner" if n == 1 else builder.username) in row
    assert "Step edited" in rows[15] and "Drafted by the planner" in rows[1]
    compare = page[page.index('id="diff-from"'):page.index("</fieldset>")]
    assert compare.count("<option value=") == 30  # both comparison selects offer all 15


def test_the_diff_labels_each_step_changed_added_removed_or_moved_with_a_mark(
    client: Client, builder: Any, crew: Crew, plan: Plan
) -> None:
    task = first_task(crew)
    plans.plan_update(actor=builder, plan=plan, expected_version=1, tasks=[{"task_id": task.pk, "steps": [
        {"text": "Read the tide tables"}, {"text": "Walk the shore"}, {"text": "Count the crabs"},
        {"text": "Photograph the pools"}, {"text": "Keep notes"}]}])
    a, b, c, d, e = steps(plan, task)
    rows = [{"id": s.uid, "text": s.text, "pinned": False} for s in (b, a, c, e)]  # a moved, d removed
    rows[2]["text"] = "Count the <crabs> & gulls"
    rows.append({"text": "Write it up"})
    plans.plan_update(actor=builder, plan=plan, expected_version=2, tasks=[{"task_id": task.pk, "steps": rows}])

    html = client.get(url("plan-diff", plan.pk), {"from": 2, "to": 3}, **HX).content.decode()

    marks = {"changed": "✎", "added": "+", "removed": "−", "moved": "↕"}
    found = {}
    for kind, mark in marks.items():
        found[kind] = re.findall(rf'<li class="diff-row diff-row--{kind}">.*?</li>', html, re.S)
        assert len(found[kind]) == 1, kind
        assert f'<span class="diff-tag__mark" aria-hidden="true">{mark}</span> {kind.title()}</span>' in found[kind][0]
        assert re.search(rf'aria-hidden="true">{re.escape(mark)}</span> 1 {kind}</span>', html), kind  # the summary
    assert len(re.findall(r'<li class="diff-row diff-row--same">', html)) == 2  # Walk the shore, Keep notes
    assert "Read the tide tables" in found["moved"][0] and "Photograph the pools" in found["removed"][0]
    assert "Write it up" in found["added"][0]
    assert "Count the &lt;crabs&gt; &amp; gulls" in found["changed"][0] and "<crabs>" not in html


def test_undo_stands_where_the_deleted_step_was(client: Client, crew: Crew, plan: Plan) -> None:
    first, gone, third, *_rest = steps(plan, first_task(crew))

    html = client.post(url("plan-step-delete", plan.pk, gone.uid), {"version": 1}, **HX).content.decode()

    undo = html.index('<li class="step-undo"')
    assert html.index(f'id="step-{first.uid}"') < undo < html.index(f'id="step-{third.uid}"')
    assert "Step 2 deleted" in element(html, f"plan-task-{first_task(crew).pk}-undo-note")


def test_editable_steps_take_the_focus_and_the_shortcuts_are_listed(
    client: Client, viewer: Any, builder: Any, demo_crew: Crew, django_capture_on_commit_callbacks: Any
) -> None:
    plan = draft(client, demo_crew, django_capture_on_commit_callbacks, topic="AI LLMs", current_year="2026")
    step = steps(plan)[0]

    html = client.get(url("plan-detail", plan.pk)).content.decode()
    read_only = signed_in(viewer).get(url("plan-detail", plan.pk)).content.decode()

    card = element(html, f"step-{step.uid}")
    assert 'tabindex="0" aria-keyshortcuts="E A P Delete Alt+ArrowUp Alt+ArrowDown"' in card
    help_ = html[html.index('id="plan-shortcuts"'):html.index("</details>", html.index('id="plan-shortcuts"'))]
    for words in ("Keyboard shortcuts", "Edit the step", "Add a step after it", "Move it up or down",
                  "Pin or unpin it", "Delete it (Undo brings it back)"):
        assert words in help_
    assert "tabindex" not in element(read_only, f"step-{step.uid}") and 'id="plan-shortcuts"' not in read_only
