"""Watching a run in the browser: live statuses and cost, Stop, a reload mid-run, a replay.

The runs use an ``openai/test`` model served by a fake OpenAI-compatible server started here on
127.0.0.1: it answers like a capable model (plans, step results, reviews, answers), slowly enough
for a person (and this test) to watch, and it streams its answers token by token.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in, wait_until
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

ANSWER = (
    "## Lisbon in two days\n\n"
    "**Day 1.** Alfama and the castle in the morning, a tram ride to Baixa, sunset at a miradouro.\n\n"
    "**Day 2.** Belém: the tower, the monastery and the custard tarts; the river walk back.\n"
)


class SlowModel:
    """A fake model's behaviour: what each engine prompt expects, after ``delay`` seconds.

    ``gate`` (when given) holds answers back until it is set: a run then stays mid-way for as
    long as the test needs. With ``hold_from`` set, the first ``hold_from - 1`` requests are
    answered and only the later ones wait.
    """

    def __init__(self, *, delay: float = 0.3, chunk_delay: float = 0.02, tasks: int = 2,
                 gate: threading.Event | None = None) -> None:
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.tasks = tasks
        self.gate = gate
        self.hold_from: int | None = None
        self._count = itertools.count(1)

    def __call__(self, request: RecordedRequest) -> Reply:
        number = next(self._count)
        if self.gate is not None and (self.hold_from is None or number >= self.hold_from):
            self.gate.wait(60)
        text = "\n".join(str(m.get("content") or "") for m in request.messages)
        slow: dict[str, Any] = {"delay": self.delay}
        streamed: dict[str, Any] = {**slow, "chunk_delay": self.chunk_delay}
        if "You are the planner of a crew" in text:
            plans = [{"task_number": n, "steps": [f"Gather what task {n} needs", f"Write task {n}'s result"]}
                     for n in range(1, self.tasks + 1)]
            return Reply.json({"plans": plans}, **slow)
        if '"plan": "a one-line summary"' in text:
            steps = [
                {"number": 1, "description": "List the sights worth a visit", "tool": None, "depends_on": []},
                {"number": 2, "description": "Group them by neighbourhood", "tool": None, "depends_on": [1]},
                {"number": 3, "description": "Write the day-by-day plan", "tool": None, "depends_on": [2]},
            ]
            return Reply.json({"plan": "Sights, then areas, then days", "steps": steps, "ready": True}, **slow)
        if "You are reviewing one step of a plan" in text:
            return Reply.json({"success": True, "learned": "Looks right.", "plan_valid": True, "refinements": [],
                               "needs_replan": False, "replan_reason": "", "goal_achieved": False}, **slow)
        if "Combine the results of the steps below" in text:
            return Reply.text(ANSWER, **streamed)
        if "Do only this step" in text and "final answer to the overall task" in text:
            # The last step of an approved plan: a ReAct agent answers the task there.
            return Reply.text(f"Thought: I now know the final answer\nFinal Answer: {ANSWER}", **streamed)
        if "Do only this step" in text:
            return Reply.text("Thought: I now know the final answer\nFinal Answer: Done: the step's result.", **streamed)
        return Reply.text(f"Thought: I now know the final answer\nFinal Answer: {ANSWER}", **streamed)


def shell_json(server: LiveServer, code: str) -> Any:
    """Run ``code`` (which prints one JSON line last) in the server's database."""
    out = server.shell(code).strip().splitlines()
    return json.loads(out[-1])


@pytest.fixture
def fake_model() -> Iterator[tuple[FakeLLMServer, SlowModel]]:
    model = SlowModel()
    with FakeLLMServer() as server:
        server.default = model
        yield server, model


