"""A first run on the offline demo model, paced as people get it (ENGINE.md §7): draft the plan,
approve it, watch the answer stream in, press Stop and see the run stopped.

The e2e server answers at once (its settings pace the demo at zero), so this journey uses an LLM
row on the demo model with the default pace in its params: 0.7 s to the first token, then 60
tokens a second, as ``make run`` serves it.
"""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in, wait_until

SETUP = """
import json
from django.conf import settings
from django.contrib.auth import get_user_model
from agents.models import LLM, Agent
from crews.models import Crew, Task

owner = get_user_model().objects.get(username="ada")
n = Crew.objects.filter(owner=owner, name__startswith="Demo journey").count() + 1  # other journeys use this too
llm, _ = LLM.objects.update_or_create(name="Paced demo model", defaults=dict(
    model="demo/offline", supports_tools=True, context_window=32000,
    params={"first_token_seconds": settings.PLANNER_DEMO_FIRST_TOKEN_SECONDS or 0.7,
            "tokens_per_second": settings.PLANNER_DEMO_TOKENS_PER_SECOND or 60}))
researcher = Agent.objects.create(owner=owner, name=f"Journey researcher {n}", role="AI LLMs Senior Data Researcher",
    goal="Uncover cutting-edge developments in AI LLMs", llm=llm)
analyst = Agent.objects.create(owner=owner, name=f"Journey analyst {n}", role="AI LLMs Reporting Analyst",
    goal="Create detailed reports", llm=llm)
crew = Crew.objects.create(owner=owner, name=f"Demo journey {n}", planning=True, review_plan=True, planning_llm=llm,
    default_inputs={"topic": "AI LLMs"})
crew.agents.set([researcher, analyst])
Task.objects.create(crew=crew, order=0, name="Research", agent=researcher,
    description="Conduct a thorough research about {topic}.",
    expected_output="A list with 10 bullet points of the most relevant information about {topic}")
Task.objects.create(crew=crew, order=1, name="Report", agent=analyst,
    description="Review the context you got and expand each topic into a full section for a report.",
    expected_output="A fully fledged report with the main topics, each with a full section of information.")
Task.objects.create(crew=crew, order=2, name="Summary", agent=analyst,
    description="Summarise the report for a busy reader.", expected_output="Three short paragraphs")
print(json.dumps({"crew": crew.pk}))
"""

COUNT_UPDATES = """() => {
  window.__updates = [];
  new MutationObserver(records => {
    for (const r of records) {
      if (r.target.classList && r.target.classList.contains("stream") && r.addedNodes.length) {
        window.__updates.push(performance.now());
      }
    }
  }).observe(document.body, {subtree: true, childList: true});
}"""

TIME_THE_STOP = """() => {
  window.__stopClickedAt = null; window.__stoppedAt = null;
  document.addEventListener("click", e => {
    if (!window.__stopClickedAt && e.target.closest("button") && e.target.closest("button").textContent.trim() === "Stop") {
      window.__stopClickedAt = performance.now();
    }
  }, true);
  new MutationObserver(() => {
    const badge = document.getElementById("run-status");
    if (!window.__stoppedAt && badge && badge.textContent.trim() === "Stopped") {
      window.__stoppedAt = performance.now();
    }
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_watch_a_paced_demo_run_stream_then_stop_it(page: Page, app_server: LiveServer) -> None:
    crew = json.loads(app_server.shell(SETUP).strip().splitlines()[-1])["crew"]
    sign_in(page)
    page.goto(f"/crews/{crew}/")
    page.get_by_role("region", name="Run this crew").get_by_role("button", name="Draft plan").click()
    # The plan is drafted by the paced model too: a few seconds.
    approve = page.get_by_role("button", name="Approve & run")
    expect(approve).to_be_enabled(timeout=60_000)
    approve.click()

    expect(page).to_have_url(re.compile(r"/runs/\d+/"), timeout=20_000)
    page.evaluate(COUNT_UPDATES)
    # Watch: at least 20 streamed updates, the last of them at least 10 s after the first (the
    # paced run takes longer than that; its third task has not started yet).
    wait_until(
        page,
        "window.__updates.length >= 20 && window.__updates[window.__updates.length - 1] - window.__updates[0] >= 10000",
        timeout=60_000)
    updates = page.evaluate("window.__updates")
    assert len(updates) >= 20 and (updates[-1] - updates[0]) / 1000 >= 10.0
    expect(page.locator("#run-status")).to_have_attribute("data-status", "running")

    page.evaluate(TIME_THE_STOP)
    page.get_by_role("button", name="Stop").click()
    expect(page.locator("#run-status")).to_have_text("Stopped", timeout=10_000)
    # Timed in the page, from the click to the badge: what the person sees.
    took = page.evaluate("window.__stoppedAt - window.__stopClickedAt")
    assert 0 <= took <= 3000, f"Stopped showed {took:.0f} ms after the click"
    # The summary never started: it says so in people's words.
    summary = page.locator(".task-head").filter(has_text="Summary")
    expect(summary).to_contain_text("Not run")
    expect(page.locator("#conn-status")).not_to_have_text("Live")
