"""The plan editor in a browser: draft a plan and watch it fill in, edit it in place, reorder it
by drag and by keyboard, pin and regenerate, compare versions, approve and run."""

from __future__ import annotations

import re

from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.conftest import LiveServer, sign_in

STATUS = "#plan-save-status"


def draft_plan(page: Page) -> str:
    """From the demo crew's page, Draft plan; wait until every task has its steps."""
    sign_in(page)
    page.get_by_role("link", name="AI LLMs").first.click()
    kickoff = page.get_by_role("region", name="Run this crew")
    expect(kickoff.get_by_label("{topic}")).to_have_value("AI LLMs")
    kickoff.get_by_label("{topic}").fill("tide pools")
    kickoff.get_by_role("button", name="Draft plan").click()
    expect(page).to_have_url(re.compile(r"/plans/\d+/$"))
    # The page polls while the planner drafts; the steps fill in without a reload.
    for name in ("Research", "Report"):
        expect(task(page, name).get_by_role("listitem").first).to_be_visible()
    expect(page.get_by_role("button", name="Approve & run")).to_be_enabled()
    return page.url


def task(page: Page, name: str) -> Locator:
    return page.get_by_role("region", name=re.compile(rf"^\d+\. {name}$"))


def step_texts(section: Locator) -> list[str]:
    return [t.strip() for t in section.locator(".step__text").all_inner_texts()]


def test_draft_edit_add_delete_and_undo(page: Page) -> None:
    draft_plan(page)
    research = task(page, "Research")
    first = step_texts(research)[0]
    count = len(step_texts(research))

    # Click the text to edit it in place; Enter saves.
    research.locator(".step__text").first.click()
    box = research.get_by_role("textbox", name="Text of step 1")
    expect(box).to_be_focused()
    box.fill("Find three recent field guides to tide pools")
    box.press("Enter")
    expect(page.locator(STATUS)).to_have_text("Saved: version 2.")
    expect(research.locator(".step__text").first).to_have_text("Find three recent field guides to tide pools")
    expect(research.get_by_role("link", name="Edit: step 1")).to_be_focused()

    # Escape cancels an edit and keeps the saved text.
    research.get_by_role("link", name="Edit: step 1").click()
    # Type once the page is quiet and the editor has focus (htmx settles it): typing earlier
    # raced the swap (text appended, or a fresh form replacing the typed one).
    page.wait_for_load_state("networkidle")
    expect(research.get_by_role("textbox", name="Text of step 1")).to_be_focused()
    research.get_by_role("textbox", name="Text of step 1").fill("Not this")
    research.get_by_role("textbox", name="Text of step 1").press("Escape")
    # The field closes (htmx fetches the card again) and focus goes back to its Edit link.
    expect(research.get_by_role("textbox", name="Text of step 1")).to_have_count(0)
    expect(research.get_by_role("link", name="Edit: step 1")).to_be_focused()
    expect(research.locator(".step__text").first).to_have_text("Find three recent field guides to tide pools")

    # An empty text is refused in place, and the field stays open.
    research.get_by_role("link", name="Edit: step 1").click()
    page.wait_for_load_state("networkidle")  # as above
    expect(research.get_by_role("textbox", name="Text of step 1")).to_be_focused()
    research.get_by_role("textbox", name="Text of step 1").fill("")
    research.get_by_role("button", name="Save").click()
    expect(research.get_by_role("alert")).to_contain_text("A step needs some text.")
    research.get_by_role("textbox", name="Text of step 1").fill("Find three recent field guides to tide pools!")
    research.get_by_role("textbox", name="Text of step 1").press("Enter")
    expect(page.locator(STATUS)).to_have_text("Saved: version 3.")

    # Add a step after step 1.
    research.get_by_role("link", name="Add after: step 1").click()
    new = research.get_by_role("textbox", name="Text of the new step after step 1")
    expect(new).to_be_focused()
    new.fill("Check the tide table for low tide times")
    new.press("Enter")
    expect(research.locator(".step__text")).to_have_count(count + 1)
    assert step_texts(research)[1] == "Check the tide table for low tide times"

    # Delete it, then Undo brings it back in its place.
    research.get_by_role("button", name="Delete: step 2").click()
    expect(research.locator(".step__text")).to_have_count(count)
    undo = research.get_by_role("button", name="Undo")
    expect(undo).to_be_focused()
    undo.click()
    expect(research.locator(".step__text")).to_have_count(count + 1)
    expect(research.locator(".step__text").nth(1)).to_have_text("Check the tide table for low tide times")
    assert first != step_texts(research)[0]

    # Leaving the field saves too.
    research.get_by_role("link", name="Edit: step 3").click()
    # Type once the page is quiet and the editor has focus (htmx settles it): typing earlier
    # raced the swap (text appended, or a fresh form replacing the typed one).
    page.wait_for_load_state("networkidle")
    expect(research.get_by_role("textbox", name="Text of step 3")).to_be_focused()
    research.get_by_role("textbox", name="Text of step 3").fill("Saved by clicking elsewhere")
    page.get_by_role("heading", level=1).click()
    expect(page.locator(STATUS)).to_have_text("Saved: version 7.")
    expect(research.locator(".step__text").nth(2)).to_have_text("Saved by clicking elsewhere")

    # Opening another step saves the one being edited, and both stay where they should.
    research.get_by_role("link", name="Edit: step 1").click()
    # Type once the page is quiet and the editor has focus (htmx settles it): typing earlier
    # raced the swap (text appended, or a fresh form replacing the typed one).
    page.wait_for_load_state("networkidle")
    expect(research.get_by_role("textbox", name="Text of step 1")).to_be_focused()
    research.get_by_role("textbox", name="Text of step 1").fill("Saved when step 2 opens")
    research.locator(".step").nth(1).locator(".step__text").click()
    expect(research.get_by_role("textbox", name="Text of step 2")).to_be_focused()
    expect(page.locator(STATUS)).to_have_text("Saved: version 8.")
    expect(research.locator(".step__text").first).to_have_text("Saved when step 2 opens")
    expect(research.get_by_role("textbox", name="Text of step 2")).to_be_visible()