SETUP = """
import json
from decimal import Decimal
from django.contrib.auth import get_user_model
from agents.models import LLM, Agent
from crews import runs
from crews.models import Crew, Task

owner = get_user_model().objects.get(username="ada")
llm, _ = LLM.objects.update_or_create(name="Fake e2e model", defaults=dict(
    model="openai/test", api_base={base_url!r}, supports_tools=False,
    input_price_per_1k=Decimal("0.0025"), output_price_per_1k=Decimal("0.01")))
llm.set_api_key("sk-test-123456")
llm.save()
planner = Agent.objects.create(owner=owner, name={name!r} + " planner", role="Trip Planner",
    goal="Plan practical trips", backstory="You plan city breaks.", llm=llm, planning=True)
writer = Agent.objects.create(owner=owner, name={name!r} + " writer", role="Travel Writer",
    goal="Write friendly guides", llm=llm)
crew = Crew.objects.create(owner=owner, name={name!r}, planning={planning!r}, review_plan={review!r},
    planning_llm=llm, default_inputs={{"city": "Lisbon"}})
crew.agents.set([planner, writer])
first = Task.objects.create(crew=crew, order=0, name="Plan the days", agent=planner,
    description="Plan two days in {{city}}", expected_output="A day-by-day plan")
second = Task.objects.create(crew=crew, order=1, name="Write the guide", agent=writer,
    description="Write a short guide to {{city}}", expected_output="A guide in markdown",
    human_input={human_input!r})
run = runs.run_kickoff(actor=owner, crew=crew, inputs={{}})
print(json.dumps({{"crew": crew.pk, "run": run.pk, "tasks": [first.pk, second.pk]}}))
"""


def start_run(server: LiveServer, llm: FakeLLMServer, name: str, *, planning: bool = False, review: bool = False,
              human_input: bool = False) -> dict[str, Any]:
    """A two-task crew on the fake model (the first agent plans its own work), kicked off."""
    code = SETUP.format(base_url=llm.base_url, name=name, planning=planning, review=review, human_input=human_input)
    return shell_json(server, code)


def stored_seqs(server: LiveServer, run_id: int) -> list[int]:
    return shell_json(server, (
        "import json; from crews.models import RunEvent; "
        f"print(json.dumps(list(RunEvent.objects.filter(run_id={run_id}).order_by('seq')"
        ".values_list('seq', flat=True))))"
    ))


def shown_seqs(page: Page) -> list[int]:
    ids = page.locator("[id^=event-]").evaluate_all("rows => rows.map(row => row.id)")
    return [int(i.removeprefix("event-")) for i in ids]


def mark_page(page: Page) -> None:
    """A flag that a reload would lose: checks that what follows happened live."""
    page.evaluate("window.__sameDocument = true")


def still_same_page(page: Page) -> bool:
    return bool(page.evaluate("window.__sameDocument === true"))


RECORD_STATUSES = """() => {
  window.__statuses = new Set();
  const scan = () => document.querySelectorAll(".step-head[data-status], .task-head[data-status]")
    .forEach(el => window.__statuses.add(el.id + ":" + el.dataset.status));
  scan();
  new MutationObserver(scan).observe(document.body, {subtree: true, childList: true, attributes: true});
}"""


def statuses_seen(page: Page) -> set[str]:
    """Every "element id:status" a task or step head has shown since RECORD_STATUSES ran."""
    return set(page.evaluate("Array.from(window.__statuses)"))


EDITED = "Gather the sights of Lisbon worth a morning (edited)"


