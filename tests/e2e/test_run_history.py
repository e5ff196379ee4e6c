"""The run history's filters in the browser: a change reloads the list and the address at once
(no button with JavaScript), a day typed from the keyboard is kept whole, and "Clear filters"
brings every run back."""

from __future__ import annotations

import json
import re
from datetime import date, timedelta

from playwright.sync_api import Page, expect

from tests.e2e.conftest import LiveServer, sign_in

SETUP = """
import json
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.utils import timezone
from crews.models import Crew, Run

ada = get_user_model().objects.get(username="ada")
crew = Crew.objects.create(owner=ada, name="History filters")
failed = Run.objects.create(crew=crew, created_by=ada, status="failed", inputs={})
done = Run.objects.create(crew=crew, created_by=ada, status="succeeded", inputs={})
old = Run.objects.create(crew=crew, created_by=ada, status="succeeded", inputs={})
Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=10))
print(json.dumps({"crew": crew.pk, "failed": failed.pk, "done": done.pk, "old": old.pk}))
"""


def test_choosing_a_status_filters_the_list_and_the_address_and_clear_undoes_it(
    page: Page, app_server: LiveServer
) -> None:
    made = json.loads(app_server.shell(SETUP).strip().splitlines()[-1])
    sign_in(page)
    page.goto(f"/crews/{made['crew']}/runs/")
    failed = page.get_by_role("link", name=f"#{made['failed']}", exact=True)
    done = page.get_by_role("link", name=f"#{made['done']}", exact=True)
    expect(done).to_be_visible()
    expect(page.get_by_role("button", name="Filter")).to_have_count(0)  # hidden once htmx runs
    expect(page.locator("#run-history button[type=submit]")).to_be_hidden()

    page.get_by_label("Status").focus()
    page.get_by_label("Status").select_option("failed")

    expect(page).to_have_url(re.compile(r"[?&]status=failed"))
    expect(done).to_have_count(0)
    expect(failed).to_be_visible()
    expect(page.get_by_label("Status")).to_be_focused()  # the swap keeps the focus where it was

    page.get_by_role("link", name="Clear filters").first.click()

    expect(page).to_have_url(re.compile(rf"/crews/{made['crew']}/runs/$"))
    expect(done).to_be_visible()
    expect(page.get_by_label("Status")).to_have_value("")


def test_a_day_typed_from_the_keyboard_is_kept_whole_and_filters_when_it_is_left(
    page: Page, app_server: LiveServer
) -> None:
    made = json.loads(app_server.shell(SETUP.replace("History filters", "Typed days")).strip().splitlines()[-1])
    until = date.today() - timedelta(days=5)  # the old run is from 10 days ago, the others today
    sign_in(page)
    page.goto(f"/crews/{made['crew']}/runs/")
    done = page.get_by_role("link", name=f"#{made['done']}", exact=True)
    old = page.get_by_role("link", name=f"#{made['old']}", exact=True)
    expect(done).to_be_visible()

    # Typed digit by digit (the browser's month/day/year order), the year passes through 0002,
    # 0020 and 0202, each a valid day: a swap then would replace the input mid-typing.
    page.get_by_label("To").focus()
    page.keyboard.type(until.strftime("%m%d%Y"), delay=50)
    expect(page.get_by_label("To")).to_have_value(until.isoformat())
    page.keyboard.press("Tab")  # to the input's calendar button
    expect(page.get_by_label("To")).to_be_focused()
    expect(page).not_to_have_url(re.compile(r"until="))  # still in the input: nothing sent yet
    page.keyboard.press("Tab")  # out of it: the list follows

    expect(page).to_have_url(re.compile(rf"[?&]until={until.isoformat()}"))
    expect(done).to_have_count(0)
    expect(old).to_be_visible()
    expect(page.get_by_label("To")).to_have_value(until.isoformat())

    since = until - timedelta(days=2)  # after the old run: Enter sends it without leaving the input
    page.get_by_label("From").focus()
    page.keyboard.type(since.strftime("%m%d%Y"), delay=50)
    page.keyboard.press("Enter")

    expect(page).to_have_url(re.compile(rf"[?&]since={since.isoformat()}"))
    expect(page.get_by_text("No runs match these filters.")).to_be_visible()
    expect(page.get_by_label("From")).to_have_value(since.isoformat())
