"""An admin edits the crew planner's prompt in the browser: inserts a placeholder by clicking it,
saves, and sees the new version and what changed."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in
from tests.e2e.test_accessibility import AXE, assert_accessible


def accessible(page: Page, where: str) -> None:
    """``assert_accessible``, with axe loaded through the DevTools protocol: the site's
    Content-Security-Policy refuses the inline script tag that would load it otherwise."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())
    assert_accessible(page, where)


@pytest.fixture
def crew_plan_prompt(app_server: LiveServer) -> Iterator[None]:
    yield
    # Later journeys draft plans with the seeded prompt: the versions this one added go.
    app_server.shell(
        "from agents.models import PromptTemplateVersion; "
        "PromptTemplateVersion.objects.filter(template__key='crew_plan', number__gt=1).delete()"
    )


def test_an_admin_edits_the_crew_planner_prompt_and_sees_the_new_version_and_the_diff(
    page: Page, crew_plan_prompt: None
) -> None:
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Prompts").click()
    expect(page.get_by_role("heading", level=1, name="Prompts")).to_be_visible()
    expect(page.get_by_text("Sent when a person presses Draft plan")).to_be_visible()
    page.get_by_role("link", name="Crew planner", exact=True).click()

    text = page.get_by_role("textbox", name="Prompt text")
    expect(text).to_contain_text("{tasks}")
    expect(page.get_by_text("Click one to insert it at the cursor.")).to_be_visible()
    accessible(page, "the prompt editor")

    # The cursor goes to the end of the text; the placeholder lands there, after the typed words.
    text.click()
    text.press("Control+End")
    text.press_sequentially("\nTasks again: ")
    page.get_by_role("button", name="Insert {tasks}").click()
    expect(text).to_have_value(re.compile(r"\nTasks again: \{tasks\}$"))
    expect(text).to_be_focused()

    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_role("heading", name="Preview of your text")).to_be_visible()
    expect(page.locator(".prompt-editor__preview pre")).to_contain_text("Tasks again: Task 1: Research tides")

    page.get_by_label("Note (optional)").fill("List the tasks twice")
    page.get_by_role("button", name="Save as a new version").click()

    expect(page).to_have_url(re.compile(r"/prompts/crew_plan/versions/"))
    expect(page.get_by_role("status").filter(has_text="Saved as version 2")).to_be_visible()
    newest = page.get_by_role("row").filter(has_text="Version 2")
    expect(newest).to_contain_text("Current")
    expect(newest).to_contain_text("ada")
    expect(newest).to_contain_text("List the tasks twice")
    diff = page.get_by_role("list", name="Changed lines")
    expect(diff.locator("ins")).to_have_text("Tasks again: {tasks}")
    accessible(page, "the prompt's versions and diff")