def test_approve_an_edited_plan_watch_each_approved_step_tick_and_read_what_the_model_was_sent(
        page: Page, app_server: LiveServer, fake_model: Any) -> None:
    llm, model = fake_model
    ids = start_run(app_server, llm, "Watched trip", planning=True, review=True, human_input=True)
    sign_in(page)
    page.goto(f"/runs/{ids['run']}/")
    status = page.locator("#run-status")

    # The first live call of the server process imports litellm: seconds on a busy 2-core box.
    expect(status).to_have_attribute("data-status", "awaiting_approval", timeout=90_000)
    page.get_by_role("link", name="Review the plan").click()
    # The person edits the first step of the first task before approving.
    days = page.get_by_role("region", name=re.compile(r"^\d+\. Plan the days$"))
    days.locator(".step__text").first.click()
    box = days.get_by_role("textbox", name="Text of step 1")
    box.fill(EDITED)
    box.press("Enter")
    expect(days.locator(".step__text").first).to_have_text(EDITED)
    model.gate = threading.Event()  # the model waits until this page is watching, however slow the box
    try:
        page.get_by_role("button", name="Approve & continue").click()
        expect(page).to_have_url(re.compile(rf"/runs/{ids['run']}/$"))
        mark_page(page)
        page.evaluate(RECORD_STATUSES)
        expect(page.locator("#conn-status")).to_have_text("Live")
        cost = page.locator("#run-cost")
        cost_before = cost.inner_text()
    finally:
        model.gate.set()

    first = page.locator(f"#task-{ids['tasks'][0]}")
    expect(first.locator(".task-head")).to_have_attribute("data-status", "running", timeout=20_000)
    # The approved steps are the agent's plan (it plans on its own otherwise): no second plan.
    approved = first.get_by_role("region", name="The approved plan")
    expect(approved.locator(".step-head")).to_have_count(2)
    expect(approved.locator(".step-head__text").first).to_have_text(EDITED)
    expect(first.locator(".plan-segment")).to_have_count(1)
    expect(first.locator('.step-head[data-status="completed"]')).to_have_count(2, timeout=30_000)
    step_heads = first.locator(".step-head").evaluate_all("heads => heads.map(h => h.id)")
    seen = statuses_seen(page)
    # Each step went from "to do" through "working" to "done" on this page, one event at a time.
    assert all(f"{head}:running" in seen and f"{head}:completed" in seen for head in step_heads), seen
    assert not any(m in str(r.messages) for r in llm.requests for m in ('"plan": "a one-line summary"',))
    # What the model was sent: the first step's LLM call opens on the edited text.
    first_step = first.locator(".step").first
    first_step.locator(".activity--step > summary").click()
    call = first_step.locator(".entry--llm").first
    call.locator("summary").click()
    expect(call).to_contain_text(EDITED, timeout=10_000)
    expect(call).not_to_contain_text("sk-test-123456")
    expect(cost).not_to_have_text(cost_before)
    # A step's result, re-rendered by the socket, loads when its disclosure opens.
    first_result = first.locator(".step-result__details").first
    first_result.locator("summary").click()
    expect(first_result.locator(".markdown")).to_have_text("Done: the step's result.")
    expect(first.locator(".task-head")).to_have_attribute("data-status", "done", timeout=20_000)
    expect(first.locator(".answer")).to_contain_text("Lisbon in two days")

    # The second task asks for a review of its answer, inline.
    second = page.locator(f"#task-{ids['tasks'][1]}")
    expect(status).to_have_attribute("data-status", "awaiting_input", timeout=20_000)
    expect(second.get_by_role("heading", name="Review the answer")).to_be_visible()
    second.get_by_role("button", name="Looks good").click()
    expect(second).to_contain_text("Answer accepted.")
    expect(status).to_have_attribute("data-status", "succeeded", timeout=20_000)
    expect(page.locator("#run-output")).to_contain_text("Lisbon in two days")
    expect(page.get_by_role("button", name="Copy")).to_be_visible()
    assert still_same_page(page)
    assert shown_seqs(page) == stored_seqs(app_server, ids["run"])
    # "Run again" came with the socket's last fragments (rendered without a request): it still
    # posts with the page's CSRF token and opens the new run.
    page.get_by_role("button", name="Run again", exact=True).click()
    expect(page).to_have_url(re.compile(r"/runs/\d+/$"))
    expect(page).not_to_have_url(re.compile(rf"/runs/{ids['run']}/$"))


