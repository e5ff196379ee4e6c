"""The run page's wait note counts down (run.js): the note carries when the wait ends and its words
with {n} for the seconds, in the reader's language, on the page and as the socket re-renders it."""

from __future__ import annotations

import html as html_lib
import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.utils import timezone, translation

from crews.bridge import payload_of, record_event
from crews.models import Run
from crews.run_view import RunView, render_event_html
from tests.conftest import signed_in
from tests.crews.test_run_fragments import element
from tests.crews.test_run_views import detail, queued_run, started, task_ids

pytestmark = pytest.mark.django_db

RETRY = {"model": "m", "purpose": "react", "error": "429", "retrying": True, "attempt": 2,
         "kind": "rate_limited", "retry_in": 11.2, "max_retries": 3}


def note_attrs(html: str) -> dict[str, str]:
    """The wait note's data-* attributes, unescaped."""
    note = element(html, "run-wait")
    assert note, "no wait note"
    start = note.split(">", 1)[0]
    return {k: html_lib.unescape(v) for k, v in re.findall(r' data-([a-z-]+)="([^"]*)"', start)}


def page_of(user: Any, run: Run, language: str = "en") -> str:
    client = signed_in(user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    return client.get(detail(run)).content.decode()


def test_a_retrys_note_carries_when_the_wait_ends_and_its_words_to_count_with(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    view = RunView.build(run)
    event = record_event(run.pk, "llm.failed", RETRY, task_id=first)
    with translation.override("en"):  # the socket renders in its reader's language; this one's English
        message = render_event_html(view, dict(payload_of(event)), can_write=True)
    until = int((event.at + timedelta(seconds=11.2)).timestamp() * 1000)

    for html in (message, page_of(builder, run)):
        attrs = note_attrs(html)
        assert attrs["until"] == str(until)  # epoch ms: the event's time plus retry_in
        assert attrs["counting"] == "Waiting {n} s: the model's rate limit (retry 2 of 3)."
        assert attrs["done"] == "Retrying now."
        assert "data-wait-text>Waiting 12 s: the model's rate limit (retry 2 of 3).</span>" in html
    # The page says what the server's clock read (run.js counts against it, not the reader's).
    now_ms = int(re.search(r'id="run-page"[^>]* data-now-ms="(\d+)"', page_of(builder, run)).group(1))  # type: ignore[union-attr]
    assert abs(now_ms - timezone.now().timestamp() * 1000) < 60_000


def test_a_rate_limit_wait_counts_down_too_and_says_what_comes_in_the_readers_language(builder):
    run = queued_run(builder)
    started(run)
    first = task_ids(run)[0]
    view = RunView.build(run)
    event = record_event(run.pk, "llm.waiting", {"model": "m", "purpose": "react", "reason": "rate_limit",
                                                 "seconds": 20.4, "limit": "crew", "rpm": 1}, task_id=first)
    with translation.override("pt-br"):
        message = render_event_html(view, dict(payload_of(event)), can_write=True)

    for html in (message, page_of(builder, run, "pt-br")):
        attrs = note_attrs(html)
        assert attrs["until"] == str(int((event.at + timedelta(seconds=20.4)).timestamp() * 1000))
        assert "{n}" in attrs["counting"] and "Waiting" not in attrs["counting"]  # translated
        assert attrs["done"]  # its msgstr is merged into locale/ by the lead
    english = note_attrs(page_of(builder, run))
    assert english["counting"] == "Waiting for a free slot ({n} s) under the crew's request limit: 1 a minute."
    assert english["done"] == "Sending the request now."


def test_no_wait_no_countdown(builder):
    run = queued_run(builder)
    started(run)
    note = element(page_of(builder, run), "run-wait") or ""
    assert " hidden" in note.split(">", 1)[0] and "data-until" not in note
