"""`make run` to ready, and first-page times, with litellm imported lazily (as shipped) or up front.

Run from the repository root on a prepared venv: ``.venv/bin/python bench/startup.py`` (``--rounds
N``, default 5). Nothing leaves loopback. bench/README.md says what the figures mean.
``--fresh`` times a fresh install to its first page instead (bench/fresh_install.py).

First ``manage.py serve`` starts once on a new database (``make run``'s first start: it migrates
and seeds before serving). Then every round starts it twice on that database, as a second ``make
run`` does (serve alone: nothing to migrate, the seed already done), on a free port: as shipped,
where litellm is imported only when a live model is called, and the baseline, the same command
with ``import litellm`` first. For each start it times: the "is ready at" line, ``/api/health``
answering, the first and a second GET of ``/login/``, the first and a second GET of the crew
list signed in as the seeded admin, and the exit after SIGTERM. The two variants alternate which
goes first, so load on the machine falls on both alike.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from _common import PYTHON, ROOT, free_port, table

READY_LINE = "is ready at"
START_TIMEOUT = 120.0
EAGER = (
    "import litellm, runpy, sys; "
    "sys.argv = ['manage.py', 'serve', '--port', sys.argv[1]]; "
    "runpy.run_path('manage.py', run_name='__main__')"
)
_CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def environment(var_dir: Path) -> dict[str, str]:
    """What ``make run`` sets, on a throwaway var dir, with SQLite and the in-memory layer."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PLANNER_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="planner_site.settings",
        LITELLM_LOCAL_MODEL_COST_MAP="True",  # the Makefile exports it
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
    )
    return env


def admin_password(var_dir: Path) -> str:
    text = (var_dir / "first-login.txt").read_text()
    match = re.search(r"^password: (\S+)$", text, re.M)
    if match is None:
        raise RuntimeError("seed wrote no password into first-login.txt")
    return match.group(1)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the sign-in POST's redirect is not followed: the crew list is timed alone


class Browser:
    """A cookie-keeping client; every request opens a new loopback connection."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect()
        )

    def get(self, path: str) -> tuple[float, int, str]:
        started = time.perf_counter()
        with self.opener.open(self.base + path, timeout=30) as response:
            body = response.read().decode()
            status = response.status
        return time.perf_counter() - started, status, body

    def sign_in(self, login_page: str, username: str, password: str) -> None:
        match = _CSRF_FIELD.search(login_page)
        if match is None:
            raise RuntimeError("the sign-in page has no CSRF token")
        form = urllib.parse.urlencode(
            {
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": match.group(1),
                "next": "",
            }
        ).encode()
        try:
            self.opener.open(self.base + "/login/", data=form, timeout=30)
        except urllib.error.HTTPError as exc:
            if exc.code != 302:
                raise
        else:
            raise RuntimeError("signing in did not redirect: wrong password?")


@dataclass
class Start:
    """One server start; every figure in seconds (rss in MiB)."""

    figures: dict[str, float] = field(default_factory=dict)


class _ReadyWatcher(threading.Thread):
    """Reads the server's output as it comes (so the pipe never fills) and notes the ready line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        super().__init__(daemon=True)
        self.process = process
        self.ready = threading.Event()
        self.ready_at = 0.0
        self.lines: list[str] = []

    def run(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if READY_LINE in line and not self.ready.is_set():
                self.ready_at = time.perf_counter()
                self.ready.set()


def rss_mib(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan")
    match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
    return int(match.group(1)) / 1024 if match else float("nan")


def wait_for_health(base: str, deadline: float) -> float:
    while True:
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=10) as response:
                response.read()
                return time.perf_counter()
        except (urllib.error.URLError, ConnectionError):
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.005)  # polling a port that is not open yet


