"""Answers a crew can rely on (issue #18): a person gives a task a shape with the schema builder and
a criterion, runs the crew and reads the answer as a table, with each check attempt and why one
failed. The model is the fake OpenAI-compatible server: its first answer misses the criterion."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

TRIPS = [{"city": "Lisbon", "days": 2}, {"city": "Porto", "days": 1}]


class CheckedModel:
    """Answers Porto alone first (natively shaped), which the criterion's check fails; the agent's
    second answer, sent the reasons, names Lisbon too and passes."""

    def __init__(self) -> None:
        self.checks = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        text = "\n".join(str(m.get("content") or "") for m in request.messages)
        if "You check the answer an AI agent gave" in text:
            self.checks += 1
            if self.checks == 1:
                return Reply.json({"passed": False, "reasons": ["Lisbon is missing."]})
            return Reply.json({"passed": True, "reasons": []})
        if "Lisbon is missing." in text:
            return Reply.text(json.dumps(TRIPS))
        return Reply.json([{"city": "Porto", "days": 1}])


@pytest.fixture
def fake_model() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        server.default = CheckedModel()
        yield server


SETUP = """
import json
from django.contrib.auth import get_user_model
from agents.models import LLM, Agent
from crews.models import Crew, Task

owner = get_user_model().objects.get(username="ada")
llm, _ = LLM.objects.update_or_create(name="Fake checks model", defaults=dict(
    model="openai/test", api_base={base_url!r}, supports_tools=False))
llm.set_api_key("sk-test-123456")
llm.save()
agent = Agent.objects.create(owner=owner, name="Checked planner", role="Trip Planner",
    goal="Plan practical trips", llm=llm)
crew = Crew.objects.create(owner=owner, name="Checked trips")
crew.agents.set([agent])
task = Task.objects.create(crew=crew, order=0, name="Pick cities", agent=agent,
    description="Pick cities for a week in Portugal", expected_output="Cities and days")
print(json.dumps({{"crew": crew.pk, "task": task.pk}}))
"""


def shell_json(server: LiveServer, code: str) -> Any:
    return json.loads(server.shell(code).strip().splitlines()[-1])


def test_add_a_schema_and_a_criterion_run_and_read_the_table_and_the_checks(
        page: Page, app_server: LiveServer, fake_model: FakeLLMServer) -> None:
    ids = shell_json(app_server, SETUP.format(base_url=fake_model.base_url))
    sign_in(page)
    page.goto(f"/crews/{ids['crew']}/")
    page.get_by_role("link", name="Edit: Pick cities").click()

    # The builder: a list of rows, two fields; it writes the schema into the experts' box.
    page.get_by_role("radio", name="A list of rows (a table)").check()
    page.get_by_role("textbox", name="Field name").first.fill("city")
    page.get_by_role("button", name="Add a field", exact=True).click()
    page.get_by_role("textbox", name="Field name").nth(1).fill("days")
    page.get_by_role("combobox", name="Type").nth(1).select_option(label="Whole number")
    page.get_by_label("Criteria an LLM checks").fill("Names Lisbon")
    page.get_by_role("button", name="Save task").click()
    expect(page).to_have_url(re.compile(rf"/crews/{ids['crew']}/"))

    saved = shell_json(app_server, (
        "import json; from crews.models import Task; "
        f"t = Task.objects.get(pk={ids['task']}); print(json.dumps([t.output_schema, t.guardrails]))"
    ))
    assert saved == [
        {"type": "array", "items": {"type": "object", "properties": {"city": {"type": "string"},
                                                                      "days": {"type": "integer"}},
                                    "required": ["city", "days"]}},
        {"criteria": ["Names Lisbon"]},
    ]

    page.get_by_role("button", name="Run now").click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    # The first live call of the server process imports litellm: seconds on a busy 2-core box.
    status = page.locator("#run-status")
    expect(status).to_have_attribute("data-status", re.compile("succeeded|failed"), timeout=90_000)
    assert status.get_attribute("data-status") == "succeeded", page.locator("main").inner_text()

    table = page.get_by_role("table", name=re.compile("The answer as data"))
    expect(table.get_by_role("columnheader")).to_have_text(["city", "days"])
    expect(table.get_by_role("row").nth(1)).to_have_text(re.compile(r"Lisbon\s*2"))
    expect(table.get_by_role("row")).to_have_count(3)
    # The task's activity is open while it runs; a page loaded (or redrawn) after it finished
    # shows it closed, and a person opens it.
    activity = page.locator("details.activity", has=page.get_by_text("Checks passed (attempt 2)"))
    if activity.get_attribute("open") is None:
        activity.locator("summary").first.click()
    expect(page.get_by_text("Checks failed (attempt 1): the agent answers again")).to_be_visible()
    expect(page.get_by_text("Lisbon is missing.")).to_be_visible()
    expect(page.get_by_text("Checks passed (attempt 2)")).to_be_visible()

    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    assert download.value.suggested_filename.endswith(".csv")
    with open(download.value.path(), "rb") as saved_csv:
        assert saved_csv.read() == b"city,days\r\nLisbon,2\r\nPorto,1\r\n"
