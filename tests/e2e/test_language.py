"""Switching to Brazilian Portuguese with the language switch in the page header, and back: a
choice applies at once (the button is only there without JavaScript)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import sign_in


def test_switch_to_portuguese_see_the_crews_in_portuguese_and_switch_back(page: Page) -> None:
    sign_in(page)
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Crews")).to_be_visible()

    expect(page.get_by_role("button", name="Change language")).to_have_count(0)
    page.get_by_label("Language").select_option(label="Português Brasileiro")

    # The same page comes back in Portuguese: the header, the navigation and the page itself.
    expect(page).to_have_url(re.compile(r"/crews/$"))
    expect(page.locator("html")).to_have_attribute("lang", "pt-br")
    nav = page.get_by_role("navigation", name="Principal")
    expect(nav.get_by_role("link", name="Equipes")).to_be_visible()
    expect(nav.get_by_role("link", name="Agentes")).to_be_visible()
    expect(page.get_by_label("Idioma")).to_have_value("pt-br")
    expect(page.locator(".banner")).to_contain_text("Modo de demonstração.")

    page.get_by_role("link", name="AI LLMs").first.click()
    expect(page.get_by_role("heading", level=1, name="AI LLMs")).to_be_visible()
    expect(page.get_by_role("heading", name="Tarefas", exact=True)).to_be_visible()
    expect(page.get_by_role("link", name="Editar: Research")).to_be_visible()
    expect(page.get_by_role("button", name="Executar agora")).to_be_visible()
    expect(page.get_by_role("button", name="Rascunhar plano")).to_be_visible()
    expect(page.get_by_text("Run now", exact=True)).to_have_count(0)

    # Back to English from the crew's page, which stays open.
    crew_url = page.url
    page.get_by_label("Idioma").select_option(label="English")
    expect(page).to_have_url(crew_url)
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Crews")).to_be_visible()
    expect(page.get_by_role("button", name="Run now")).to_be_visible()
    expect(page.get_by_role("heading", name="Tasks", exact=True)).to_be_visible()
