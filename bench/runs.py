"""Runs: events stored and broadcast per second, emit-to-websocket latency, 20 runs at once.

Run from the repository root: ``.venv/bin/python bench/runs.py`` (``--quick`` for a smoke run).
With ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` set, the event-throughput figures are also
measured on PostgreSQL + Redis (in a throwaway database created next to the one the URL names,
dropped afterwards, with its own channel-layer prefix). Nothing leaves loopback.
bench/README.md ("Runs") says what the figures mean and keeps the last ones measured.

(a) Events per second: ``crews.bridge.RunEventSink.emit`` (``record_event`` — the gapless seq under
    the run row's lock, the roll-ups — then the channel-layer broadcast, drained by one listener
    per run) for N events on one run, and on 4 runs at once. The harness is the one ``serve`` uses:
    the event loop in the main thread, one worker thread per run calling ``async_to_sync``. The
    baseline is ``record_event`` alone in a plain loop, in the same process.
(b) Latency from emit to a websocket client: the real server (``manage.py serve`` on a free port,
    a throwaway PLANNER_VAR_DIR, SQLite and the in-memory channel layer, as ``make run``), a real
    10-task crew run against a fake OpenAI server (20 ms per answer), 1 or 100 clients on
    ``/ws/api/runs/<id>/`` with a bearer token, 3 rounds. The fake LLM holds the run's first call until every client is connected, so
    the figures cover live events only. Latency = the client's receive time - the event's
    ``at`` (stored with microseconds when the row is written; same machine, same clock).
(c) 20 runs at once: a 2-task crew (planning off) on an LLM whose every reply takes 200 ms, so one
    run is 2 calls, ideally 0.4 s plus overhead. Kicked off together through
    ``POST /api/crews/{id}/kickoff``; the wall time until the last ``run.succeeded`` reached its
    websocket, against the baseline: one such run alone, measured the same way in the same bench,
    after an untimed round of as many runs at once (threads' first connections, compiled queries).
    It also prints the whole machine's busy CPU per run (/proc/stat: ours, the bench's, the rest)
    against what the target leaves: CPUs × 1.3 × the ideal ÷ runs.
    With ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` set, (c) is measured a second time in the
    scale-out topology: ``serve --workers 0`` for HTTP and websockets, and ``--scaleout PxT``
    (default 2x16) ``manage.py db_worker --threads T`` processes, on a throwaway database and Redis
    database 14. Its CPU column adds up every process of ours (PostgreSQL's and Redis's own are not
    in it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))

# Loopback only: no proxy may see the fake LLM or the server.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

P99_TARGET_MS = 50.0  # at 100 clients
CONCURRENT_TARGET = 1.3  # 20 runs within 1.3x the time of one run alone
LLM_DELAY = 0.2
FINAL = "Thought: I now know the final answer\nFinal Answer: All done, figures checked."
START_TIMEOUT = 90.0
RUN_TIMEOUT = 60.0
TERMINAL = ("run.succeeded", "run.failed", "run.cancelled", "run.interrupted")
EVENT_MIX = (
    "task.started",
    "llm.started",
    "llm.completed",
    "tool.started",
    "tool.completed",
    "task.completed",
)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


# (a) Events per second, in a child process that sets Django up on its own database -------------


def child_events(events: int, runs: int) -> None:
    """Measure in this process and print one JSON line; the parent picks the database."""
    var = Path(tempfile.mkdtemp(prefix="planner-bench-events-"))
    os.environ["PLANNER_VAR_DIR"] = str(var)
    os.environ["DJANGO_SETTINGS_MODULE"] = "planner_site.settings"
    os.environ.setdefault("PLANNER_LOG_LEVEL", "WARNING")
    with throwaway_postgres() as db_label:
        import django
        from django.conf import settings

        django.setup()
        if "prefix" not in settings.CHANNEL_LAYERS["default"].get("CONFIG", {}) and os.environ.get(
            "REDIS_URL"
        ):
            # Our own groups: a test or server on the same Redis never sees these events.
            settings.CHANNEL_LAYERS["default"].setdefault("CONFIG", {})["prefix"] = (
                f"crew-bench-{os.getpid()}"
            )
        from django.core.management import call_command
        from django.db import connections

        call_command("migrate", verbosity=0, interactive=False)
        result = {
            "database": db_label,
            "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1],
        }
        result.update(_measure_events(events, runs))
        connections.close_all()
    shutil.rmtree(var, ignore_errors=True)
    print("RESULT " + json.dumps(result), flush=True)


@contextmanager
def throwaway_postgres() -> Iterator[str]:
    """With a PostgreSQL DATABASE_URL: a fresh database beside it for this process, then dropped."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        os.environ.pop("DATABASE_URL", None)
        yield "SQLite (WAL)"
        return
    import psycopg

    parts = urllib.parse.urlsplit(url)
    name = f"crew_bench_runs_{os.getpid()}"
    admin = psycopg.connect(url, autocommit=True)
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        os.environ["DATABASE_URL"] = urllib.parse.urlunsplit(parts._replace(path="/" + name))
        try:
            yield "PostgreSQL"
        finally:
            from django.db import connections

            connections.close_all()
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()


