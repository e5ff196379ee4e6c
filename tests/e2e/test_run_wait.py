"""A retry's wait on the run page counts down in the browser (run.js), as it arrives over the socket
and after a reload; screen readers get the note's words once, not a number each second."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in
from tests.e2e.test_run_page import SlowModel, mark_page, start_run, still_same_page
from tests.e2e.test_run_page import fake_model as fake_model  # noqa: F401 - the fixture
from tests.fakes.openai_server import RecordedRequest, Reply

RETRY_AFTER = 15  # seconds: long enough to read the note twice, and again after a reload


class RateLimitedOnce:
    """The first request waits for ``gate`` and is refused with 429 (Retry-After); then ``model``."""

    def __init__(self, model: SlowModel) -> None:
        self.model = model
        self.gate = threading.Event()
        self.refused = False

    def __call__(self, request: RecordedRequest) -> Reply:
        if not self.refused:
            self.refused = True
            self.gate.wait(60)
            return Reply.error(429, "Rate limit reached", retry_after=RETRY_AFTER)
        return self.model(request)


def seconds_shown(page: Page) -> int:
    text = page.locator("#run-wait [data-wait-text]").inner_text()
    match = re.search(r"(\d+) s\b", text)
    assert match, f"no seconds in {text!r}"
    return int(match.group(1))


def counts_down(page: Page) -> None:
    first = seconds_shown(page)
    time.sleep(1.2)
    second = seconds_shown(page)
    assert 0 < second < first <= RETRY_AFTER


def test_a_retrys_wait_counts_down_live_and_after_a_reload(page: Page, app_server: LiveServer,
                                                          fake_model: Any) -> None:
    llm, model = fake_model
    refusing = RateLimitedOnce(model)
    llm.default = refusing
    try:
        ids = start_run(app_server, llm, "Rate-limited trip")
        sign_in(page)
        page.goto(f"/runs/{ids['run']}/")
        mark_page(page)
        expect(page.locator("#run-wait")).to_be_hidden()
        expect(page.locator(".entry--llm[data-status=running]")).to_have_count(1, timeout=20_000)
    finally:
        refusing.gate.set()

    # The 429 arrives over the socket: the note appears and its number goes down each second.
    note = page.locator("#run-wait")
    expect(note).to_be_visible(timeout=20_000)
    expect(note).to_contain_text("the model's rate limit (retry 1 of")
    counts_down(page)
    assert still_same_page(page)
    # Screen readers get the words as they came, once; the counting ones are hidden from them.
    expect(note.locator("[data-wait-text]")).to_have_attribute("aria-hidden", "true")
    expect(note.locator(".visually-hidden")).to_have_text(re.compile(r"^Waiting \d+ s: the model's rate limit"))

    # A reload mid-wait counts on from what is left (not from the full wait again).
    page.reload()
    expect(note).to_be_visible()
    counts_down(page)
    assert seconds_shown(page) < RETRY_AFTER - 1
