"""A tool that needs a person's approval: the run asks inline, the person decides, the agent goes on.

The crews run on the offline demo model (the site default after ``seed``): when a task holds a
sum and its agent has the calculator, the demo model's first ReAct turn calls the calculator,
so an agent whose calculator is set to "Ask a person before each use" makes the run wait for
an approval. What the person decides reaches the agent as the tool's observation, and the demo
model's answer quotes the observation it got: that is what the run page shows in the end.
"""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in

SETUP = """
import json
from django.contrib.auth import get_user_model
from agents.models import Agent
from crews.models import Crew, Task

owner = get_user_model().objects.get(username="ada")
agent = Agent.objects.create(owner=owner, name={name!r} + " bookkeeper", role="Bookkeeper",
    goal="Keep the picnic budget right", tools=["calculator"],
    tool_options={{"calculator": {{"needs_approval": True}}}})
crew = Crew.objects.create(owner=owner, name={name!r})
crew.agents.set([agent])
task = Task.objects.create(crew=crew, order=0, name="Price the sandwiches", agent=agent,
    description="Work out 12 * 7 for the sandwiches", expected_output="The total in euros")
print(json.dumps({{"crew": crew.pk, "task": task.pk}}))
"""


def make_crew(server: LiveServer, name: str) -> dict[str, Any]:
    """A one-task crew whose agent must ask before each use of the calculator (demo model)."""
    out = server.shell(SETUP.format(name=name)).strip().splitlines()
    return json.loads(out[-1])


def run_it_and_wait_for_the_approval(page: Page, ids: dict[str, Any]) -> Any:
    """Run now from the crew page; the run page then asks about the calculator inline."""
    sign_in(page)
    page.goto(f"/crews/{ids['crew']}/")
    page.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    expect(page.locator("#run-status")).to_have_attribute("data-status", "awaiting_input", timeout=20_000)
    expect(page.locator("#run-notice")).to_contain_text("A tool call waits for approval.")
    task = page.locator(f"#task-{ids['task']}")
    prompt = task.locator(".prompt--approval")
    expect(prompt.get_by_role("heading", name="The agent wants to use “calculator”")).to_be_visible()
    expect(prompt.locator(".prompt__args pre")).to_have_text("expression: 12 * 7")
    expect(task.locator(".task-head .badge").first).to_have_text("Waiting for you")
    return task


def test_deny_a_tool_call_and_the_agent_goes_on_without_it(page: Page, app_server: LiveServer) -> None:
    ids = make_crew(app_server, "Picnic, denied")
    task = run_it_and_wait_for_the_approval(page, ids)
    prompt = task.locator(".prompt--approval")

    prompt.get_by_label("Note for the agent (optional)").fill("Use the price list instead")
    prompt.get_by_role("button", name="Deny").click()

    # The decision shows at once; the socket then brings the agent's side of it.
    expect(prompt.locator(".badge--danger")).to_have_text("Denied", timeout=20_000)
    expect(prompt).to_contain_text("Use the price list instead")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=20_000)
    # The denial reached the agent as the calculator's observation: its answer quotes it.
    answer = task.locator(".answer")
    expect(answer).to_contain_text("denied the use of 'calculator'")
    expect(answer).to_contain_text("Their note: Use the price list instead")
    # The calculator never ran: its call is not in the task's activity.
    expect(task.locator(".entry--tool")).to_have_count(0)


def test_approve_a_tool_call_and_its_result_reaches_the_agent(page: Page, app_server: LiveServer) -> None:
    ids = make_crew(app_server, "Picnic, approved")
    task = run_it_and_wait_for_the_approval(page, ids)
    prompt = task.locator(".prompt--approval")

    prompt.get_by_role("button", name="Approve").click()

    expect(prompt.locator(".badge--success")).to_have_text("Approved", timeout=20_000)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=20_000)
    tool = task.locator(".entry--tool")
    expect(tool).to_have_count(1)
    expect(tool.locator("summary")).to_contain_text("calculator")
    expect(task.locator(".answer")).to_contain_text("The tool returned: 84")
