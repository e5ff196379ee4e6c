"""Scale-out: a run executed by a ``db_worker`` process reaches a websocket on a web process.

Two real processes on the test's PostgreSQL database and on Redis: ``manage.py serve --workers 0``
(the web side only: HTTP and websockets) and ``manage.py db_worker``. The run is kicked off through
the web process's API; the worker claims it from the database and executes it; its events travel
through Redis to the web process, whose JSON socket must hand the client every event exactly once
(seq 1..last, no gap, no duplicate), the same as the database holds, and whose run-page socket
(HTML fragments for htmx) must show one row for each of them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from websockets.sync.client import connect

from crews.models import Run, RunEvent
from planner_site.tokens import token_create
from tests.crews.run_helpers import fake_llm, make_crew
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60.0
TERMINAL = {"run.succeeded", "run.failed", "run.cancelled", "run.interrupted"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _database_url() -> str:
    """The test database pytest-django created, as a URL for the subprocesses."""
    db = connection.settings_dict
    user = urllib.parse.quote(db["USER"] or "", safe="")
    password = ":" + urllib.parse.quote(db["PASSWORD"], safe="") if db.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Process:
    """A manage.py subprocess whose output is kept (and shown when the test fails)."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_for_line(self, text: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} from {self.proc.args}:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        return "".join(self.lines[-60:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(timeout=5)


@pytest.fixture
def processes_env() -> Iterator[dict[str, str]]:
    """Settings for the subprocesses: this test's database, Redis, the test's secrets."""
    with tempfile.TemporaryDirectory(prefix="crew-planner-scaleout-") as var:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PLANNER_"))}
        env.update(
            DJANGO_SETTINGS_MODULE="planner_site.settings",  # the database task backend, as deployed
            DATABASE_URL=_database_url(),
            REDIS_URL=os.environ["REDIS_URL"],
            PLANNER_VAR_DIR=var,
            PLANNER_SECRETS_KEYS=",".join(settings.PLANNER_SECRETS_KEYS),  # to read the LLM's key
            PLANNER_LOG_LEVEL="WARNING",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
        )
        yield env


class Gate:
    """The fake LLM holds its first answer until the client is connected (bounded)."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    def __call__(self, request: RecordedRequest) -> Reply:
        self.opened.wait(timeout=TIMEOUT)
        return Reply.text("Thought: I now know the final answer\nFinal Answer: done").after(0.05)


def _kickoff(base: str, raw: str, crew_id: int) -> int:
    request = urllib.request.Request(
        f"{base}/api/crews/{crew_id}/kickoff", method="POST",
        data=json.dumps({"inputs": {"topic": "tides"}}).encode(),
        headers={"Authorization": f"Bearer {raw}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 202
        return int(json.loads(response.read())["id"])


@pytest.mark.django_db(transaction=True)
def test_a_worker_process_runs_the_crew_and_the_web_process_streams_every_event(
    builder: Any, processes_env: dict[str, str]
) -> None:
    with FakeLLMServer() as server:
        gate = Gate()
        server.default = gate
        crew = make_crew(builder, name="Across", tasks=("Research", "Draft", "Report"), llm=fake_llm(server))
        _token, raw = token_create(user=builder, name="scaleout")
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        web = Process("serve", "--port", str(port), "--workers", "0", env=processes_env)
        worker = Process(
            "db_worker", "--interval", "0.2", "--no-startup-delay", "--worker-id", f"scaleout-{uuid.uuid4().hex[:12]}",
            env=processes_env,
        )
        try:
            web.wait_for_line("is ready at")
            run_id = _kickoff(base, raw, crew.pk)

            received: list[dict[str, Any]] = []
            page_rows: list[int] = []
            live_from = None
            socket_headers = {"Authorization": f"Bearer {raw}", "Origin": base}
            with (
                connect(f"ws://127.0.0.1:{port}/ws/api/runs/{run_id}/?after=0",
                        additional_headers=socket_headers, open_timeout=30) as ws,
                connect(f"ws://127.0.0.1:{port}/ws/runs/{run_id}/?after=0",
                        additional_headers=socket_headers, open_timeout=30) as page,
            ):  # fmt: skip
                # What is stored so far comes as the replay; the worker then waits on the LLM.
                received.append(json.loads(ws.recv(timeout=30)))
                live_from = len(received)
                gate.opened.set()
                deadline = time.monotonic() + TIMEOUT
                while received[-1]["type"] not in TERMINAL:
                    assert time.monotonic() < deadline, f"the run did not finish: {received}"
                    received.append(json.loads(ws.recv(timeout=TIMEOUT)))
                # The run page's socket: one row per event, as HTML fragments for htmx.
                while len(page_rows) < len(received):
                    fragment = str(page.recv(timeout=TIMEOUT))
                    page_rows += [int(seq) for seq in re.findall(r'<li id="event-(\d+)"', fragment)]
        except BaseException:
            print("web:\n" + web.output() + "\nworker:\n" + worker.output())
            raise
        finally:
            gate.opened.set()
            worker.stop()
            web.stop()

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error
    # The worker process ran it, not the web process (which had no workers).
    assert f"-{worker.proc.pid}-" in run.worker_id
    stored = list(RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("seq", "type"))
    assert [seq for seq, _type in stored] == list(range(1, len(stored) + 1))
    assert [(e["seq"], e["type"]) for e in received] == stored  # every event, once, in order
    assert page_rows == [seq for seq, _type in stored]  # and on the run page's socket too
    # Most of the run reached the client live, across Redis, while the worker executed it.
    live = received[live_from:]
    assert len(live) >= 10 and {"task.completed", "llm.completed", "run.succeeded"} <= {e["type"] for e in live}


class HeldAnswers:
    """Every answer waits until ``release``; ``waiting`` counts requests held right now."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.waiting = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.waiting += 1
        try:
            self.release.wait(timeout=TIMEOUT)
        finally:
            with self._lock:
                self.waiting -= 1
        return Reply.text("Thought: I now know the final answer\nFinal Answer: done")