def test_reorder_by_keyboard_and_by_drag_then_pin_and_regenerate(page: Page) -> None:
    draft_plan(page)
    research = task(page, "Research")
    before = step_texts(research)
    assert len(before) >= 3

    # Keyboard: focus Move down on step 1 and press Enter twice; focus follows the step.
    research.get_by_role("button", name="Move down: step 1").focus()
    page.keyboard.press("Enter")
    expect(research.locator(".step__text").nth(1)).to_have_text(before[0])
    expect(research.get_by_role("button", name="Move down: step 2")).to_be_focused()
    page.keyboard.press("Enter")
    expect(research.locator(".step__text").nth(2)).to_have_text(before[0])
    assert step_texts(research)[:2] == [before[1], before[2]]

    # Drag: the last step's handle onto the first step.
    now = step_texts(research)
    research.locator(".step__handle").last.drag_to(research.locator(".step").first)
    expect(research.locator(".step__text").first).to_have_text(now[-1])
    expect(page.locator(STATUS)).to_contain_text("New order saved")

    # Pin the first step, then regenerate the task with a note: the pinned step stays.
    pinned = step_texts(research)[0]
    research.get_by_role("button", name="Pin: step 1").click()
    expect(research.get_by_role("button", name="Unpin: step 1")).to_be_visible()
    expect(research.locator(".step--pinned")).to_have_count(1)
    research.get_by_text("Regenerate this task's unpinned steps").click()
    research.get_by_label("Note to the planner (optional)").fill("Keep it short")
    research.get_by_role("button", name="Regenerate steps").click()
    expect(page.locator(STATUS)).to_contain_text("New steps for “Research”.")
    expect(research.locator(".step__text").first).to_have_text(pinned)
    expect(research.locator(".step--pinned")).to_have_count(1)


def test_a_change_made_elsewhere_is_reported_and_the_typed_text_is_kept(page: Page, app_server: LiveServer) -> None:
    url = draft_plan(page)
    plan_id = int(re.search(r"/plans/(\d+)/", url).group(1))
    research = task(page, "Research")
    research.get_by_role("link", name="Edit: step 1").click()

    # Someone else saves a new version meanwhile.
    app_server.shell(
        "from crews.models import Plan; from crews import plans; "
        f"p = Plan.objects.get(pk={plan_id}); "
        "plans.plan_restore(actor=None, plan=p, number=1)"
    )
    box = research.get_by_role("textbox", name="Text of step 1")
    box.fill("My careful rewrite")
    box.press("Enter")
    expect(research.get_by_role("alert")).to_contain_text("This plan changed elsewhere")
    expect(research.get_by_role("link", name="Reload the plan").first).to_be_visible()
    expect(research.get_by_role("textbox", name="Text of step 1")).to_have_value("My careful rewrite")


