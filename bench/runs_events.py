"""(a) of bench/runs.py: events stored and broadcast per second, in a child process on its own
database (SQLite, or a throwaway PostgreSQL database beside ``DATABASE_URL``'s).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import PYTHON, ROOT

RUNS_SCRIPT = str(ROOT / "bench" / "runs.py")  # the children re-run the bench in a mode of theirs

EVENT_MIX = (
    "task.started",
    "llm.started",
    "llm.completed",
    "tool.started",
    "tool.completed",
    "task.completed",
)


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
    from crews.bridge import record_event
    from crews.models import Crew, Run, RunTask
    from crews.realtime import run_group
    from crews.sink import RunEventSink

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
            await sink.drain()  # emit queues; the batches are stored behind it (#20)

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
        [PYTHON, RUNS_SCRIPT, "--child-events", "--events", str(events), "--runs-at-once", str(runs)],
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