def _measure_events(events: int, runs: int) -> dict[str, Any]:
    from asgiref.sync import async_to_sync, sync_to_async
    from channels.layers import get_channel_layer
    from django.contrib.auth import get_user_model

    from agents.engine.events import Event
    from crews.bridge import RunEventSink, record_event
    from crews.models import Crew, Run, RunTask
    from crews.realtime import run_group

    user = get_user_model().objects.create_user("bench", password="bench-Password-1")
    crew = Crew.objects.create(owner=user, name="Events bench")

    def new_run() -> int:
        run = Run.objects.create(crew=crew, created_by=user, status=Run.Status.RUNNING)
        RunTask.objects.create(run=run, task_id_snapshot=1, order=0, name="T")
        return run.pk

    def event(i: int) -> Event:
        kind = EVENT_MIX[i % len(EVENT_MIX)]
        data: dict[str, Any] = {"model": "openai/bench", "purpose": "react"}
        if kind == "llm.completed":
            data.update(prompt_tokens=120, completion_tokens=40, cost_usd=0.0001, latency_ms=200)
        elif kind == "task.completed":
            data = {"output": "A short answer to the task, as an agent would give it."}
        return Event(type=kind, data=data, task_id="1")

    # Baseline: the database part alone, one event after another, no event loop.
    run_id = new_run()
    started = time.perf_counter()
    for i in range(events):
        e = event(i)
        record_event(run_id, e.type, e.data, task_id=1)
    baseline = events / (time.perf_counter() - started)

    def emit_all(run_id: int) -> None:
        # A worker thread, as in serve: the run's coroutine goes back to the main loop.
        async def emit() -> None:
            sink = RunEventSink(run_id)
            for i in range(events):
                await sink.emit(event(i))

        async_to_sync(emit)()

    async def drain(run_id: int, stop: asyncio.Event, got: list[int]) -> None:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(run_group(run_id), channel)
        try:
            while not stop.is_set() or got[0] < events:
                try:
                    await asyncio.wait_for(layer.receive(channel), timeout=0.5)
                    got[0] += 1
                except TimeoutError:
                    if stop.is_set():
                        return
        finally:
            await layer.group_discard(run_group(run_id), channel)

    async def scenario(count: int) -> tuple[float, int]:
        ids = [await sync_to_async(new_run)() for _ in range(count)]
        stop = asyncio.Event()
        counters = [[0] for _ in ids]
        listeners = [
            asyncio.ensure_future(drain(i, stop, c)) for i, c in zip(ids, counters, strict=True)
        ]
        await asyncio.sleep(0.1)  # the listeners have joined their groups
        began = time.perf_counter()
        await asyncio.gather(*(sync_to_async(emit_all, thread_sensitive=False)(i) for i in ids))
        elapsed = time.perf_counter() - began
        stop.set()
        await asyncio.gather(*listeners, return_exceptions=True)
        return count * events / elapsed, sum(c[0] for c in counters)

    one, one_got = asyncio.run(scenario(1))
    many, many_got = asyncio.run(scenario(runs))
    seqs_ok = all(
        list(Run.objects.get(pk=r).events.values_list("seq", flat=True))
        == list(range(1, events + 1))
        for r in Run.objects.values_list("pk", flat=True)
    )
    return {
        "events": events,
        "runs": runs,
        "baseline": baseline,
        "one": one,
        "many": many,
        "broadcast_one": one_got,
        "broadcast_many": many_got,
        "gapless": seqs_ok,
    }


