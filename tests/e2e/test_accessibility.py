"""axe-core in the browser on the pages people use most: no serious or critical violation.

The crew list, the demo crew's page (its kickoff panel as it opens and with an input's error),
the plan editor (as it opens, and with a step's edit form and a version comparison open), run
pages (a finished crew run, a finished agent run that plans and calls tools, a run waiting for a
person's review and after it) and the run history, and the agent form (as it opens and with
errors), each in the light and the dark colour scheme; the plan editor and the run page also at
360 px wide. Where a page has ``<details>``, axe runs again with all of them open. axe is the npm package's
``axe.min.js``, vendored under ``tests/e2e/vendor/`` for these tests only (never served).

A failure lists each violation's rule, impact, help text and the selectors of the elements it
found, so the message says what to fix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import LiveServer, sign_in

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
BLOCKING = {"serious", "critical"}
SCHEMES = ["light", "dark"]
PHONE = {"width": 360, "height": 800}
DESKTOP = {"width": 1280, "height": 900}

# Made once for the module in the server's database: a drafted plan of the demo crew (drafted
# in the foreground on the offline demo model) with a second version, a second plan approved and
# run to the end with the crew, a one-task crew whose answer a person reviews, and the demo
# "Trip planner" agent asked something (it plans and may call tools; the server's workers run it).
SETUP = """
import json
from django.contrib.auth import get_user_model
from agents.models import Agent
from crews import plans, runner, runs
from crews.models import Crew

ada = get_user_model().objects.get(username="ada")
crew = Crew.objects.get(name="AI LLMs")

def drafted():
    plan = plans.plan_draft(actor=ada, crew=crew, inputs={"topic": "tide pools"}, enqueue=False)
    runner.generate_plan(plan.pk)
    plan.refresh_from_db()
    assert plan.status == "draft", plan.error
    return plan

editing = drafted()
# A second version, so the editor has a history to compare.
rows = [{"id": s.uid, "text": s.text, "pinned": s.pinned} for s in plans.current_steps(editing)[crew.tasks.first().pk]]
rows[0]["text"] += " (checked twice)"
plans.plan_update(actor=ada, plan=editing, expected_version=1, tasks=[{"task_id": crew.tasks.first().pk, "steps": rows}])

approved = plans.plan_approve(actor=ada, plan=drafted())
run = runs.run_kickoff(actor=ada, crew=crew, inputs=approved.inputs, plan=approved, enqueue=False)
runner.execute(run.pk)
run.refresh_from_db()
assert run.status == "succeeded", (run.status, run.error)

# A one-task crew whose answer a person reviews: its runs wait on the page for that person.
reviewed = Crew.objects.create(owner=ada, name="Reviewed report", default_inputs={"topic": "tide pools"})
analyst = Agent.objects.get(name="Reporting Analyst")
reviewed.agents.set([analyst])
reviewed.tasks.create(order=0, name="Report", agent=analyst, human_input=True,
                      description="Write a short report on {topic}", expected_output="A report in markdown")

agent_run = runs.run_kickoff_agent(actor=ada, agent=Agent.objects.get(name="Trip planner"),
                                   message="Plan two days in Lisbon in May: sights, food and rest.")
print(json.dumps({"crew": crew.pk, "plan": editing.pk, "run": run.pk, "agent_run": agent_run.pk,
                  "agent": agent_run.agent_id, "reviewed": reviewed.pk}))
