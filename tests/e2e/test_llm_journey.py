"""An admin adds a local model with the Ollama preset, tests it, and drafts a plan through it.

The "local model" is the fake OpenAI-compatible server in this process, answering like
llama-cpp-python's server: it refuses a ``json_schema`` response format, which the test finds
and the plan's drafting then never sends.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in
from tests.e2e.test_accessibility import assert_accessible
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.plain_models import answers, forms_sent, refuses_json_schema

SHOTS = Path("/tmp/shots")
PLAN = {
    "plans": [
        {"task_number": 1, "steps": ["List the newest papers on tide pools", "Summarise their findings"]},
        {"task_number": 2, "steps": ["Write the report from the summary"]},
    ]
}


@pytest.fixture
def local_model(app_server: LiveServer) -> Iterator[FakeLLMServer]:
    last_plan = app_server.shell(
        "from crews.models import Plan; print(Plan.objects.order_by('-pk').values_list('pk', flat=True).first() or 0)"
    ).strip().splitlines()[-1]
    with FakeLLMServer() as server:
        server.default = refuses_json_schema(answers(PLAN))
        server.pages["/api/ps"] = {"models": [{"name": "smollm2", "context_length": 8192}]}
        yield server
    # Later journeys expect the demo model as the site default and the demo crew's plans as
    # they left them.
    app_server.shell(
        "from agents.models import LLM; from crews.models import Plan; "
        "LLM.objects.filter(builtin=False).update(is_default=False); "
        "LLM.objects.filter(builtin=True).update(is_default=True); "
        f"Plan.objects.filter(pk__gt={int(last_plan)}).delete()"
    )


def test_add_an_ollama_model_test_it_and_draft_a_plan_through_it(page: Page, local_model: FakeLLMServer) -> None:
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="LLMs").click()
    page.get_by_role("link", name="Add an LLM").click()

    # The preset fills the form in (htmx posts it on change; the button does it without JS).
    page.get_by_label("Preset").select_option(label="Ollama")
    expect(page.get_by_label("API base")).to_have_value("http://localhost:11434/v1")
    expect(page.get_by_role("textbox", name=re.compile(r"^Model"))).to_have_value("openai/llama3.2")
    expect(page.get_by_label("Context window")).to_have_value("4096")
    expect(page.get_by_label("Parameters")).to_contain_text("first_token_timeout")
    assert_accessible(page, "the LLM add form with a preset applied")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "llm-add-form-ollama-preset.png"), full_page=True)

    page.get_by_label("Name").fill("Tide model")
    page.get_by_role("textbox", name=re.compile(r"^Model")).fill("openai/smollm2")
    page.get_by_label("API base").fill(local_model.base_url)
    page.get_by_label("Context window").fill("32000")
    page.get_by_label("Site default").check()
    page.get_by_role("button", name="Add LLM").click()

    expect(page.get_by_role("heading", level=1, name="Tide model")).to_be_visible()
    expect(page.get_by_role("status").filter(has_text="added")).to_be_visible()
    page.get_by_role("button", name="Test connection").click()
    capabilities = page.locator("#llm-capabilities")
    expect(capabilities.get_by_role("status")).to_contain_text("The connection works", timeout=40_000)
    expect(row(page, "JSON schema answers")).to_contain_text("Refused")
    expect(row(page, "JSON answers (json_object)")).to_contain_text("Accepted")
    expect(row(page, "Native tool calls")).to_contain_text("Accepted")
    expect(row(page, "Streaming")).to_contain_text("Accepted")
    expect(row(page, "Context window on the server")).to_contain_text("8192")
    expect(capabilities).to_contain_text("the server runs with 8192")

    page.set_viewport_size({"width": 1366, "height": 900})
    page.screenshot(path=str(SHOTS / "llm-page-1366.png"), full_page=True)
    assert_accessible(page, "the LLM page after a test")
    page.set_viewport_size({"width": 360, "height": 780})
    page.screenshot(path=str(SHOTS / "llm-page-360.png"), full_page=True)
    assert_accessible(page, "the LLM page at 360 px")
    page.set_viewport_size({"width": 1280, "height": 900})

    # The new default drafts the demo crew's plan, never sending the refused form again.
    sent_before = len(local_model.requests)
    page.get_by_role("link", name="Crews").click()
    page.get_by_role("link", name="AI LLMs").first.click()
    kickoff = page.get_by_role("region", name="Run this crew")
    kickoff.get_by_label("{topic}").fill("tide pools")
    kickoff.get_by_role("button", name="Draft plan").click()
    expect(page).to_have_url(re.compile(r"/plans/\d+/$"))
    expect(page.get_by_text("List the newest papers on tide pools")).to_be_visible(timeout=40_000)
    expect(page.get_by_text("Write the report from the summary")).to_be_visible()
    drafted = forms_sent(local_model)[sent_before:]
    assert drafted and "json_schema" not in drafted, drafted


def row(page: Page, header: str):  # noqa: ANN201 - a Playwright Locator
    return page.locator("#llm-capabilities tr").filter(has=page.get_by_role("rowheader", name=header))