def start_server(eager: bool, env: dict[str, str], var_dir: Path) -> Start:
    port = free_port()
    if eager:
        command = [PYTHON, "-c", EAGER, str(port)]
    else:
        command = [PYTHON, "manage.py", "serve", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    result = Start()
    figures = result.figures
    started = time.perf_counter()
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    watcher = _ReadyWatcher(process)
    watcher.start()
    try:
        if not watcher.ready.wait(START_TIMEOUT):
            raise RuntimeError("the server did not get ready:\n" + "".join(watcher.lines[-20:]))
        figures["ready"] = watcher.ready_at - started
        figures["health"] = wait_for_health(base, started + START_TIMEOUT) - started
        browser = Browser(base)
        figures["login, first GET"], status, page = browser.get("/login/")
        figures["login, second GET"], _status, page = browser.get("/login/")
        if status != 200:
            raise RuntimeError(f"/login/ answered {status}")
        browser.sign_in(page, "admin", admin_password(var_dir))  # seeded by the first start
        figures["crew list, first GET"], status, _page = browser.get("/crews/")
        figures["crew list, second GET"], _status, _page = browser.get("/crews/")
        if status != 200:
            raise RuntimeError(f"/crews/ answered {status}")
        figures["RSS after the pages (MiB)"] = rss_mib(process.pid)
        stopping = time.perf_counter()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        figures["exit after SIGTERM"] = time.perf_counter() - stopping
        if code != 0:
            raise RuntimeError(f"the server exited with {code}:\n" + "".join(watcher.lines[-20:]))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    watcher.join(timeout=5)
    return result


def fmt(value: float, unit: str) -> str:
    return f"{value:.0f}" if unit == "MiB" else f"{value * 1000:.0f}"


def main(rounds: int) -> None:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="planner-bench-") as tmp:
        var_dir = Path(tmp)
        env = environment(var_dir)
        fresh = start_server(False, env, var_dir).figures  # a new database: migrated and seeded first
        starts: dict[bool, list[Start]] = {False: [], True: []}
        for number in range(rounds):
            order = (False, True) if number % 2 == 0 else (True, False)
            for eager in order:
                starts[eager].append(start_server(eager, env, var_dir))
    load_after = os.getloadavg()

    metrics = list(starts[False][0].figures)
    headers = [
        "seconds unless noted",
        "lazy median",
        "lazy min",
        "lazy max",
        "eager median",
        "eager min",
        "eager max",
        "lazy / eager",
    ]
    rows: list[list[str]] = []

    def row(name: str, lazy: list[float], eager: list[float], unit: str = "ms") -> None:
        label = f"{name} ({unit})"
        lm, em = statistics.median(lazy), statistics.median(eager)
        rows.append(
            [
                label,
                fmt(lm, unit),
                fmt(min(lazy), unit),
                fmt(max(lazy), unit),
                fmt(em, unit),
                fmt(min(eager), unit),
                fmt(max(eager), unit),
                f"{lm / em:.2f}",
            ]
        )

    for metric in metrics:
        unit = "MiB" if metric.endswith("(MiB)") else "ms"
        name = metric.removesuffix(" (MiB)")
        row(
            "serve: " + name if metric in ("ready", "health", "exit after SIGTERM") else name,
            [s.figures[metric] for s in starts[False]],
            [s.figures[metric] for s in starts[True]],
            unit,
        )
    headers[0] = "figure"
    print(
        f"make run to ready and first pages — {date.today().isoformat()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {rounds} rounds; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print(
        "lazy = manage.py serve as shipped; eager = the same with `import litellm` first (the baseline)."
    )
    print(
        "Times from the process start, except the page rows (one request each) and the exit (from SIGTERM).\n"
    )
    print(
        f"Once, on a new database (serve migrates and seeds first): ready after {fresh['ready'] * 1000:.0f} ms, "
        f"the first page answered after {(fresh['health'] + fresh['login, first GET']) * 1000:.0f} ms."
    )
    print("Each later start (a second make run: serve alone, nothing to migrate or seed) below.\n")
    print(table(rows, headers))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="server starts per variant")
    parser.add_argument("--fresh", action="store_true",
                        help="instead: a fresh install to its first page, then a second make run (bench/fresh_install.py)")
    args = parser.parse_args()
    if args.fresh:
        sys.path.insert(0, str(ROOT / "bench"))
        from fresh_install import main as fresh_main

        sys.exit(fresh_main(keep=False))
    main(args.rounds)
