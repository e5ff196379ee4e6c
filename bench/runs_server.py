"""The server of bench/runs.py's (b) and (c), ``manage.py serve`` on a throwaway var folder, and
the clients that drive it: set-up through the public API, kickoffs, websockets that follow runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from _common import PYTHON, ROOT, free_port

LLM_DELAY = 0.2
FINAL = "Thought: I now know the final answer\nFinal Answer: All done, figures checked."
START_TIMEOUT = 90.0
RUN_TIMEOUT = 60.0
TERMINAL = ("run.succeeded", "run.failed", "run.cancelled", "run.interrupted")


@dataclass
class LiveServer:
    """``manage.py serve`` on a free port with a throwaway var folder (SQLite, in-memory layer)."""

    var: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    without: str = ""  # a hand-made piece switched off in the server (bench/without.py), or none
    launcher: list[str] = field(default_factory=list)  # a script that runs manage.py (bench/_lag_probe.py)
    root: Path = ROOT  # the checkout whose manage.py serves (an A/B against another commit's)
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
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            check=True,
        )
        return done.stdout

    def bootstrap(self) -> str:
        """Migrate the throwaway database and make an admin: its API token."""
        self.manage("migrate", "-v0", "--no-input")
        self.manage("bootstrap", "--username", "bench", "--password", "bench-Password-1", "--admin")
        return self.manage("create_api_token", "bench").strip().splitlines()[-1]

    def start(self, *serve_args: str) -> None:
        self.port = free_port()
        launcher = [str(ROOT / "bench" / "without.py"), self.without] if self.without else self.launcher
        self.process = subprocess.Popen(
            [PYTHON, *launcher, "manage.py", "serve", "--port", str(self.port), *serve_args],
            cwd=self.root,
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


@contextlib.asynccontextmanager
async def api_poster(api: Api) -> AsyncIterator[Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]]:
    """``post(path, body)``: JSON to the API with the bench's token; any answer but 200 or 201
    stops the bench with what the server said."""
    import httpx

    async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=30) as client:

        async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            response = await client.post(path, json=body)
            if response.status_code not in (200, 201):
                raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
            return response.json()

        yield post


async def api_setup(
    api: Api, slow_base: str, gated_base: str, latency_tasks: int
) -> dict[str, int]:
    """LLMs, an agent per LLM and the two crews, all through the public API."""
    async with api_poster(api) as post:
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


def cpu_seconds(pid: int) -> float:
    """CPU time of a process's threads so far (Linux), in nanoseconds from each live thread's
    ``schedstat``: ``/proc/<pid>/stat`` counts 10 ms clock ticks, too coarse for a 30 ms run. A
    thread that ended between two readings takes its time with it: the servers measured here
    keep their threads (pools). Without ``schedstat``, the ticks."""
    total, seen = 0, False
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
            seen = True
        except (OSError, ValueError, IndexError):  # the thread ended meanwhile
            continue
    if seen:
        return total / 1e9
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
