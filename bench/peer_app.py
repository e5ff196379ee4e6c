"""The full app in bench/peer.py: a planned 2-task run through ``manage.py serve`` (HTTP kickoff ->
worker -> events -> JSON socket), its server CPU per run, unstreamed and with one viewer
following the deltas. The server, its clients and its CPU reading are bench/runs_server.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runs_server import Api, LiveServer, api_poster, cpu_seconds, follow, kickoff


@dataclass
class DeltaApi(Api):
    """The same socket, asking for the streamed deltas (``&deltas=1``): a viewer following them."""

    def ws_url(self, run_id: int, after: int = 0) -> str:
        return super().ws_url(run_id, after) + "&deltas=1"


@dataclass
class AppRun:
    cpu: float  # the server process's CPU seconds, kickoff to the final event on the socket
    wall: float
    calls: int
    streamed: int


@dataclass
class App:
    """A configured site: the server started, a planned 2-task crew made through the API."""

    server: LiveServer
    api: Api
    crew_id: int

    async def run(self, *, deltas: bool, count_calls: Callable[[], tuple[int, int]]) -> AppRun:
        import httpx

        assert self.server.process is not None
        pid = self.server.process.pid
        api = DeltaApi(self.api.base, self.api.token) if deltas else self.api
        before, (calls, streamed) = cpu_seconds(pid), count_calls()
        started = time.perf_counter()
        async with httpx.AsyncClient(base_url=api.base, headers=api.headers, timeout=60) as client:
            run_id = await kickoff(client, self.crew_id)
        kind, _at = await follow(api, run_id)
        wall = time.perf_counter() - started
        await asyncio.sleep(0.05)  # the worker's last writes after the final event are the run's
        cpu = cpu_seconds(pid) - before
        calls_after, streamed_after = count_calls()
        if kind != "run.succeeded":
            raise RuntimeError(f"the app's run {run_id} ended {kind}:\n" + "".join(self.server.lines[-20:]))
        return AppRun(cpu, wall, calls_after - calls, streamed_after - streamed)


async def _setup(api: Api, llm_base: str) -> int:
    """The LLM (tools supported: the planner answers with its tool call), an agent, a planned crew
    of two tasks, as W1: all through the public API."""
    async with api_poster(api) as post:
        llm = await post("/api/llms", {"name": "Peer", "model": "openai/fake-model", "api_base": llm_base,
                                       "api_key": "sk-peer", "supports_tools": True})  # fmt: skip
        agents = [
            await post("/api/agents", {"name": role, "role": role, "llm_id": llm["id"],
                                       "goal": f"Do the {role.lower()}'s part of the quarterly report",
                                       "backstory": "You are careful with numbers and cite them."})
            for role in ("Researcher", "Analyst")
        ]  # fmt: skip
        crew = await post("/api/crews", {"name": "Peer", "agent_ids": [a["id"] for a in agents],
                                         "planning": True, "planning_llm_id": llm["id"]})  # fmt: skip
        for n, agent in enumerate(agents, start=1):
            await post(f"/api/crews/{crew['id']}/tasks", {
                "name": f"Section {n}", "description": f"Write section {n} of the quarterly report.",
                "expected_output": "A paragraph with the figures.", "agent_id": agent["id"],
            })  # fmt: skip
        return int(crew["id"])


@contextlib.contextmanager
def running_app(llm_base: str, root: Path | None = None) -> Iterator[App]:
    """The server on a throwaway var folder with the crew set up; stopped and removed after.
    ``root``: another checkout's server (``bench/peer_ab.py``), run with this venv."""
    with tempfile.TemporaryDirectory(prefix="bench-peer-") as var:
        server = LiveServer(var=Path(var)) if root is None else LiveServer(var=Path(var), root=root)
        token = server.bootstrap()
        server.start()
        try:
            api = Api(server.base, token)
            with _profiled(server):
                yield App(server, api, asyncio.run(_setup(api, llm_base)))
        finally:
            server.stop()


@contextlib.contextmanager
def _profiled(server: LiveServer) -> Iterator[None]:
    """With ``BENCH_PROFILE=<file>``, py-spy samples the server while it serves (``BENCH_PYSPY``:
    its binary, from a throwaway venv; never a dependency of the app), in its raw (collapsed)
    format: bench/README.md's "Where a run's server CPU goes" was read from one."""
    out = os.environ.get("BENCH_PROFILE")
    if not out or server.process is None:
        yield
        return
    spy = subprocess.Popen([os.environ.get("BENCH_PYSPY", "py-spy"), "record", "--rate", os.environ.get("BENCH_PYSPY_RATE", "200"), *os.environ.get("BENCH_PYSPY_FLAGS", "--gil --nonblocking").split(), "--format", "raw",
                            "--output", out, "--pid", str(server.process.pid)])  # fmt: skip
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
        spy.wait(timeout=60)
