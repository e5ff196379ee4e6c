"""The plan editor's repeated parts (templates/crews/plan_parts.jinja) read the same in the page and
in the htmx answers: one macro draws a step card or a version row for both."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

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
