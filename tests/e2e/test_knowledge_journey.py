"""Knowledge sources (issue #19): a person uploads a file to an agent, watches it index, runs a
task and sees, beside the task, the snippet the agent was given. The model is the fake
OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in
from tests.fakes.openai_server import FakeLLMServer, Reply

FACT = "The lighthouse keeper of Ilha Verde is Marta Quill, since 1987."

SETUP = """
import json
from django.contrib.auth import get_user_model
from agents.models import LLM, Agent
from crews.models import Crew, Task

owner = get_user_model().objects.get(username="ada")
llm, _ = LLM.objects.update_or_create(name="Fake knowledge model", defaults=dict(
    model="openai/test", api_base={base_url!r}, supports_tools=False))
llm.set_api_key("sk-test-123456")
llm.save()
agent = Agent.objects.create(owner=owner, name="Island researcher", role="Researcher", goal="Find facts", llm=llm)
crew = Crew.objects.create(owner=owner, name="Island facts")
crew.agents.set([agent])
Task.objects.create(crew=crew, order=0, name="Keeper", agent=agent,
    description="Who is the lighthouse keeper of Ilha Verde?", expected_output="A name")
print(json.dumps({{"crew": crew.pk, "agent": agent.pk}}))
"""


@pytest.fixture
def fake_model() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.default = Reply.text("Final Answer: Marta Quill")
        yield server


def shell_json(server: LiveServer, code: str) -> Any:
    return json.loads(server.shell(code).strip().splitlines()[-1])


def test_upload_a_file_to_an_agent_watch_it_index_run_and_see_the_snippet(
        page: Page, app_server: LiveServer, fake_model: FakeLLMServer, tmp_path) -> None:
    ids = shell_json(app_server, SETUP.format(base_url=fake_model.base_url))
    notes = tmp_path / "keepers.md"
    notes.write_text(f"# Keepers\n\n{FACT}\n")
    sign_in(page)

    page.goto(f"/agents/{ids['agent']}/")
    page.get_by_role("link", name="Knowledge sources").click()
    page.get_by_label("Title").fill("Keepers")
    page.get_by_label("File").set_input_files(str(notes))
    page.get_by_role("button", name="Add source").click()
    # The rows poll while the source is queued or indexing, until it is indexed.
    expect(page.get_by_text("Indexed: 1 chunk")).to_be_visible(timeout=30_000)

    page.goto(f"/crews/{ids['crew']}/")
    page.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile("succeeded|failed"), timeout=90_000)
    assert status.get_attribute("data-status") == "succeeded", page.locator("main").inner_text()
    # The task's activity is folded by default: unfold it, as a person would.
    page.locator("details.activity").evaluate_all("els => els.forEach(e => { e.open = true; })")
    expect(page.get_by_text(re.compile("Knowledge used: 1 passage from Keepers"))).to_be_visible()
    expect(page.get_by_text(re.compile("Marta Quill, since 1987"))).to_be_visible()
    assert any(FACT in r.raw.decode() for r in fake_model.requests)
