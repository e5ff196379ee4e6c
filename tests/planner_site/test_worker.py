"""Run workers: an idle worker wakes when a task is enqueued in its process, and stops at once."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import OperationalError, connection
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.models import DBTaskResult

from crews.tasks import execute_run
from planner_site.worker import Doorbell, HeartbeatWorker, configured_workers


def test_a_ring_wakes_one_waiter_and_a_ring_nobody_waited_for_is_kept() -> None:
    bell = Doorbell()
    bell.join()
    bell.join()
    bell.ring()  # before anyone waits: the next wait returns at once
    started = time.monotonic()
    assert bell.wait(5) is True
    assert time.monotonic() - started < 1
    assert bell.wait(0.05) is False  # one ring, one wake-up

    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(bell.wait(5)))
    waiter.start()
    time.sleep(0.1)
    bell.ring()
    waiter.join(timeout=5)
    assert woke == [True]


def test_a_ring_wakes_the_worker_that_went_idle_last_so_sequential_runs_stay_on_one_thread() -> None:
    bell = Doorbell()
    bell.join()
    bell.join()
    woke: list[str] = []

    def idle(name: str, waiting: int) -> threading.Thread:
        thread = threading.Thread(target=lambda: bell.wait(5) and woke.append(name))
        thread.start()
        deadline = time.monotonic() + 5
        while len(bell._idle) < waiting:  # until it waits on the bell
            assert time.monotonic() < deadline
            threading.Event().wait(0.001)
        return thread

    first, last = idle("first", 1), idle("last", 2)
    bell.ring()
    last.join(timeout=5)
    assert woke == ["last"] and first.is_alive()
    bell.ring()
    first.join(timeout=5)
    assert woke == ["last", "first"]


def test_rings_are_kept_at_most_once_per_worker() -> None:
    bell = Doorbell()
    bell.join()
    for _ in range(5):
        bell.ring()
    assert bell.wait(0.01) is True
    assert bell.wait(0.01) is False


def test_the_number_of_workers_comes_from_the_setting(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    settings.PLANNER_WORKERS = 7
    assert configured_workers() == 7
    del settings.PLANNER_WORKERS
    monkeypatch.setenv("PLANNER_WORKERS", "3")
    assert configured_workers() == 3


def idle_worker(bell: Doorbell, worker_id: str) -> HeartbeatWorker:
    """A worker as ``serve`` starts one: every queue, a 30 s poll (so only a ring wakes it soon)."""
    return HeartbeatWorker(
        bell=bell, queue_names=["*"], interval=30.0, batch=False, backend_name="default",
        startup_delay=False, max_tasks=None, worker_id=worker_id, excluded_queue_names=[],
    )


@pytest.mark.django_db(transaction=True)
def test_an_idle_worker_runs_a_task_enqueued_in_its_process_at_once_and_stops_at_once() -> None:
    bell = Doorbell()
    worker = idle_worker(bell, "test-worker")
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        time.sleep(0.3)  # it polled once, found nothing and now waits (30 s without a ring)
        backend = DatabaseBackend("default", {"QUEUES": ["default"]})
        started = time.monotonic()
        # A run that does not exist: the task claims nothing and ends at once.
        result = backend.enqueue(execute_run, (987654,), {})
        bell.ring()  # what the task_enqueued signal does for the process's own doorbell
        deadline = started + 10
        while DBTaskResult.objects.get(pk=result.id).status != "SUCCESSFUL":
            assert time.monotonic() < deadline, "the worker did not pick the task up"
            time.sleep(0.02)
        assert time.monotonic() - started < 5  # far sooner than its 30 s poll
    finally:
        stopping = time.monotonic()
        worker.stop()
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - stopping < 5


@pytest.mark.django_db(transaction=True)
def test_the_task_enqueued_signal_rings_the_process_doorbell(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner_site import worker as worker_module

    bell = Doorbell()
    bell.join()
    monkeypatch.setattr(worker_module, "doorbell", bell)
    DatabaseBackend("default", {"QUEUES": ["default"]}).enqueue(execute_run, (987654,), {})
    assert bell.wait(0.01) is True


@pytest.mark.django_db
def test_a_claim_on_an_empty_queue_only_peeks_and_a_ready_task_is_claimed(django_assert_num_queries: Any) -> None:
    from planner_site.worker import make_worker

    worker = make_worker(worker_id="test-worker")
    with django_assert_num_queries(1):  # no write lock taken for nothing
        assert worker.claim() == (None, True)

    enqueued = DatabaseBackend("default", {"QUEUES": ["default"]}).enqueue(execute_run, (987654,), {})
    claimed, retrieved = worker.claim()
    assert retrieved and claimed is not None and str(claimed.id) == str(enqueued.id)
    assert claimed.worker_ids == ["test-worker"]
    assert worker.claim() == (None, True)


@pytest.mark.django_db
def test_a_locked_database_at_the_peek_is_tried_again_not_an_error() -> None:
    from planner_site.worker import make_worker

    def locked(execute: Any, sql: str, *args: Any) -> Any:
        raise OperationalError("database is locked")

    worker = make_worker(worker_id="test-worker")
    with connection.execute_wrapper(locked):
        assert worker.claim() == (None, False)  # the worker's loop goes on


@pytest.mark.django_db
def test_claims_follow_django_tasks_dbs_own_queue_order_and_filters() -> None:
    """The compiled queue queries pick what ``ready().get_locked()`` picks, in the same order:
    priority, then run_after, then enqueue time; never a task due later, or of another backend or
    queue; each claim reads the clock anew."""
    from datetime import timedelta

    from django.utils import timezone
    from django_tasks_db.models import get_date_max

    from planner_site.worker import make_worker

    now = timezone.now()

    def task(name: str, **fields: Any) -> DBTaskResult:
        values = {"args_kwargs": {"args": [], "kwargs": {}}, "task_path": "crews.tasks.execute_run",
                  "backend_name": "default", "queue_name": "default", "run_after": get_date_max(), **fields}
        return DBTaskResult.objects.create(traceback=name, **values)

    task("late", run_after=now + timedelta(seconds=1.5))
    task("other backend", backend_name="elsewhere", priority=50)
    task("other queue", queue_name="reports", priority=40)
    task("low", priority=-5)
    task("plain second")
    task("due earlier", run_after=now - timedelta(minutes=1))
    task("urgent", priority=10)
    task("plain third")

    expected = [t.traceback for t in DBTaskResult.objects.ready().filter(backend_name="default", queue_name="default")]
    worker = make_worker(worker_id="w", queues=["default"])
    claimed = []
    while (found := worker.claim()[0]) is not None:
        claimed.append(found.traceback)
    assert claimed == expected == ["urgent", "due earlier", "plain second", "plain third", "low"]

    time.sleep(1.6)  # the late task is due now
    late, retrieved = worker.claim()
    assert retrieved and late is not None and late.traceback == "late"
    assert DBTaskResult.objects.get(pk=late.pk).status == "RUNNING"
    assert worker.claim() == (None, True)

    everything = make_worker(worker_id="all")
    assert everything.claim()[0].traceback == "other queue"  # "*" takes every queue
    assert everything.claim() == (None, True)  # never another backend's task


@pytest.mark.django_db(transaction=True)
def test_upkeep_on_every_beat_goes_back_to_the_workers_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upkeep broadcasts events: in serve, its async_to_sync must reach Daphne's loop (whose
    queues the in-process channel layer holds), not a loop of the beat thread's own."""
    import asyncio

    from asgiref.sync import async_to_sync, sync_to_async

    from planner_site import worker as worker_module

    seen: list[asyncio.AbstractEventLoop] = []

    async def running_loop() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    monkeypatch.setattr(worker_module, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(worker_module, "_beat_hooks", [lambda: seen.append(async_to_sync(running_loop)())])
    heart = worker_module.Heartbeat()

    async def serve_like() -> asyncio.AbstractEventLoop:
        # A worker thread started the way serve starts them, on this loop.
        await sync_to_async(heart.start, thread_sensitive=False)()
        for _ in range(100):
            if len(seen) >= 3:  # the start-up upkeep, then at least two beats
                break
            await asyncio.sleep(0.05)
        await sync_to_async(heart.stop, thread_sensitive=False)()
        await asyncio.sleep(0.2)  # the beat ends at its next wait
        return asyncio.get_running_loop()

    main = asyncio.run(serve_like())
    assert len(seen) >= 3
    assert all(loop is main for loop in seen)
