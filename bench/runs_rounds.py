"""(b) and (c) of bench/runs.py, measured: the rounds on one ``serve`` process (SQLite and the
in-memory layer, as ``make run``), and (c) again scaled out (``serve --workers 0`` and
``db_worker`` processes on PostgreSQL + Redis).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from _common import PYTHON, ROOT
from runs_floor import measure_floor
from runs_server import (
    FINAL,
    LLM_DELAY,
    Api,
    Gate,
    LiveServer,
    api_setup,
    cpu_seconds,
    latency_round,
    queue_waits,
    run_error,
    runs_at_once,
)


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
            token = server.bootstrap()
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


def ab_concurrency(
    *, piece: str, runs: int, rounds: int, serve_args: list[str]
) -> tuple[ServerFigures, ServerFigures]:
    """(c) on two servers at once, as shipped and without ``piece`` (bench/without.py), taking
    turns round by round (which goes first alternates), so load on the machine falls on both."""
    from tests.fakes.openai_server import FakeLLMServer, Reply

    shipped, without = ServerFigures(), ServerFigures()
    with FakeLLMServer() as slow, ExitStack() as stack:
        slow.default = Reply.text(FINAL).after(LLM_DELAY)
        sides = [
            (*stack.enter_context(ready_server(slow.base_url, runs, serve_args, off)), figures)
            for off, figures in (("", shipped), (piece, without))
        ]
        for n in range(rounds):
            for api, crew_id, pid, figures in sides if n % 2 == 0 else sides[::-1]:
                concurrency_rounds(api, crew_id, runs, 1, [pid], figures)
    return shipped, without


@contextmanager
def ready_server(
    llm_base: str, runs: int, serve_args: list[str], without: str
) -> Iterator[tuple[Api, int, int]]:
    """A warmed-up server (``without`` a piece, or as shipped) with (c)'s crew: (api, crew, pid)."""
    var = Path(tempfile.mkdtemp(prefix="planner-bench-ab-"))
    server = LiveServer(var, without=without)
    try:
        token = server.bootstrap()
        server.start(*serve_args)
        assert server.process is not None
        api = Api(server.base, token)
        crew_id = asyncio.run(api_setup(api, llm_base, llm_base, 1))["slow"]
        for count in (1, runs):  # litellm's import, then every thread's first connection
            asyncio.run(runs_at_once(api, crew_id, count))
        yield api, crew_id, server.process.pid
    except Exception:
        print("".join(server.lines[-40:]), file=sys.stderr)
        raise
    finally:
        server.stop()
        shutil.rmtree(var, ignore_errors=True)


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
                token = server.bootstrap()
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