@pytest.mark.django_db(transaction=True)
def test_a_threaded_worker_runs_crews_at_once_wakes_on_notify_and_stops_cleanly(
    builder: Any, processes_env: dict[str, str]
) -> None:
    from planner_site.models import WorkerBeat
    from tests.crews.run_helpers import wait_for, wait_for_status

    with FakeLLMServer() as server:
        answers = HeldAnswers()
        server.default = answers
        crew = make_crew(builder, name="Together", tasks=("Research",), llm=fake_llm(server))
        _token, raw = token_create(user=builder, name="scaleout")
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        web = Process("serve", "--port", str(port), "--workers", "0", env=processes_env)
        # Idle threads poll every 60 s x 3 between them: only the NOTIFY of an enqueue can start
        # a run within the deadlines below.
        worker = Process(
            "db_worker", "--threads", "3", "--interval", "60", "--no-startup-delay",
            "--worker-id", f"threads-{uuid.uuid4().hex[:12]}", env=processes_env,
        )
        try:
            web.wait_for_line("is ready at")
            wait_for(lambda: WorkerBeat.objects.exists(), timeout=TIMEOUT, what="the worker's heartbeat")
            time.sleep(1.0)  # its threads have polled once, found nothing, and wait
            run_ids = [_kickoff(base, raw, crew.pk) for _ in range(3)]
            # One process, three runs in flight at the same time.
            wait_for(lambda: answers.waiting == 3, timeout=15, what="three LLM requests at once")
            answers.release.set()
            for run_id in run_ids:
                run = wait_for_status(run_id, Run.Status.SUCCEEDED, Run.Status.FAILED, timeout=30)
                assert run.status == Run.Status.SUCCEEDED, run.error
                assert f"-{worker.proc.pid}-" in run.worker_id

            # SIGTERM while a run waits on its LLM: the run is marked interrupted, not left running.
            answers.release.clear()
            last = _kickoff(base, raw, crew.pk)
            wait_for(lambda: answers.waiting == 1, timeout=15, what="the last run's LLM request")
            worker.proc.send_signal(signal.SIGTERM)
            assert worker.proc.wait(timeout=30) == 0
            assert Run.objects.get(pk=last).status == Run.Status.INTERRUPTED
        except BaseException:
            print("web:\n" + web.output() + "\nworker:\n" + worker.output())
            raise
        finally:
            answers.release.set()
            worker.stop()
            web.stop()