def run_events_child(events: int, runs: int, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [PYTHON, __file__, "--child-events", "--events", str(events), "--runs-at-once", str(runs)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"events bench failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


# (b), (c): the real server --------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    """``manage.py serve`` on a free port with a throwaway var folder (SQLite, in-memory layer)."""

    var: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_"))
        }
        env.update(
            DJANGO_SETTINGS_MODULE="planner_site.settings",
            PLANNER_VAR_DIR=str(self.var),
            PLANNER_KICKOFF_RATE_PER_MINUTE="100000",
            PLANNER_LOG_LEVEL="INFO",  # serve logs how many workers it started
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        env.update(self.extra_env)
        return env

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [PYTHON, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        return done.stdout

    def start(self, *serve_args: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [PYTHON, "manage.py", "serve", "--port", str(self.port), *serve_args],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()

        def read() -> None:
            assert self.process is not None and self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.append(line)
                if "is ready at" in line:
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.wait(0.1):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not start:\n" + "".join(self.lines[-30:]))

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


class Gate:
    """Holds the fake LLM's replies until ``open``; closed again for the next round."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._event.set()

    def close(self) -> None:
        self._event.clear()

    def open(self) -> None:
        self._event.set()

    def reply(self, _request: Any) -> Any:
        from tests.fakes.openai_server import Reply

        self._event.wait(timeout=RUN_TIMEOUT)  # bounded: a forgotten gate cannot hang the bench
        return Reply.text(FINAL).after(0.02)


@dataclass
class Api:
    base: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def ws_url(self, run_id: int, after: int = 0) -> str:
        return f"ws://127.0.0.1:{self.base.rsplit(':', 1)[1]}/ws/api/runs/{run_id}/?after={after}"


async def api_setup(
    api: Api, slow_base: str, gated_base: str, latency_tasks: int
) -> dict[str, int]:
    """LLMs, an agent per LLM and the two crews, all through the public API."""
    import httpx

    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            response = await client.post(path, json=body)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
            return response.json()

        ids: dict[str, int] = {}
        for key, model, api_base, tasks in (
            ("slow", "openai/bench", slow_base, 2),
            ("latency", "openai/bench-latency", gated_base, latency_tasks),
        ):
            llm = await post(
                "/api/llms",
                {
                    "name": f"Bench {key}",
                    "model": model,
                    "api_base": api_base,
                    "api_key": "sk-bench",
                    "supports_tools": False,
                },
            )
            agent = await post(
                "/api/agents",
                {
                    "name": f"Bench {key} agent",
                    "role": "Analyst",
                    "goal": "Answer briefly",
                    "backstory": "A careful analyst.",
                    "llm_id": llm["id"],
                },
            )
            crew = await post(
                "/api/crews",
                {
                    "name": f"Bench {key}",
                    "agent_ids": [agent["id"]],
                    "planning": False,
                },
            )
            for n in range(1, tasks + 1):
                await post(
                    f"/api/crews/{crew['id']}/tasks",
                    {
                        "name": f"Step {n}",
                        "description": f"Check figure {n} and say it is fine.",
                        "expected_output": "One line",
                        "agent_id": agent["id"],
                    },
                )
            ids[key] = crew["id"]
        return ids


async def kickoff(client: Any, crew_id: int) -> int:
    response = await client.post(f"/api/crews/{crew_id}/kickoff", json={"inputs": {}})
    if response.status_code != 202:
        raise RuntimeError(f"kickoff answered {response.status_code}: {response.text}")
    return int(response.json()["id"])


async def follow(api: Api, run_id: int) -> tuple[str, float]:
    """Read the run's socket until its final event: (its type, ``perf_counter()`` at arrival)."""
    from websockets.asyncio.client import connect

    async with connect(
        api.ws_url(run_id), additional_headers={**api.headers, "Origin": api.base}
    ) as ws:
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), timeout=RUN_TIMEOUT))
            if message["type"] in TERMINAL:
                return message["type"], time.perf_counter()


async def runs_at_once(api: Api, crew_id: int, count: int) -> tuple[float, list[str], list[int]]:
    """Kick ``count`` runs off together; seconds until the last one's final event arrived."""
    import httpx

    async with httpx.AsyncClient(
        base_url=api.base,
        headers=api.headers,
        timeout=RUN_TIMEOUT,
        limits=httpx.Limits(max_connections=count + 5),
    ) as client:

        async def one() -> tuple[str, float, int]:
            run_id = await kickoff(client, crew_id)
            outcome, at = await follow(api, run_id)
            return outcome, at, run_id

        began = time.perf_counter()
        results = await asyncio.wait_for(
            asyncio.gather(*(one() for _ in range(count))), timeout=RUN_TIMEOUT * 2
        )
    return (
        max(at for _o, at, _r in results) - began,
        [o for o, _a, _r in results],
        [r for _o, _a, r in results],
    )


async def queue_waits(api: Api, run_ids: list[int]) -> list[float]:
    """started_at - created_at of each run (seconds): how long it waited for a worker."""
    import httpx

    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:
        waits = []
        for run_id in run_ids:
            run = (await client.get(f"/api/runs/{run_id}")).json()
            if run.get("started_at") and run.get("created_at"):
                waits.append(_parse(run["started_at"]) - _parse(run["created_at"]))
        return waits


async def run_error(api: Api, run_id: int) -> str:
    import httpx

    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:
        run = (await client.get(f"/api/runs/{run_id}")).json()
        return f"run {run_id}: {run.get('status')}: {run.get('error')}"


def _parse(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def latency_round(
    api: Api, crew_id: int, gate: Gate, clients: int
) -> tuple[list[float], int]:
    """One run followed by ``clients`` sockets; latencies (ms) of its live events, event count."""
    import httpx
    from websockets.asyncio.client import connect

    gate.close()
    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:
        run_id = await kickoff(client, crew_id)
    headers = {**api.headers, "Origin": api.base}
    sockets = []
    for _ in range(clients):
        sockets.append(
            await connect(api.ws_url(run_id), additional_headers=headers, max_queue=None)
        )
    # Every client has its replay; the run waits in its first LLM call until the gate opens.
    await asyncio.sleep(0.3)
    released = time.time()
    gate.open()

    async def read(ws: Any) -> list[tuple[float, dict[str, Any]]]:
        got = []
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=RUN_TIMEOUT)
            now = time.time()
            message = json.loads(raw)
            got.append((now, message))
            if message["type"] in TERMINAL:
                return got

    try:
        received = await asyncio.gather(*(read(ws) for ws in sockets))
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    latencies: list[float] = []
    live: set[int] = set()
    for got in received:
        seqs = [m["seq"] for _t, m in got]
        if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            raise RuntimeError(f"a client saw a gap or a duplicate: {seqs}")
        for now, message in got:
            at = _parse(message["at"])
            if at >= released:  # live, not replayed
                latencies.append((now - at) * 1000)
                live.add(message["seq"])
    return latencies, len(live)


@dataclass
class ServerFigures:
    latency: dict[int, tuple[list[float], int]] = field(default_factory=dict)
    single: list[float] = field(default_factory=list)
    many: list[float] = field(default_factory=list)
    cpu_single: list[float] = field(default_factory=list)  # server CPU seconds per run
    cpu_many: list[float] = field(default_factory=list)
    cpu_web_many: list[float] = field(default_factory=list)  # of cpu_many: the web process's
    outcomes: list[str] = field(default_factory=list)
    first_error: str = ""
    waits_single: list[float] = field(default_factory=list)
    waits_many: list[float] = field(default_factory=list)
    workers: str = ""
    # With runs at once, per run: every CPU of the machine busy (/proc/stat), and of that the
    # bench's own process (its clients and the fake LLM).
    machine_many: list[float] = field(default_factory=list)
    bench_many: list[float] = field(default_factory=list)
    # What no run can do without, CPU ms each (``measure_floor``): litellm per call, the server
    # per bare API request and per websocket that replays a finished run.
    floor: dict[str, float] = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reference_loop_ms() -> float:
    """CPU ms of a fixed pure-Python loop, best of 5: how fast this machine runs Python, so that
    figures taken on different machines can be compared."""
    best = float("inf")
    for _ in range(5):
        began = time.process_time()
        kept: dict[int, str] = {}
        for i in range(200_000):
            kept[i % 1000] = str(i)
        best = min(best, time.process_time() - began)
    return best * 1000


def machine_busy_seconds() -> float:
    """CPU time every CPU of the machine has spent busy so far (all but idle and iowait)."""
    # user nice system idle iowait irq softirq steal (guest and guest_nice are in user and nice)
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def bench_server(
    *,
    parts: set[str],
    clients: list[int],
    latency_rounds: int,
    latency_tasks: int,
    runs: int,
    rounds: int,
    serve_args: list[str],
) -> ServerFigures:
    from tests.fakes.openai_server import FakeLLMServer, Reply

    figures = ServerFigures()
    gate = Gate()
    var = Path(tempfile.mkdtemp(prefix="planner-bench-runs-"))
    server = LiveServer(var)
    try:
        with FakeLLMServer() as slow, FakeLLMServer() as gated:
            slow.default = Reply.text(FINAL).after(LLM_DELAY)
            gated.default = gate.reply
            server.manage("migrate", "-v0", "--no-input")
            server.manage(
                "bootstrap", "--username", "bench", "--password", "bench-Password-1", "--admin"
            )
            token = server.manage("create_api_token", "bench").strip().splitlines()[-1]
            server.start(*serve_args)
            assert server.process is not None
            pid = server.process.pid
            api = Api(server.base, token)
            try:
                found = re.search(r"with (\d+) workers", "".join(server.lines))
                figures.workers = found.group(1) if found else "?"
                crews = asyncio.run(api_setup(api, slow.base_url, gated.base_url, latency_tasks))
                # Warm-up: litellm's import and the first connections, outside every figure; for
                # (c) also one round of as many runs at once, so that each worker and request
                # thread has made its connection and compiled its statements before the timing.
                asyncio.run(runs_at_once(api, crews["slow"], 1))
                asyncio.run(runs_at_once(api, crews["latency"], 1))
                if "c" in parts:
                    asyncio.run(runs_at_once(api, crews["slow"], runs))
                for n in clients if "b" in parts else []:
                    samples: list[float] = []
                    events = 0
                    for _ in range(latency_rounds):
                        got, live = asyncio.run(latency_round(api, crews["latency"], gate, n))
                        samples += got
                        events += live
                    figures.latency[n] = (samples, events)
                if "c" in parts:
                    concurrency_rounds(api, crews["slow"], runs, rounds, [pid], figures)
                    figures.floor = measure_floor(api, pid, slow.base_url, crews["slow"], runs)
            finally:
                gate.open()
                server.stop()
    except Exception:
        print("".join(server.lines[-40:]), file=sys.stderr)
        raise
    finally:
        shutil.rmtree(var, ignore_errors=True)
    return figures


def concurrency_rounds(
    api: Api, crew_id: int, runs: int, rounds: int, pids: list[int], figures: ServerFigures
) -> None:
    """(c): one run alone, then ``runs`` at once, ``rounds`` times; CPU summed over ``pids``."""
    for _ in range(rounds):
        # Alternate one alone and N together, so load on the machine falls on both.
        for count, walls, cpus, waits in (
            (1, figures.single, figures.cpu_single, figures.waits_single),
            (runs, figures.many, figures.cpu_many, figures.waits_many),
        ):
            cpu = [cpu_seconds(p) for p in pids]
            machine, bench = machine_busy_seconds(), cpu_seconds(os.getpid())
            seconds, outcomes, ids = asyncio.run(runs_at_once(api, crew_id, count))
            used = [cpu_seconds(p) - before for p, before in zip(pids, cpu, strict=True)]
            cpus.append(sum(used) / count)
            if count > 1:
                figures.cpu_web_many.append(used[0] / count)
                figures.machine_many.append((machine_busy_seconds() - machine) / count)
                figures.bench_many.append((cpu_seconds(os.getpid()) - bench) / count)
            walls.append(seconds)
            figures.outcomes += outcomes
            waits += asyncio.run(queue_waits(api, ids))
            failed = [r for o, r in zip(outcomes, ids, strict=True) if o != "run.succeeded"]
            if failed and not figures.first_error:
                figures.first_error = asyncio.run(run_error(api, failed[0]))


# (c)'s floor ---------------------------------------------------------------------------------------

FLOOR_ROUNDS = 8


def litellm_floor(base_url: str, count: int) -> None:
    """``--litellm-floor URL``: CPU ms per ``litellm.acompletion`` call, with the arguments
    ``LiteLLMGateway`` gives it for the bench's runs (not streamed), ``count`` calls at once
    against the fake LLM at ``base_url``, alone in this process: printed as JSON. The fake LLM
    is in the parent, so its threads are not in the figure."""
    import litellm
    from pydantic import SecretStr

    from agents.engine.gateway import LiteLLMGateway
    from agents.engine.llm import LLMRequest
    from agents.engine.specs import LLMSpec

    llm = LLMSpec(
        key="floor", model="openai/bench", api_base=base_url, api_key=SecretStr("sk-bench")
    )
    messages = [
        {"role": "system", "content": "You are Analyst. A careful analyst. Answer briefly."},
        {"role": "user", "content": "Check figure 1 and say it is fine. Expected output: One line"},
    ]
    request = LLMRequest(llm=llm, messages=messages, purpose="react")
    kwargs = LiteLLMGateway()._kwargs(request, "sk-bench")

    async def rounds(n: int) -> None:
        for _ in range(n):
            await asyncio.gather(*(litellm.acompletion(**kwargs) for _ in range(count)))

    async def main() -> float:
        await rounds(3)  # litellm's first calls (imports, price lookups, connections)
        began = time.process_time()
        await rounds(FLOOR_ROUNDS)
        return (time.process_time() - began) / (FLOOR_ROUNDS * count)

    print(json.dumps({"litellm_call": asyncio.run(main()) * 1000}))


def measure_floor(api: Api, pid: int, llm_base: str, crew_id: int, count: int) -> dict[str, float]:
    """CPU ms of the parts a run cannot do without, each ``count`` at once as in (c): one
    litellm call (in a process of its own), and on the server one API request refused before
    any database work (401), and one websocket that replays a finished run and closes."""
    import httpx

    done = subprocess.run(
        [PYTHON, __file__, "--litellm-floor", llm_base, "--runs-at-once", str(count)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )  # fmt: skip
    floor = json.loads(done.stdout.strip().splitlines()[-1])

    async def requests() -> float:
        async with httpx.AsyncClient(
            base_url=api.base, limits=httpx.Limits(max_connections=count + 5)
        ) as client:
            for rounds in (2, FLOOR_ROUNDS):
                began = cpu_seconds(pid)
                for _ in range(rounds):
                    answers = await asyncio.gather(*(client.get("/api/runs") for _ in range(count)))
                    if {a.status_code for a in answers} != {401}:
                        raise RuntimeError(f"expected 401s, got {[a.status_code for a in answers]}")
            return (cpu_seconds(pid) - began) / (FLOOR_ROUNDS * count)

    async def sockets(run_id: int) -> float:
        for rounds in (1, FLOOR_ROUNDS):
            began = cpu_seconds(pid)
            for _ in range(rounds):
                await asyncio.gather(*(follow(api, run_id) for _ in range(count)))
        return (cpu_seconds(pid) - began) / (FLOOR_ROUNDS * count)

    floor["request"] = asyncio.run(requests()) * 1000
    _seconds, _outcomes, ids = asyncio.run(runs_at_once(api, crew_id, 1))
    floor["socket"] = asyncio.run(sockets(ids[0])) * 1000
    return floor


@contextmanager
def scratch_services() -> Iterator[dict[str, str]]:
    """A throwaway PostgreSQL database beside DATABASE_URL's and Redis database 14, as URLs."""
    import psycopg
    import redis

    url = os.environ["DATABASE_URL"]
    parts = urllib.parse.urlsplit(url)
    name = f"crew_bench_scaleout_{os.getpid()}"
    redis_parts = urllib.parse.urlsplit(os.environ["REDIS_URL"])
    redis_url = urllib.parse.urlunsplit(redis_parts._replace(path="/14"))
    scratch = redis.Redis.from_url(redis_url)
    admin = psycopg.connect(url, autocommit=True)
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        scratch.flushdb()
        try:
            yield {
                "DATABASE_URL": urllib.parse.urlunsplit(parts._replace(path="/" + name)),
                "REDIS_URL": redis_url,
            }
        finally:
            scratch.flushdb()
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
        scratch.close()


def bench_scaleout(*, runs: int, rounds: int, processes: int, threads: int) -> ServerFigures:
    """(c) in the scale-out topology: ``serve --workers 0`` (HTTP and websockets) and
    ``processes`` × ``manage.py db_worker --threads`` on PostgreSQL + Redis."""
    from tests.fakes.openai_server import FakeLLMServer, Reply

    figures = ServerFigures(workers=f"{processes} × {threads}")
    var = Path(tempfile.mkdtemp(prefix="planner-bench-scaleout-"))
    workers: list[subprocess.Popen[str]] = []
    logs = (var / "workers.log").open("w")
    with scratch_services() as services:
        server = LiveServer(var, extra_env=services)
        try:
            with FakeLLMServer() as slow, FakeLLMServer() as unused:
                slow.default = Reply.text(FINAL).after(LLM_DELAY)
                server.manage("migrate", "-v0", "--no-input")
                server.manage(
                    "bootstrap", "--username", "bench", "--password", "bench-Password-1", "--admin"
                )
                token = server.manage("create_api_token", "bench").strip().splitlines()[-1]
                server.start("--workers", "0")
                for i in range(processes):
                    workers.append(
                        subprocess.Popen(
                            [PYTHON, "manage.py", "db_worker", "--threads", str(threads),
                             "--interval", "0.5", "--no-startup-delay",
                             "--worker-id", f"bench-{os.getpid()}-{i}"],
                            cwd=ROOT, env=server.env, stdout=logs,
                            stderr=subprocess.STDOUT, text=True,
                        )
                    )  # fmt: skip
                assert server.process is not None
                pids = [server.process.pid, *(w.pid for w in workers)]
                api = Api(server.base, token)
                crews = asyncio.run(api_setup(api, slow.base_url, unused.base_url, 1))
                # Warm-up: litellm's import in each worker, then every thread's first connection
                # and compiled statements (a round of as many runs at once), outside every figure.
                for count in (processes * 2, runs):
                    asyncio.run(runs_at_once(api, crews["slow"], count))
                concurrency_rounds(api, crews["slow"], runs, rounds, pids, figures)
        except Exception:
            print("".join(server.lines[-40:]), file=sys.stderr)
            logs.flush()
            print((var / "workers.log").read_text()[-4000:], file=sys.stderr)
            raise
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for worker in workers:
                try:
                    worker.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    worker.kill()
            server.stop()
            logs.close()
            shutil.rmtree(var, ignore_errors=True)
    return figures


# Report -----------------------------------------------------------------------------------------


def concurrency_report(figures: ServerFigures, runs: int) -> None:
    ideal = statistics.median(figures.single)
    many = statistics.median(figures.many)
    ratio = many / ideal
    rows = [
        [
            "one run alone — ideal, the baseline",
            f"{ideal:.2f}",
            f"{min(figures.single):.2f}–{max(figures.single):.2f}",
            f"{statistics.median(figures.waits_single) * 1000:.0f} / {max(figures.waits_single) * 1000:.0f}",
            f"{statistics.median(figures.cpu_single) * 1000:.0f}",
            "1.00",
            "",
            "",
        ],
        [
            f"{runs} runs at once",
            f"{many:.2f}",
            f"{min(figures.many):.2f}–{max(figures.many):.2f}",
            f"{statistics.median(figures.waits_many) * 1000:.0f} / {max(figures.waits_many) * 1000:.0f}",
            f"{statistics.median(figures.cpu_many) * 1000:.0f}",
            f"{ratio:.2f}",
            f"≤ {CONCURRENT_TARGET}" if runs >= 20 else "(20 runs)",
            ("met" if ratio <= CONCURRENT_TARGET else "MISSED") if runs >= 20 else "",
        ],
    ]
    headers = [
        f"(c) 2 LLM calls of {LLM_DELAY * 1000:.0f} ms per run",
        "wall s",
        "range",
        "queue wait ms (med / max)",
        "CPU ms/run",
        "ratio",
        "target",
        "",
    ]
    print(table(rows, headers))
    bad = [o for o in figures.outcomes if o != "run.succeeded"]
    if bad:
        print(f"!! {len(bad)} runs did not succeed: {sorted(set(bad))}; {figures.first_error}")
    if len(figures.workers.split()) > 1:  # scale-out: the web process's share
        web = statistics.median(figures.cpu_web_many) * 1000
        print(
            f"\nOf the CPU per run with {runs} at once, the web process (HTTP, websockets) "
            f"spent {web:.0f} ms and the db_worker processes "
            f"{statistics.median(figures.cpu_many) * 1000 - web:.0f} ms."
        )
    if figures.machine_many:
        machine = statistics.median(figures.machine_many) * 1000
        ours = statistics.median(figures.cpu_many) * 1000
        bench = statistics.median(figures.bench_many) * 1000
        cores = os.cpu_count() or 1
        budget = cores * CONCURRENT_TARGET * ideal / runs * 1000
        print(
            f"\nThe whole machine, per run with {runs} at once: {machine:.0f} ms of CPU busy "
            f"(our processes {ours:.0f}, the bench's clients and fake LLM {bench:.0f}, the rest — "
            f"PostgreSQL, Redis, the system — {max(0.0, machine - ours - bench):.0f}). Within "
            f"{CONCURRENT_TARGET} × the ideal, {cores} CPUs give at most {budget:.0f} ms per run, "
            f"and one process on one GIL {budget / cores:.0f} ms."
        )
    if figures.floor:
        floor_report(figures.floor, ideal, runs)
    print(
        f"\nMedians of {len(figures.single)} rounds. LLM time alone: {2 * LLM_DELAY:.2f} s per run. "
        f"Queue wait = started_at - created_at of each run."
    )


def floor_report(floor: dict[str, float], ideal: float, runs: int) -> None:
    """The parts no run can do without, against what one process (one GIL) may spend per run."""
    budget = CONCURRENT_TARGET * ideal / runs * 1000
    llm, request, socket_ = floor["litellm_call"], floor["request"], floor["socket"]
    stack = 2 * llm + request
    total = stack + socket_
    rows = [
        ["a litellm.acompletion call (not streamed), in a process of its own",
         f"{llm:.1f}", f"{2 * llm:.1f} (2 calls)"],
        ["an API request refused before any database work (401): Daphne, Django's middleware, "
         "django-ninja", f"{request:.1f}", f"{request:.1f} (the kickoff)"],
        ["the stack alone: no work of ours", "", f"{stack:.1f}"],
        ["a websocket: connect, check, replay a finished run's events, close (ours included)",
         f"{socket_:.1f}", f"{socket_:.1f} (its follower)"],
        ["floor per run", "", f"{total:.1f}"],
        [f"budget of one process (one GIL): {CONCURRENT_TARGET} × the ideal ÷ {runs}", "",
         f"{budget:.1f}"],
    ]  # fmt: skip
    print(f"\n{table(rows, [f'(c) floor, CPU ms, {runs} at once', 'each', 'per run'])}")
    left = budget - stack
    if socket_ > left:
        verdict = (
            f"litellm and a bare request take {stack / budget:.2f} × that budget. The "
            f"{max(left, 0.0):.1f} ms left per run must pay for all our own work (the kickoff's "
            "reads and writes, the claim, the events stored and broadcast, the finish) and for the "
            f"socket following the run, which alone takes {socket_:.1f} ms: one process cannot "
            "meet (c) on this machine."
        )
    else:
        verdict = (
            f"That leaves {budget - total:.1f} ms per run for the rest of our work: the kickoff's "
            "reads and writes, the claim, the events stored and broadcast, the finish."
        )
    step = llm * runs
    print(
        f"\n{verdict} Each {LLM_DELAY * 1000:.0f} ms LLM step of {runs} runs at once takes "
        f"{runs} × {llm:.1f} = {step:.0f} ms of litellm's CPU on one GIL "
        f"({step / (LLM_DELAY * 1000):.2f} × the step)."
    )


def table(rows: list[list[str]], headers: list[str]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    rule = (
        "|"
        + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths))
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def event_rows(result: dict[str, Any]) -> list[list[str]]:
    where = f"{result['database']} + {result['layer']}"
    base = result["baseline"]
    return [
        [f"record_event alone, 1 run ({where}) — baseline", f"{base:,.0f} ev/s", "1.00", ""],
        [
            f"RunEventSink.emit, 1 run ({where})",
            f"{result['one']:,.0f} ev/s",
            f"{result['one'] / base:.2f}",
            "",
        ],
        [
            f"RunEventSink.emit, {result['runs']} runs at once ({where})",
            f"{result['many']:,.0f} ev/s",
            f"{result['many'] / base:.2f}",
            f"{result['many'] / result['one']:.2f}x one run",
        ],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer of everything")
    parser.add_argument("--parts", default="a,b,c", help="which figures: a, b, c (default all)")
    parser.add_argument("--events", type=int, default=None, help="events per run in (a) (1000)")
    parser.add_argument("--runs-at-once", type=int, default=4, help="runs emitting together in (a)")
    parser.add_argument("--serve-args", default="", help="extra arguments for manage.py serve")
    parser.add_argument(
        "--scaleout",
        default="2x16",
        help="(c) again as db_worker processes x threads on PostgreSQL + Redis, when DATABASE_URL "
        "and REDIS_URL are set (default 2x16; 'off' skips it)",
    )
    parser.add_argument("--child-events", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--litellm-floor", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.litellm_floor:
        litellm_floor(args.litellm_floor, args.runs_at_once)
        return
    events = args.events or (200 if args.quick else 1000)
    if args.child_events:
        child_events(events, args.runs_at_once)
        return
    parts = {p.strip() for p in args.parts.split(",")}

    load_before = os.getloadavg()
    reference = reference_loop_ms()
    results = []
    if "a" in parts:
        sqlite_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        results.append(run_events_child(events, args.runs_at_once, sqlite_env))
        if os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get(
            "REDIS_URL"
        ):
            results.append(run_events_child(events, args.runs_at_once, dict(os.environ)))
    server: ServerFigures | None = None
    runs = 5 if args.quick else 20
    if parts & {"b", "c"}:
        server = bench_server(
            parts=parts,
            clients=[1, 10] if args.quick else [1, 100],
            latency_rounds=1 if args.quick else 3,
            latency_tasks=5 if args.quick else 10,
            runs=runs,
            rounds=1 if args.quick else 3,
            serve_args=args.serve_args.split(),
        )
    scaleout: ServerFigures | None = None
    if (
        "c" in parts
        and args.scaleout != "off"
        and os.environ.get("DATABASE_URL", "").startswith("postgres")
        and os.environ.get("REDIS_URL")
    ):
        processes, threads = (int(n) for n in args.scaleout.lower().split("x"))
        scaleout = bench_scaleout(
            runs=runs, rounds=1 if args.quick else 3, processes=processes, threads=threads
        )
    load_after = os.getloadavg()
    reference_after = reference_loop_ms()

    print(
        f"Runs bench — {date.today().isoformat()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after;"
        f" reference loop (200,000 dict stores of str(i), best of 5) {reference:.0f} ms of CPU "
        f"before, {reference_after:.0f} ms after"
    )
    if max(reference, reference_after) > 1.2 * min(reference, reference_after):
        print("!! The machine's speed changed during the bench: compare figures with care.")
    if results:
        print(f"(a) {events} events per run; event mix {', '.join(EVENT_MIX)}.\n")
        rows: list[list[str]] = []
        for result in results:
            rows += event_rows(result)
            expected = (events, events * result["runs"])
            if (
                not result["gapless"]
                or (result["broadcast_one"], result["broadcast_many"]) != expected
            ):
                print(
                    f"!! {result['database']}: gapless={result['gapless']}, broadcast "
                    f"{result['broadcast_one']} / {result['broadcast_many']} (expected {expected})"
                )
        print(table(rows, ["(a) events stored and broadcast", "rate", "vs baseline", "scaling"]))
        print()
    if server is None:
        return
    command = " ".join(["manage.py serve", *args.serve_args.split()])
    print(f"Server: {command} ({server.workers} workers), SQLite + in-memory layer.\n")
    if server.latency:
        rows = []
        for n, (samples, count) in server.latency.items():
            p99 = percentile(samples, 99)
            target = f"< {P99_TARGET_MS:.0f}" if n >= 100 else ""
            verdict = ("met" if p99 < P99_TARGET_MS else "MISSED") if target else ""
            rows.append(
                [
                    f"(b) emit → websocket, {n} client{'s' if n > 1 else ''} "
                    f"({count} events, {len(samples)} samples)",
                    f"{percentile(samples, 50):.1f}",
                    f"{p99:.1f}",
                    f"{max(samples):.1f}",
                    target,
                    verdict,
                ]
            )
        print(table(rows, ["latency (ms)", "p50", "p99", "max", "p99 target", ""]))
        print()
    if server.single:
        concurrency_report(server, runs)
    if scaleout is not None:
        print(
            f"\nScale-out: manage.py serve --workers 0 and {scaleout.workers} "
            "(db_worker processes × threads), PostgreSQL + Redis.\n"
        )
        concurrency_report(scaleout, runs)


if __name__ == "__main__":
    main()
