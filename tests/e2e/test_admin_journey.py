"""An admin runs the installation from the browser: invites a builder, sets their daily budget,
opens usage and the audit log and finds the invitation there; the builder's token is shown once."""

from __future__ import annotations

import re
import secrets

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in
from tests.e2e.test_accessibility import assert_accessible


def test_an_admin_invites_a_builder_sets_a_budget_and_finds_the_invite_in_the_audit_log(page: Page) -> None:
    name = f"bruna{secrets.token_hex(3)}"  # the journeys share one server
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Admin").click()
    expect(page.get_by_role("heading", level=1, name="People")).to_be_visible()
    assert_accessible(page, "the people page")

    page.get_by_role("link", name="Invite someone").click()
    page.get_by_label("Username").fill(name)
    page.get_by_label("Email").fill(f"{name}@example.com")
    page.get_by_role("radio", name=re.compile("^Builder")).check()
    page.get_by_label("First password").fill("a long first pass 42")
    assert_accessible(page, "the invite form")
    page.get_by_role("button", name="Invite").click()

    expect(page.get_by_role("heading", level=1, name=name)).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text(f"{name} can now sign in")
    page.get_by_label("Daily budget (USD)").fill("5")
    page.get_by_role("button", name="Save budget").click()
    expect(page.get_by_role("status")).to_contain_text(f"{name}'s daily budget: $5.00")
    assert_accessible(page, "a person's page")

    admin_area = page.get_by_role("navigation", name="Admin")
    admin_area.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", level=1, name="Usage and cost")).to_be_visible()
    expect(page.get_by_role("img", name="Cost per day")).to_be_visible()
    assert_accessible(page, "the usage page")

    admin_area.get_by_role("link", name="Audit log").click()
    page.get_by_label("Action").select_option(value="user.invited")
    page.get_by_role("button", name="Filter").click()
    invited = page.get_by_role("row").filter(has_text=name).first
    expect(invited).to_contain_text("Person invited")
    expect(invited).to_contain_text("ada")
    assert_accessible(page, "the audit log")


def test_a_person_creates_an_api_token_copies_it_and_revokes_it(page: Page) -> None:
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Admin").click()
    page.get_by_role("navigation", name="Admin").get_by_role("link", name="API tokens").click()
    token_name = f"script {secrets.token_hex(3)}"
    page.get_by_label("Name").fill(token_name)
    page.get_by_role("button", name="Create a token").click()

    token = page.get_by_label("New API token")
    expect(token).to_have_value(re.compile(r"^cp_"))
    page.get_by_role("button", name="Copy", exact=True).click()
    # Headless Chromium may refuse the clipboard: then the token is selected for Ctrl+C instead.
    expect(page.locator("#copy-status")).to_have_text(re.compile("Copied to the clipboard|Selected"))
    assert_accessible(page, "a new token")

    page.goto("/account/tokens/")
    expect(page.get_by_label("New API token")).to_have_count(0)  # shown once
    page.get_by_role("row").filter(has_text=token_name).get_by_role("button", name=re.compile("^Revoke")).click()
    expect(page.get_by_role("status")).to_contain_text("is revoked")
    expect(page.get_by_role("row").filter(has_text=token_name)).to_have_count(0)
