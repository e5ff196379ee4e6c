"""The language switch works whatever scripts ran: with app.js a choice applies at once and its
button is gone; without JavaScript, or with app.js failing to load, the button is there and sends it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import LiveServer


@pytest.fixture
def page_without_js(browser: Browser, app_server: LiveServer) -> Iterator[Page]:
    context = browser.new_context(base_url=app_server.url, java_script_enabled=False)
    yield context.new_page()
    context.close()


def test_with_javascript_a_choice_applies_at_once_and_the_button_is_gone(page: Page) -> None:
    page.goto("/login/")
    expect(page.locator("#language-select")).to_be_visible()
    expect(page.locator("#language-submit")).to_have_count(0)  # app.js removed it
    page.get_by_label("Language").select_option("pt-br")
    expect(page.locator("html")).to_have_attribute("lang", "pt-br")
    expect(page).to_have_url(re.compile(r"/login/$"))
    page.get_by_label("Idioma").select_option("en")
    expect(page.locator("html")).to_have_attribute("lang", "en")


def test_with_app_js_failing_to_load_the_button_is_there_and_works(page: Page) -> None:
    page.route(re.compile(r"/static/app(\.[0-9a-f]+)?\.js$"), lambda route: route.abort())
    page.goto("/login/")
    button = page.get_by_role("button", name="Change language")
    expect(button).to_be_visible()
    page.get_by_label("Language").select_option("pt-br")
    expect(page.locator("html")).to_have_attribute("lang", "en")  # choosing alone sends nothing
    button.click()
    expect(page.locator("html")).to_have_attribute("lang", "pt-br")
    page.get_by_label("Idioma").select_option("en")
    page.get_by_role("button", name="Mudar idioma").click()
    expect(page.locator("html")).to_have_attribute("lang", "en")


def test_without_javascript_the_button_sends_the_choice(page_without_js: Page) -> None:
    page = page_without_js
    page.goto("/login/")
    page.get_by_label("Language").select_option("pt-br")
    page.get_by_role("button", name="Change language").click()
    expect(page.locator("html")).to_have_attribute("lang", "pt-br")
    expect(page.get_by_role("button", name="Mudar idioma")).to_be_visible()
