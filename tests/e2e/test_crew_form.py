"""The crew form's "Plan" cards in the browser: each choice is a labelled radio with its sentence,
the default is the reviewed plan, and the choice saves."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in


def test_the_plan_cards_choose_how_the_crew_plans_and_the_choice_is_saved(page: Page) -> None:
    sign_in(page)
    page.goto("/crews/new/")
    cards = page.get_by_role("group", name="Plan", exact=True)
    expect(cards).to_contain_text("How the crew plans its work before it runs.")
    expect(cards.get_by_role("radio", name=re.compile("Draft a plan I review first"))).to_be_checked()

    # The card's sentence belongs to the radio's label: clicking it chooses the card.
    cards.get_by_text("The run drafts its plan and follows it without waiting for anyone.").click()
    expect(cards.get_by_role("radio", name=re.compile("Plan and run at once"))).to_be_checked()

    page.get_by_label(re.compile("^Name")).fill("Quick crew")
    page.get_by_role("button", name="Create crew").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Quick crew")
    settings = page.get_by_role("region", name="Settings")
    expect(settings).to_contain_text("Plan and run at once")