def test_stop_a_run_and_see_it_stopped(page: Page, app_server: LiveServer, fake_model: Any) -> None:
    llm, model = fake_model
    model.gate = threading.Event()  # every answer waits: the run stays in its first LLM call
    try:
        ids = start_run(app_server, llm, "Stopped trip")
        sign_in(page)
        page.goto(f"/runs/{ids['run']}/")
        mark_page(page)
        expect(page.locator(".entry--llm[data-status=running]")).to_have_count(1, timeout=20_000)

        with page.expect_response(re.compile(r"/stop/$")) as stopping:
            page.get_by_role("button", name="Stop").click()

        # The answer says the run is stopping at once; the socket then brings "Stopped". (Its
        # controls show "Stopping…", or already "Run again": a worker in the same process
        # may have stopped the run before the answer was rendered.)
        assert "Stopping the run…" in stopping.value.text()
        expect(page.locator("#run-status")).to_have_attribute("data-status", "cancelled", timeout=20_000)
        expect(page.locator("#run-status")).to_have_text("Stopped")
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        expect(page.get_by_role("button", name="Run again")).to_be_visible()
        # The diagram says so too: the second task never started.
        expect(page.locator(f'#run-diagram [data-task-id="{ids['tasks'][1]}"]')).to_have_attribute(
            "data-status", "not_run")
        assert still_same_page(page)
        sent = llm.request_count
    finally:
        model.gate.set()
    page.reload()
    expect(page.locator("#run-status")).to_have_text("Stopped")
    assert llm.request_count == sent  # nothing more was asked of the model


def test_a_reload_and_a_dropped_socket_mid_run_show_every_event_exactly_once(page: Page, app_server: LiveServer,
                                                                           fake_model: Any) -> None:
    llm, model = fake_model
    model.delay = 0.2
    # The agent's plan and its first step are answered; then the model waits: the run stays
    # mid-way for as long as the reload and the dropped socket take, however fast the box.
    model.gate, model.hold_from = threading.Event(), 3
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    try:
        ids = start_run(app_server, llm, "Reloaded trip")
        sign_in(page)
        page.goto(f"/runs/{ids['run']}/")
        expect(page.locator('.step-head[data-status="completed"]').first).to_be_visible(timeout=20_000)
        page.reload()  # mid-run: at least one step done, the answer not written yet
        expect(page.locator("#conn-status")).to_have_text("Live")
        expect(page.locator("#run-status")).not_to_have_attribute("data-status", "succeeded")
        assert re.search(r"after=[1-9]\d*", sockets[-1]), sockets  # the reloaded page asks only for newer events
        # The socket drops: the page says so, reconnects from the last event shown, and catches up.
        page.evaluate("document.getElementById('run-page')['htmx-internal-data'].webSocket.socket.close()")
        expect(page.locator("#run-page")).to_have_class(re.compile("is-reconnecting"))
        expect(page.locator("#conn-status")).to_have_text(re.compile("reconnecting", re.I))
        expect(page.locator("#conn-status")).to_have_text("Live", timeout=10_000)
        assert len(sockets) >= 3 and re.search(r"after=[1-9]\d*", sockets[-1]), sockets
    finally:
        model.gate.set()

    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    shown = shown_seqs(page)
    assert shown == stored_seqs(app_server, ids["run"])
    assert len(shown) == len(set(shown))


def test_without_websockets_the_page_polls_says_so_and_still_shows_every_event(page: Page, app_server: LiveServer,
                                                                             fake_model: Any) -> None:
    llm, model = fake_model
    model.gate = threading.Event()  # the run waits in its first call until the page is polling
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))

    def dropped_websockets(route: Any) -> None:
        # As behind a proxy that drops websockets: the page's socket leads nowhere.
        response = route.fetch()
        route.fulfill(response=response, body=response.text().replace('ws-connect="/ws/runs/', 'ws-connect="/ws/none/'))

    try:
        ids = start_run(app_server, llm, "Polled trip")
        sign_in(page)
        page.route(f"**/runs/{ids['run']}/", dropped_websockets)
        page.goto(f"/runs/{ids['run']}/")
        mark_page(page)
        expect(page.locator("#conn-status")).to_have_text("Live updates by polling: the live connection failed.")
        expect(page.locator("#run-page")).to_have_class(re.compile("is-polling"))
    finally:
        model.gate.set()

    first = page.locator(f'#run-diagram [data-task-id="{ids["tasks"][0]}"]')
    expect(first).to_have_attribute("data-status", "running", timeout=30_000)
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(first).to_have_attribute("data-status", "done")
    expect(page.locator("#run-output")).to_contain_text("Lisbon in two days")
    expect(page.locator("#conn-status")).to_have_text("")  # a finished run is not polled
    assert still_same_page(page)
    assert sockets and all("/ws/none/" in url for url in sockets), sockets
    shown = shown_seqs(page)
    assert shown == stored_seqs(app_server, ids["run"]) and len(shown) == len(set(shown))


