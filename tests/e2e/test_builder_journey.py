"""A new user's first minutes: sign in, open the demo crew, edit a task, see the change."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in


def test_sign_in_open_the_demo_crew_edit_a_task_and_see_the_change(page: Page) -> None:
    sign_in(page)
    expect(page.get_by_role("status").or_(page.locator(".banner")).first).to_contain_text(
        re.compile("offline demo model", re.I)
    )
    page.get_by_role("link", name="AI LLMs").first.click()
    expect(page.get_by_role("heading", level=1, name="AI LLMs")).to_be_visible()
    expect(page.locator("#tasks")).to_contain_text("Conduct a thorough research about {topic}")

    page.get_by_role("link", name="Edit: Research").click()
    description = page.get_by_label("Description")
    description.fill("Research {topic} in depth, citing the three most important papers of {current_year}.")
    page.get_by_role("button", name="Save task").click()

    expect(page).to_have_url(re.compile(r"/crews/\d+/"))
    tasks = page.locator("#tasks")
    expect(tasks).to_contain_text("citing the three most important papers")
    expect(tasks).not_to_contain_text("Conduct a thorough research")
    # The discovered inputs are still the crew's two placeholders.
    expect(page.locator("#inputs-heading + *").or_(page.get_by_text("{current_year}")).first).to_be_visible()