def test_see_the_version_diff_then_approve_and_run(page: Page) -> None:
    draft_plan(page)
    research = task(page, "Research")
    research.get_by_role("link", name="Edit: step 1").click()
    # Type once the page is quiet and the editor has focus (htmx settles it): typing earlier
    # raced the swap (text appended, or a fresh form replacing the typed one).
    page.wait_for_load_state("networkidle")
    expect(research.get_by_role("textbox", name="Text of step 1")).to_be_focused()
    research.get_by_role("textbox", name="Text of step 1").fill("Survey the rock pools at low tide")
    research.get_by_role("textbox", name="Text of step 1").press("Enter")
    expect(page.locator(STATUS)).to_have_text("Saved: version 2.")
    research.get_by_role("button", name="Move down: step 1").click()
    expect(page.locator(STATUS)).to_contain_text("moved down")

    versions = page.get_by_role("region", name="Versions")
    expect(versions.get_by_role("listitem")).to_have_count(3)
    versions.get_by_role("combobox", name="From version").select_option("1")
    versions.get_by_role("combobox", name="To version").select_option("3")
    versions.get_by_role("button", name="Compare").click()
    diff = page.get_by_role("region", name="Changes from v1 to v3")
    expect(diff).to_be_focused()
    expect(diff).to_contain_text("1 changed")
    expect(diff).to_contain_text("1 moved")
    expect(diff.locator("ins")).to_contain_text("Survey the rock pools at low tide")

    versions.get_by_role("link", name="Changes in version 2").click()
    expect(page.get_by_role("region", name="Changes from v1 to v2")).to_contain_text("1 changed")

    page.get_by_role("button", name="Approve & run").click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))


def test_the_editor_works_without_javascript(browser: Browser, app_server: LiveServer) -> None:
    context = browser.new_context(base_url=app_server.url, java_script_enabled=False)
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        sign_in(page)
        page.get_by_role("link", name="AI LLMs").first.click()
        page.get_by_role("button", name="Draft plan").click()
        expect(page).to_have_url(re.compile(r"/plans/\d+/$"))
        # Without JavaScript a drafting page refreshes itself (<noscript> meta refresh).
        research = task(page, "Research")
        expect(research.locator(".step__text").first).to_be_visible()
        second = step_texts(research)[1]

        research.get_by_role("link", name="Edit: step 1").click()
        # Type once the page is quiet and the editor has focus (htmx settles it): typing earlier
        # raced the swap (text appended, or a fresh form replacing the typed one).
        page.wait_for_load_state("networkidle")
        expect(research.get_by_role("textbox", name="Text of step 1")).to_be_focused()
        research.get_by_role("textbox", name="Text of step 1").fill("Edited with a plain form")
        research.get_by_role("button", name="Save").click()
        expect(research.locator(".step__text").first).to_have_text("Edited with a plain form")

        research.get_by_role("button", name="Move down: step 1").click()
        expect(research.locator(".step__text").first).to_have_text(second)

        research.get_by_role("button", name="Delete: step 1").click()
        expect(research.locator(".step__text").first).not_to_have_text(second)
        research.get_by_role("button", name="Undo").click()
        expect(research.locator(".step__text").first).to_have_text(second)

        page.get_by_role("link", name="Changes in version 4").click()
        expect(page.get_by_role("region", name="Changes from v3 to v4")).to_contain_text("1 removed")
    finally:
        context.close()


def test_a_steps_actions_show_on_hover_and_on_keyboard_focus_only(page: Page) -> None:
    draft_plan(page)
    research = task(page, "Research")
    first, second = research.get_by_role("listitem").nth(0), research.get_by_role("listitem").nth(1)
    actions = second.locator(".step__actions")
    page.mouse.move(0, 0)
    expect(actions).to_have_css("opacity", "0")  # a plan is not a wall of buttons

    second.hover()
    expect(actions).to_have_css("opacity", "1")
    page.mouse.move(0, 0)
    expect(actions).to_have_css("opacity", "0")

    # From the keyboard: tabbing onto the step (its shortcuts act on it) and into its actions
    # shows them.
    first.get_by_role("button", name="Delete: step 1").focus()
    page.keyboard.press("Tab")
    expect(second).to_be_focused()
    expect(actions).to_have_css("opacity", "1")
    page.keyboard.press("Tab")
    expect(second.get_by_role("link", name="Edit: step 2")).to_be_focused()
    expect(actions).to_have_css("opacity", "1")