def test_a_polling_page_signed_out_says_so_and_stops_asking_even_as_the_socket_retries(
        page: Page, app_server: LiveServer, fake_model: Any) -> None:
    llm, model = fake_model
    model.gate = threading.Event()  # the run stays mid-way: the page would poll for ever
    polls: list[int] = []
    page.on("response", lambda r: polls.append(r.status) if "/poll/" in r.url else None)

    def dropped_websockets(route: Any) -> None:
        response = route.fetch()
        route.fulfill(response=response, body=response.text().replace('ws-connect="/ws/runs/', 'ws-connect="/ws/none/'))

    try:
        ids = start_run(app_server, llm, "Signed-out trip")
        sign_in(page)
        page.route(f"**/runs/{ids['run']}/", dropped_websockets)
        page.goto(f"/runs/{ids['run']}/")
        expect(page.locator("#run-page")).to_have_class(re.compile("is-polling"))
        page.evaluate("window.__closes = 0; document.addEventListener('htmx:wsClose', () => window.__closes++)")

        page.context.clear_cookies()  # signed out (in another tab, or the session expired)

        conn = page.locator("#conn-status")
        expect(conn).to_have_text("You are signed out: sign in again to follow the run.", timeout=15_000)
        expect(page.locator("#run-page")).not_to_have_class(re.compile("is-polling"))
        assert polls[-1] == 401 and 302 not in polls
        asked, closes = len(polls), page.evaluate("window.__closes")
        wait_until(page, f"window.__closes >= {closes + 1}", timeout=30_000)  # the socket tried again
        expect(conn).to_have_text("You are signed out: sign in again to follow the run.")
        assert len(polls) == asked and "is-polling" not in (page.locator("#run-page").get_attribute("class") or "")
    finally:
        model.gate.set()


def test_a_finished_runs_replay_and_run_again_from_a_task(page: Page, app_server: LiveServer,
                                                          fake_model: Any) -> None:
    llm, model = fake_model
    model.delay = model.chunk_delay = 0
    ids = start_run(app_server, llm, "Replayed trip")
    sign_in(page)
    page.goto(f"/runs/{ids['run']}/")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=20_000)

    page.reload()  # the replay: everything from the stored events, no socket
    assert page.locator("[ws-connect]").count() == 0
    expect(page.locator("#run-output")).to_contain_text("Lisbon in two days")
    expect(page.get_by_role("link", name="Download .md")).to_have_attribute("href", f"/runs/{ids['run']}/output.md")
    expect(page.locator('.step-head[data-status="completed"]')).to_have_count(3)
    # Step results and the tasks' answers load when opened (the page does not carry them).
    first = page.locator(f"#task-{ids['tasks'][0]}")
    result = first.locator(".step-result__details").first
    expect(result.locator(".markdown")).not_to_contain_text("Done: the step's result.")
    result.locator("summary").click()
    expect(result.locator(".markdown")).to_have_text("Done: the step's result.")
    answer = first.locator(".answer")
    answer.locator("summary").click()
    expect(answer.get_by_role("heading", name="Lisbon in two days")).to_be_visible()
    page.get_by_role("button", name=re.compile(r"Run again from this task\W+Write the guide")).click()

    expect(page).not_to_have_url(re.compile(rf"/runs/{ids['run']}/$"))
    expect(first).to_contain_text("Kept from the earlier run")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=20_000)


def test_the_run_page_fits_a_phone(page: Page, app_server: LiveServer, fake_model: Any) -> None:
    llm, model = fake_model
    model.delay = model.chunk_delay = 0
    ids = start_run(app_server, llm, "Phone trip")
    page.set_viewport_size({"width": 360, "height": 800})
    sign_in(page)
    page.goto(f"/runs/{ids['run']}/")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded", timeout=20_000)
    page.reload()

    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    page.goto("/runs/")
    expect(page.get_by_role("link", name=f"#{ids['run']}")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
