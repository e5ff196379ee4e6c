"""The Content-Security-Policy in a real browser: the main pages (and their htmx swaps, the plan
editor's polling, the run page's live websocket, the admin, the API docs) raise no
``securitypolicyviolation`` and log no CSP error in Chromium."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import ConsoleMessage, Page, expect

from tests.e2e.conftest import LiveServer, sign_in, wait_until
from tests.e2e.test_demo_journey import SETUP

# Every document the page opens records what the policy blocked (before any script of its own).
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push([e.effectiveDirective, e.blockedURI, e.sourceFile + ":" + e.lineNumber, e.sample].join(" | "));
}, true);
"""
CSP_WORDS = re.compile(r"Content Security Policy|Content-Security-Policy|Refused to", re.I)


@pytest.fixture
def csp_errors(page: Page) -> Iterator[list[str]]:
    """The console's CSP complaints, as the page logs them."""
    found: list[str] = []

    def heard(message: ConsoleMessage) -> None:
        if CSP_WORDS.search(message.text):
            found.append(f"{message.type}: {message.text}")

    page.add_init_script(RECORD_VIOLATIONS)
    page.on("console", heard)
    yield found


def assert_no_violation(page: Page, csp_errors: list[str], where: str) -> None:
    violations = page.evaluate("window.__csp || []")
    assert violations == [], f"{where}: {violations}"
    assert csp_errors == [], f"{where}: {csp_errors}"


def test_the_main_pages_meet_the_content_security_policy(
        page: Page, app_server: LiveServer, csp_errors: list[str]) -> None:
    crew = json.loads(app_server.shell(SETUP).strip().splitlines()[-1])["crew"]
    page.goto("/login/")
    expect(page.get_by_role("button", name=re.compile("sign in|log in", re.I))).to_be_visible()
    assert_no_violation(page, csp_errors, "login")

    sign_in(page)
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    assert_no_violation(page, csp_errors, "crew list")

    page.goto(f"/crews/{crew}/")
    page.get_by_role("link", name="Delete", exact=True).click()  # htmx loads the confirmation into the page
    expect(page.get_by_role("button", name="Delete crew")).to_be_visible()
    assert_no_violation(page, csp_errors, "crew page")

    # The plan editor, filled in by htmx polling while the (paced) demo model drafts.
    page.get_by_role("region", name="Run this crew").get_by_role("button", name="Draft plan").click()
    approve = page.get_by_role("button", name="Approve & run")
    expect(approve).to_be_enabled(timeout=60_000)
    assert_no_violation(page, csp_errors, "plan editor")

    # The run page, live over its websocket (connect-src 'self' covers ws: to the same origin).
    approve.click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/"), timeout=20_000)
    expect(page.locator("#conn-status")).to_have_text("Live", timeout=20_000)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "running", timeout=20_000)
    wait_until(page, "document.querySelectorAll('#run-events li').length >= 5", timeout=30_000)
    assert_no_violation(page, csp_errors, "run page, live")
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#run-status")).to_have_text("Stopped", timeout=15_000)
    assert_no_violation(page, csp_errors, "run page, stopped")

    for path, what in [("/runs/", "run history"), ("/agents/", "agent list"), ("/llms/", "LLM list"),
                       ("/llms/new/", "LLM form"), ("/prompts/", "prompt templates")]:
        page.goto(path)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        assert_no_violation(page, csp_errors, what)

    # An LLM's page: Test connection shows htmx's request indicator (app.css, not htmx's <style>).
    page.goto("/llms/")
    page.get_by_role("main").get_by_role("link").filter(has_text=re.compile("demo", re.I)).first.click()
    page.get_by_role("button", name="Test connection").click()
    expect(page.get_by_role("button", name="Test connection")).to_be_enabled(timeout=40_000)
    assert_no_violation(page, csp_errors, "LLM page")


def test_the_admin_and_the_api_docs_meet_the_content_security_policy(
        page: Page, app_server: LiveServer, csp_errors: list[str]) -> None:
    sign_in(page)
    for path in ("/admin/", "/admin/crews/crew/", "/admin/auth/user/1/change/"):
        page.goto(path)
        expect(page.locator("#content")).to_be_visible()
        assert_no_violation(page, csp_errors, path)

    page.goto("/api/docs")
    expect(page.locator(".swagger-ui .info")).to_be_visible(timeout=20_000)
    assert_no_violation(page, csp_errors, "/api/docs")
