"""From the admin's pages to a builder's plan: an admin adds an LLM pointing at the fake
OpenAI-compatible server, tests it, makes it the site default and edits the crew planner's
prompt; then a builder, in a browser of their own, drafts a plan for a crew whose agents have no
LLM of their own, and the fake server's request log shows that plan asked of that LLM with that
prompt."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import PASSWORD, LiveServer, sign_in
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.plain_models import answers

PLAN = {
    "plans": [
        {"task_number": 1, "steps": ["Gather the harbour's tide tables", "Mark the spring tides"]},
        {"task_number": 2, "steps": ["Write the sailing notice from the marked tables"]},
    ]
}

# The builder's crew: its agents have no LLM, the crew no planning LLM, so the site default plans.
CREW = """
import json
from django.contrib.auth import get_user_model
from agents.models import Agent
from crews.models import Crew, Task

owner = get_user_model().objects.get(username=USERNAME)
harbour = Agent.objects.create(owner=owner, name="Harbour clerk", role="Harbour clerk",
    goal="Keep the tide tables for {harbour}")
writer = Agent.objects.create(owner=owner, name="Notice writer", role="Notice writer", goal="Write notices")
crew = Crew.objects.create(owner=owner, name="Harbour notices", planning=True)
crew.agents.set([harbour, writer])
Task.objects.create(crew=crew, order=0, name="Tides", agent=harbour,
    description="Find this month's spring tides in {harbour}.", expected_output="The dates and heights")
Task.objects.create(crew=crew, order=1, name="Notice", agent=writer,
    description="Write a notice for sailors.", expected_output="One paragraph")
print(json.dumps({"crew": crew.pk}))
"""


@pytest.fixture
def fake_model(app_server: LiveServer) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.default = answers(PLAN)
        yield server
    # Later journeys expect the demo model as the site default and the seeded planner prompt.
    app_server.shell(
        "from agents.models import LLM, PromptTemplateVersion; "
        "LLM.objects.filter(builtin=False).update(is_default=False); "
        "LLM.objects.filter(builtin=True).update(is_default=True); "
        "PromptTemplateVersion.objects.filter(template__key='crew_plan', number__gt=1).delete(); "
        # What those saves said: the versions page pairs audit entries with version numbers.
        "from planner_site.models import AuditEvent; "
        "AuditEvent.objects.filter(action='prompt.updated', target_type='prompttemplate').delete()"
    )


@pytest.fixture
def builder_crew(app_server: LiveServer) -> tuple[str, int]:
    username = f"bea{secrets.token_hex(3)}"  # the journeys share one server
    app_server.manage("bootstrap", "--username", username, "--password", PASSWORD, "--role", "builder")
    out = app_server.shell(CREW.replace("USERNAME", json.dumps(username)))
    return username, json.loads(out.strip().splitlines()[-1])["crew"]


def test_an_admin_sets_up_an_llm_and_the_planner_prompt_and_a_builders_plan_uses_both(
    page: Page, browser: Browser, app_server: LiveServer, fake_model: FakeLLMServer,
    builder_crew: tuple[str, int],
) -> None:
    model_name = f"harbour-{secrets.token_hex(3)}"
    llm_name = f"Harbour model {model_name[-6:]}"
    sentence = f"Always mention the harbour master ({secrets.token_hex(4)})."

    # The admin adds the LLM, tests it, and makes it the site default.
    sign_in(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="LLMs").click()
    page.get_by_role("link", name="Add an LLM").click()
    page.get_by_label("Name").fill(llm_name)
    page.get_by_role("textbox", name=re.compile(r"^Model")).fill(f"openai/{model_name}")
    page.get_by_label("API base").fill(fake_model.base_url)
    page.get_by_role("button", name="Add LLM").click()
    expect(page.get_by_role("heading", level=1, name=llm_name, exact=True)).to_be_visible()

    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#llm-test-status")).to_contain_text(
        re.compile(r"The connection works \(answered in \d+ ms\)"), timeout=30_000)

    page.get_by_role("link", name="Edit LLM").click()
    page.get_by_label("Site default").check()
    page.get_by_role("button", name="Save LLM").click()
    expect(page.get_by_role("status").filter(has_text=f"LLM “{llm_name}” saved.")).to_be_visible()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="LLMs").click()
    card = page.get_by_role("listitem").filter(has=page.get_by_role("link", name=llm_name))
    expect(card).to_contain_text("Site default")

    # The admin adds a sentence to the crew planner's prompt.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Prompts").click()
    page.get_by_role("link", name="Crew planner", exact=True).click()
    text = page.get_by_role("textbox", name="Prompt text")
    text.fill(text.input_value() + "\n" + sentence)
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.get_by_role("status").filter(has_text=re.compile(r"Saved as version \d+"))).to_be_visible()

    # The builder, in a browser of their own, drafts a plan.
    username, crew_id = builder_crew
    sent_before = fake_model.request_count
    context = browser.new_context(base_url=app_server.url, viewport={"width": 1280, "height": 900})
    try:
        builder = context.new_page()
        builder.set_default_timeout(15_000)
        sign_in(builder, username)
        builder.goto(f"/crews/{crew_id}/")
        kickoff = builder.get_by_role("region", name="Run this crew")
        kickoff.get_by_label("{harbour}").fill("Lisbon")
        kickoff.get_by_role("button", name="Draft plan").click()
        expect(builder).to_have_url(re.compile(r"/plans/\d+/$"))
        expect(builder.get_by_text("Gather the harbour's tide tables")).to_be_visible(timeout=20_000)
        expect(builder.get_by_text("Write the sailing notice from the marked tables")).to_be_visible()
    finally:
        context.close()

    drafted = fake_model.requests[sent_before:]
    assert drafted, "the plan was not drafted through the new default LLM"
    assert {request.model for request in drafted} == {model_name}
    sent = [json.dumps(request.messages) for request in drafted]
    assert any(sentence in messages and "Find this month's spring tides in Lisbon." in messages for messages in sent), sent
