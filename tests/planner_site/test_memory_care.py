"""A long-lived worker process's memory (#20, bench/soak.py): ``db_worker`` gets serve's care (two
malloc arenas, a full collection every second while runs allocate), and sequential runs stay on
the worker that ran the last one."""

from __future__ import annotations

import gc
import signal
import threading
import time
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from crews.tasks import execute_run
from planner_site import warmup
from planner_site.management.commands import db_worker
from planner_site.worker import Doorbell
from tests.planner_site.test_worker import idle_worker


class _Libc:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def mallopt(self, option: int, value: int) -> int:
        self.events.append(f"mallopt({option}, {value})")
        return 1


@pytest.fixture
def signals_kept() -> Any:
    """db_worker with one thread installs its own SIGINT/SIGTERM handlers: the test run's come back."""
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


@pytest.mark.django_db(transaction=True)
@override_settings(TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}})
def test_db_worker_limits_malloc_arenas_first_and_collects_while_its_worker_runs(
    monkeypatch: pytest.MonkeyPatch, signals_kept: None
) -> None:
    events: list[str] = []
    collected = threading.Event()
    monkeypatch.setattr(warmup.ctypes, "CDLL", lambda name: _Libc(events))
    monkeypatch.setattr(db_worker, "warm", lambda: events.append("warm") or 0.0)  # no freeze of the test run
    monkeypatch.setattr(warmup, "COLLECT_SECONDS", 0.01)

    def collect() -> float:
        events.append(f"collect in {threading.current_thread().name}")
        collected.set()
        return 0.0

    monkeypatch.setattr(warmup, "collect", collect)
    run_task = db_worker.PlannerWorker.run_task

    def running(self: db_worker.PlannerWorker, task_result: DBTaskResult) -> None:
        # A run lasts seconds: the collector works beside it.
        events.append("task" if collected.wait(5) else "task, and no collection within 5 s")
        run_task(self, task_result)

    monkeypatch.setattr(db_worker.PlannerWorker, "run_task", running)
    DatabaseBackend("default", {"QUEUES": ["default"]}).enqueue(execute_run, (987654,), {})

    call_command("db_worker", "--batch", "--no-startup-delay", "--worker-id", "memory-care")

    assert events[:2] == [f"mallopt({warmup.M_ARENA_MAX}, 2)", "warm"]  # before any thread starts
    assert "task" in events and "collect in collector" in events
    deadline = time.monotonic() + 5
    while any(thread.name == "collector" for thread in threading.enumerate()):
        assert time.monotonic() < deadline, "the collector outlived the command"
        time.sleep(0.01)


def test_the_periodic_collection_runs_while_anything_allocates_and_not_when_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(warmup, "collect", lambda: calls.append(1) or 0.0)
    stop = warmup.collect_periodically(0.02)
    try:
        deadline = time.monotonic() + 5
        while not calls:  # the first tick collects: it has seen nothing yet
            assert time.monotonic() < deadline
            time.sleep(0.01)
        idle = len(calls)
        time.sleep(0.2)  # ten ticks, and no young collection in this process
        assert len(calls) == idle
        before = gc.get_stats()[0]["collections"]
        while gc.get_stats()[0]["collections"] == before:  # cyclic garbage, as a run makes
            assert time.monotonic() < deadline, "no young collection"
            for _ in range(1_000):
                cycle: list[object] = []
                cycle.append(cycle)
        while len(calls) == idle:
            assert time.monotonic() < deadline, "no collection after the young generation was collected"
            time.sleep(0.01)
    finally:
        stop()


def test_a_ring_wakes_the_worker_that_ran_a_task_last_even_if_another_polled_since() -> None:
    """Idle workers poll every few seconds and go back to wait; ranked by when they went idle,
    sequential runs spread over a dozen of the 32 threads in 300 runs, each warming its own
    connection (bench/soak.py, #20)."""
    bell = Doorbell()
    for _ in range(3):
        bell.join()
    woke: list[str] = []

    def idle(name: str, worked_at: float, waiting: int) -> threading.Thread:
        thread = threading.Thread(target=lambda: bell.wait(5, worked_at=worked_at) and woke.append(name))
        thread.start()
        deadline = time.monotonic() + 5
        while len(bell._idle) < waiting:  # until it waits on the bell
            assert time.monotonic() < deadline
            time.sleep(0.001)
        return thread

    warm = idle("ran the last run", time.monotonic(), 1)
    polled = idle("never ran one, polled just now", 0.0, 2)
    older = idle("ran an earlier run", time.monotonic() - 60, 3)
    for thread in (warm, older, polled):
        bell.ring()
        thread.join(timeout=5)
    assert woke == ["ran the last run", "ran an earlier run", "never ran one, polled just now"]


class _RecordingBell(Doorbell):
    def __init__(self) -> None:
        super().__init__()
        self.ranks: list[float] = []

    def wait(self, timeout: float, *, worked_at: float = 0.0) -> bool:
        self.ranks.append(worked_at)
        return super().wait(timeout, worked_at=worked_at)


@pytest.mark.django_db(transaction=True)
def test_a_worker_waits_ranked_by_the_task_it_finished_last() -> None:
    bell = _RecordingBell()
    worker = idle_worker(bell, "ranked-worker")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not bell.ranks:  # it polled once, found nothing and waits
            assert time.monotonic() < deadline
            time.sleep(0.01)
        before = time.monotonic()
        result = DatabaseBackend("default", {"QUEUES": ["default"]}).enqueue(execute_run, (987654,), {})
        bell.ring()
        while DBTaskResult.objects.get(pk=result.id).status != "SUCCESSFUL" or len(bell.ranks) < 2:
            assert time.monotonic() < deadline, "the worker did not run the task and wait again"
            time.sleep(0.02)
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert bell.ranks[0] == 0.0 and bell.ranks[-1] >= before


def test_with_a_loop_the_collection_runs_on_the_loops_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve's loop owns the sockets and sessions whose finalizers a collection runs."""
    import asyncio
    import threading

    threads: list[int] = []
    monkeypatch.setattr(warmup, "collect", lambda: threads.append(threading.get_ident()) or 0.0)

    async def serve_a_moment() -> int:
        stop = warmup.collect_periodically(0.02, loop=asyncio.get_running_loop())
        try:
            for _ in range(250):
                if threads:
                    break
                await asyncio.sleep(0.02)
        finally:
            stop()
        return threading.get_ident()

    loop_thread = asyncio.run(serve_a_moment())
    assert threads and set(threads) == {loop_thread}