def test_keyboard_shortcuts_act_on_the_focused_step_and_not_while_typing(page: Page) -> None:
    draft_plan(page)
    research = task(page, "Research")
    before = step_texts(research)
    assert len(before) >= 3
    cards = research.locator(".step")

    # "?" opens the list of shortcuts.
    page.keyboard.press("?")
    shortcuts = page.locator("#plan-shortcuts")
    expect(shortcuts.get_by_text("Move it up or down")).to_be_visible()
    expect(shortcuts.get_by_text("Keyboard shortcuts")).to_be_focused()

    # Alt+ArrowDown moves the focused step down, and the focus stays on it.
    cards.first.focus()
    page.keyboard.press("Alt+ArrowDown")
    expect(page.locator(STATUS)).to_have_text(f"Step moved down: now step 2 of {len(before)}.")
    expect(cards.nth(1).locator(".step__text")).to_have_text(before[0])
    expect(cards.nth(1)).to_be_focused()

    # P pins it.
    page.keyboard.press("p")
    expect(page.locator(STATUS)).to_have_text("Step 2 pinned.")
    expect(cards.nth(1)).to_have_class(re.compile(r"\bstep--pinned\b"))
    expect(cards.nth(1)).to_be_focused()

    # A key held down acts once: the second keydown is a repeat, and P then neither pins nor
    # unpins again (the reload below counts the versions).
    page.keyboard.down("p")
    expect(page.locator(STATUS)).to_have_text("Step 2 unpinned.")
    expect(cards.nth(1)).to_be_focused()
    page.keyboard.down("p")  # Playwright sends it with repeat set, as a held key does
    page.keyboard.up("p")
    page.keyboard.press("p")
    expect(page.locator(STATUS)).to_have_text("Step 2 pinned.")
    expect(cards.nth(1)).to_have_class(re.compile(r"\bstep--pinned\b"))
    expect(cards.nth(1)).to_be_focused()

    # E edits it; while typing, the shortcut keys are only text.
    page.keyboard.press("e")
    box = research.get_by_role("textbox", name="Text of step 2")
    page.wait_for_load_state("networkidle")  # type once htmx settled the form (see above)
    expect(box).to_be_focused()
    box.fill("Ask the ranger")
    box.press("End")
    for key in ("p", "e", "a", "Delete", "Alt+ArrowUp", "?"):
        box.press(key)
    expect(box).to_have_value("Ask the rangerpea?")
    expect(shortcuts).to_have_attribute("open", "")  # "?" in the field did not close the list
    box.press("Enter")
    expect(page.locator(STATUS)).to_have_text("Saved: version 6.")

    # The arrow keys walk to the next step; Delete deletes it, with Undo where it was.
    cards.nth(1).focus()
    page.keyboard.press("ArrowDown")
    expect(cards.nth(2)).to_be_focused()
    gone = step_texts(research)[2]
    page.keyboard.press("Delete")
    expect(page.locator(STATUS)).to_have_text("Step 3 deleted.")
    expect(research.get_by_role("button", name="Undo")).to_be_focused()
    expect(cards).to_have_count(len(before) - 1)

    # Saved, every one of them: a reload shows the move, the pin, the edit and the delete, and
    # the keys typed in the field saved nothing else (seven versions: draft and six edits).
    page.reload()
    expect(research.locator(".step__text")).to_have_count(len(before) - 1)
    texts = step_texts(research)
    assert texts[:2] == [before[1], "Ask the rangerpea?"] and gone not in texts
    expect(research.locator(".step").nth(1)).to_have_class(re.compile(r"\bstep--pinned\b"))
    expect(page.get_by_role("region", name="Versions").get_by_role("listitem")).to_have_count(7)


def test_at_360_px_the_save_message_and_undo_show_where_the_eye_is(page: Page) -> None:
    page.set_viewport_size({"width": 360, "height": 740})
    draft_plan(page)
    report = task(page, "Report")
    last = report.locator(".step").last
    last.scroll_into_view_if_needed()

    last.get_by_role("button", name=re.compile(r"^Pin: step \d+$")).click()
    status = page.locator(STATUS)
    expect(status).to_have_text(re.compile(r"^Step \d+ pinned\.$"))
    expect(status).to_be_in_viewport()
    expect(status).to_have_css("opacity", "1")
    expect(status).to_have_attribute("aria-live", "polite")

    report.locator(".step").last.get_by_role("button", name=re.compile(r"^Delete: step \d+$")).click()
    undo = report.get_by_role("button", name="Undo")
    expect(undo).to_be_focused()
    expect(undo).to_be_in_viewport()
    expect(status).to_have_text(re.compile(r"^Step \d+ deleted\.$"))
    expect(status).to_be_in_viewport()