"""


@pytest.fixture(scope="module")
def made(app_server: LiveServer) -> dict[str, int]:
    out = app_server.shell(SETUP).strip().splitlines()
    return json.loads(out[-1])


@pytest.fixture(params=SCHEMES)
def scheme(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _page(
    browser: Browser, server: LiveServer, scheme: str, viewport: dict[str, int]
) -> Iterator[Page]:
    context = browser.new_context(base_url=server.url, color_scheme=scheme, viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(20_000)
    try:
        sign_in(page)
        yield page
    finally:
        context.close()


@pytest.fixture
def desktop(browser: Browser, app_server: LiveServer, scheme: str) -> Iterator[Page]:
    yield from _page(browser, app_server, scheme, DESKTOP)


@pytest.fixture
def phone(browser: Browser, app_server: LiveServer, scheme: str) -> Iterator[Page]:
    yield from _page(browser, app_server, scheme, PHONE)


FINITE_ANIMATIONS_DONE = """() => Promise.all(document.getAnimations()
    .filter(a => a.effect && a.effect.getComputedTiming().endTime !== Infinity)
    .map(a => a.finished.catch(() => null)))"""


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now (the script is injected once per document)."""
    if not page.evaluate("typeof window.axe === 'object'"):
        # Evaluated through the browser's debugging protocol: a <script> tag with axe inline is
        # refused by the site's Content-Security-Policy (script-src 'self').
        page.evaluate(AXE.read_text(encoding="utf-8") + "\n;void 0")
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return list(result["violations"])


def report(violations: list[dict[str, Any]]) -> str:
    lines = []
    for v in violations:
        lines.append(f"- {v['id']} ({v['impact']}): {v['help']} <{v['helpUrl']}>")
        for node in v["nodes"][:8]:
            target = " ".join(
                json.dumps(t) if not isinstance(t, str) else t for t in node["target"]
            )
            why = (node.get("failureSummary") or "").replace("\n", " ")
            lines.append(f"    {target}  {why[:240]}")
        if len(v["nodes"]) > 8:
            lines.append(f"    … and {len(v['nodes']) - 8} more")
    return "\n".join(lines)


DUPLICATE_IDS = """() => {
    const seen = new Map();
    for (const el of document.querySelectorAll('[id]')) seen.set(el.id, (seen.get(el.id) || 0) + 1);
    return [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id} (${n}x)`);
}"""


def assert_accessible(page: Page, where: str, *, open_details: bool = False) -> None:
    """No serious or critical axe violation and no repeated id (axe 4 checks ids only in ARIA).

    ``open_details``: a second pass with every ``<details>`` open, since axe skips hidden content.
    """
    # Let htmx settle and its fade-ins end (a half-faded text has half its contrast).
    page.wait_for_load_state("networkidle")
    page.evaluate(FINITE_ANIMATIONS_DONE)
    blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING]
    assert not blocking, f"axe on {where} ({page.url}):\n{report(blocking)}"
    duplicates = page.evaluate(DUPLICATE_IDS)
    assert not duplicates, f"repeated ids on {where} ({page.url}): {', '.join(duplicates)}"
    if open_details:
        page.evaluate(
            "document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; })"
        )
        blocking = [v for v in axe_violations(page) if v["impact"] in BLOCKING]
        assert not blocking, (
            f"axe on {where} with every <details> open ({page.url}):\n{report(blocking)}"
        )


# The pages -------------------------------------------------------------------------------------


def test_the_crew_list_has_no_serious_violations(desktop: Page) -> None:
    desktop.goto("/crews/")
    expect(desktop.get_by_role("heading", level=1, name="Crews")).to_be_visible()
    assert_accessible(desktop, "the crew list")


def test_the_demo_crew_page_and_its_kickoff_panel_have_no_serious_violations(
    desktop: Page, made: dict[str, int]
) -> None:
    desktop.goto(f"/crews/{made['crew']}/")
    kickoff = desktop.get_by_role("region", name="Run this crew")
    expect(kickoff).to_be_visible()
    assert_accessible(desktop, "the demo crew's page")
    # An emptied input is missing: the panel comes back in place with the error.
    kickoff.get_by_label("{topic}").fill("")
    kickoff.get_by_role("button", name="Draft plan").click()
    expect(desktop.get_by_role("alert")).to_be_visible()
    assert_accessible(desktop, "the kickoff panel with an error")


