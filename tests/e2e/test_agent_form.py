"""The agent form's "How should this agent work?" in the browser: the advanced planning settings
appear only while "Plan first, then act" is chosen (CSS alone, no script), and the choice saves."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in


def test_advanced_planning_shows_only_for_plan_first_and_the_choice_is_saved(page: Page) -> None:
    sign_in(page)
    page.goto("/agents/new/")
    advanced = page.get_by_text("Advanced planning", exact=True)
    expect(page.get_by_role("radio", name=re.compile(r"Act step by step \(ReAct\)"))).to_be_checked()
    expect(advanced).to_be_hidden()

    page.get_by_role("radio", name=re.compile("Plan first, then act")).check()
    expect(advanced).to_be_visible()
    advanced.click()
    page.get_by_label("High: review, refine, replan, stop early").check()

    page.get_by_role("radio", name=re.compile("Plan and execute")).check()
    expect(advanced).to_be_hidden()
    page.get_by_role("radio", name=re.compile("Plan first, then act")).check()

    page.get_by_label(re.compile("^Name")).fill("Careful planner")
    page.get_by_label(re.compile("^Role")).fill("Planner")
    page.get_by_label(re.compile("^Goal")).fill("Plan carefully")
    page.get_by_role("button", name="Create agent").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Careful planner")
    expect(page.locator("[data-work-mode]")).to_contain_text("Plan first, then act (Plan-and-Act)")
    expect(page.get_by_text("High: review, refine, replan, stop early")).to_be_visible()
