"""Browser journeys: Debian's Chromium driven by Playwright against the real one-process server.

The server is ``manage.py serve`` (Daphne + the embedded workers) on its own SQLite database in a
temporary folder, seeded like a fresh install: what a person gets from ``make run``.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "test-results"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
PASSWORD = "e2e-Password-123"


@dataclass
class LiveServer:
    url: str
    env: dict[str, str]

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
            capture_output=True, text=True, timeout=120,
        )
        if done.returncode:  # say why: a bare CalledProcessError hides the traceback
            raise AssertionError(f"manage.py {args[0]} failed:\n{done.stderr[-4000:]}")
        return done.stdout

    def shell(self, code: str) -> str:
        """Run Python with Django set up against the server's database (for checks and set-up)."""
        return self.manage("shell", "-c", code)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    var = tmp_path_factory.mktemp("var")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_"))}
    # The demo model answers at once here; a journey that wants it paced sets its LLM's params.
    env.update(DJANGO_SETTINGS_MODULE="planner_site.settings", PLANNER_VAR_DIR=str(var),
               PLANNER_DEMO_FIRST_TOKEN_SECONDS="0", PLANNER_DEMO_TOKENS_PER_SECOND="0")
    port = _free_port()
    server = LiveServer(url=f"http://127.0.0.1:{port}", env=env)
    server.manage("migrate", "-v0")
    server.manage("seed")
    server.manage("bootstrap", "--username", "ada", "--password", PASSWORD, "--admin")
    log = open(var / "server.log", "w")  # noqa: SIM115 - open for the server's whole life
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "2"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(server.url + "/api/health", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((var / "server.log").read_text()) from None
            time.sleep(0.2)
    yield server
    proc.terminate()
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if report.when == "call":
        item.stash.setdefault(_FAILED, False)
        if report.failed:
            item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: Browser, app_server: LiveServer, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(base_url=app_server.url, viewport={"width": 1280, "height": 900})
    context.tracing.start(screenshots=True, snapshots=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    if request.node.stash.get(_FAILED, False):
        RESULTS.mkdir(exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
        page.screenshot(path=str(RESULTS / f"{name}.png"), full_page=True)
        context.tracing.stop(path=str(RESULTS / f"{name}.trace.zip"))
    else:
        context.tracing.stop()
    context.close()


def sign_in(page: Page, username: str = "ada", password: str = PASSWORD) -> None:
    page.goto("/login/")
    page.get_by_label(re.compile("user ?name", re.I)).fill(username)
    page.get_by_label(re.compile("password", re.I)).fill(password)
    page.get_by_role("button", name=re.compile("sign in|log in", re.I)).click()
    page.wait_for_url(re.compile(r"/crews/"))


# The page's own function, compiled with the call (the browser's debugging protocol is not held to
# the page's Content-Security-Policy); CONDITION is pasted in, so nothing is evaluated from a string.
_WAIT_UNTIL = """(timeout) => new Promise((resolve, reject) => {
  const deadline = performance.now() + timeout;
  const check = () => {
    let holds = false;
    try { holds = Boolean(CONDITION); } catch (error) { holds = false; }
    if (holds) resolve(true);
    else if (performance.now() > deadline) reject(new Error("timed out waiting for: " + CONDITION_TEXT));
    else setTimeout(check, 50);
  };
  check();
})"""


def wait_until(page: Page, condition: str, *, timeout: float = 15_000) -> None:
    """Wait until the JavaScript expression ``condition`` holds in the page.

    Playwright's ``wait_for_function`` polls with ``eval``, which the site's
    Content-Security-Policy refuses (no 'unsafe-eval'): its polls after the first one fail.
    """
    script = _WAIT_UNTIL.replace("CONDITION_TEXT", json.dumps(condition)).replace("CONDITION", condition)
    page.evaluate(script, timeout)