def test_the_plan_editor_has_no_serious_violations(desktop: Page, made: dict[str, int]) -> None:
    desktop.goto(f"/plans/{made['plan']}/")
    expect(desktop.locator(".step__text").first).to_be_visible()
    assert_accessible(desktop, "the plan editor", open_details=True)

    # A step's edit form open, then the comparison of the two versions.
    research = desktop.get_by_role("region", name=re.compile(r"^1\. "))
    research.get_by_role("link", name="Edit: step 2").click()
    expect(research.get_by_role("textbox", name="Text of step 2")).to_be_focused()
    assert_accessible(desktop, "the plan editor with a step's form open")
    research.get_by_role("textbox", name="Text of step 2").press("Escape")

    versions = desktop.get_by_role("region", name="Versions")
    versions.get_by_role("button", name="Compare").click()
    expect(desktop.get_by_role("region", name="Changes from v1 to v2")).to_be_visible()
    assert_accessible(desktop, "the plan editor comparing versions")


def test_a_finished_crew_runs_page_has_no_serious_violations(
    desktop: Page, made: dict[str, int]
) -> None:
    desktop.goto(f"/runs/{made['run']}/")
    expect(desktop.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    expect(desktop.locator("#run-output")).not_to_be_empty()
    assert_accessible(desktop, "a finished crew run", open_details=True)


def test_a_finished_agent_runs_page_has_no_serious_violations(
    desktop: Page, made: dict[str, int]
) -> None:
    desktop.goto(f"/runs/{made['agent_run']}/")
    expect(desktop.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    desktop.reload()  # the replay, from the stored events
    assert_accessible(desktop, "a finished agent run", open_details=True)


def test_a_run_waiting_for_a_persons_review_has_no_serious_violations(
    desktop: Page, app_server: LiveServer, made: dict[str, int]
) -> None:
    out = app_server.shell(
        "from django.contrib.auth import get_user_model; from crews import runs; from crews.models import Crew; "
        "ada = get_user_model().objects.get(username='ada'); "
        f"print(runs.run_kickoff(actor=ada, crew=Crew.objects.get(pk={made['reviewed']}), inputs={{}}).pk)"
    )
    run_id = int(out.strip().splitlines()[-1])
    desktop.goto(f"/runs/{run_id}/")
    expect(desktop.locator("#run-status")).to_have_attribute("data-status", "awaiting_input")
    expect(desktop.get_by_role("button", name="Looks good")).to_be_visible()
    assert_accessible(desktop, "a run waiting for a review", open_details=True)
    desktop.get_by_role("button", name="Looks good").click()
    expect(desktop.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    assert_accessible(desktop, "a run after its review")


def test_the_run_history_has_no_serious_violations(desktop: Page, made: dict[str, int]) -> None:
    desktop.goto("/runs/")
    expect(desktop.get_by_role("link", name=f"#{made['run']}")).to_be_visible()
    assert_accessible(desktop, "the run history")


def test_the_agent_form_has_no_serious_violations(desktop: Page, made: dict[str, int]) -> None:
    desktop.goto(f"/agents/{made['agent']}/edit/")
    expect(desktop.get_by_role("heading", level=1)).to_contain_text("Trip planner")
    assert_accessible(desktop, "the agent form")
    # Its errors, in place.
    desktop.get_by_label(re.compile("^Name")).fill("")
    desktop.get_by_role("button", name=re.compile("Save", re.I)).click()
    expect(desktop.get_by_role("alert")).to_be_visible()
    assert_accessible(desktop, "the agent form with errors")


def test_the_plan_editor_and_the_run_page_have_no_serious_violations_on_a_phone(
    phone: Page, made: dict[str, int]
) -> None:
    phone.goto(f"/plans/{made['plan']}/")
    expect(phone.locator(".step__text").first).to_be_visible()
    assert_accessible(phone, "the plan editor at 360 px")
    phone.goto(f"/runs/{made['run']}/")
    expect(phone.locator("#run-status")).to_have_attribute("data-status", "succeeded")
    assert_accessible(phone, "a finished run at 360 px", open_details=True)
