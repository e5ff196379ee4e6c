"""Run workers: django-tasks-db's worker plus a heartbeat, for ``serve`` and ``db_worker`` alike.

An idle worker does not sleep a fixed interval between polls: it waits on this process's
doorbell, which rings as soon as a task is enqueued here (django.tasks' ``task_enqueued``
signal, once the task's row is committed). So a run kicked off on this process's web side starts
at once, and idle workers need not poll often: together, the workers of one process poll about
once per ``interval`` (for tasks enqueued by other processes), however many of them there are.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from asgiref.sync import SyncToAsync, sync_to_async
from django.conf import settings
from django.db import OperationalError, close_old_connections, connections, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.compat import TaskResultStatus, task_enqueued
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult, get_date_max
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from planner_site.env import env_int
from planner_site.prepared import STAND_IN_TIME, Prepared

logger = logging.getLogger(__name__)
tasks_logger = logging.getLogger("django_tasks_db")

HEARTBEAT_SECONDS = 10.0
# Runs are I/O-bound coroutines on the server's event loop: a worker thread mostly waits (on
# the LLM, on a person), so a 2-core box keeps many of them. Each holds a database connection
# while it runs a task.
DEFAULT_WORKERS = 32

# Called (in the worker's thread) when the process is asked to stop, so that code running a task
# can wind down (a crew run marks itself interrupted) instead of being cut off mid-write.
_stop_hooks: list[Callable[[], None]] = []
_stop_lock = threading.Lock()
_stopping = threading.Event()  # set once the process was asked to stop (``run_stop_hooks``)

# Called on the heartbeat's thread when a process's workers start, then on every beat: upkeep
# that some process must do while any worker lives, such as marking runs whose worker died.
_beat_hooks: list[Callable[[], None]] = []


def on_worker_stop(hook: Callable[[], None]) -> Callable[[], None]:
    with _stop_lock:
        _stop_hooks.append(hook)

    def remove() -> None:
        with _stop_lock:
            if hook in _stop_hooks:
                _stop_hooks.remove(hook)

    return remove


def worker_stopping() -> bool:
    """Whether this process was asked to stop: a task claimed just before must not start."""
    return _stopping.is_set()


def on_heartbeat(hook: Callable[[], None]) -> None:
    """Run ``hook`` when this process's workers start and then every ``HEARTBEAT_SECONDS``, on
    the heartbeat's thread. A hook that fails is logged and tried again on the next beat."""
    if hook not in _beat_hooks:
        _beat_hooks.append(hook)


def run_stop_hooks() -> None:
    with _stop_lock:
        _stopping.set()
        hooks = list(_stop_hooks)
    for hook in hooks:
        try:
            hook()
        except Exception:  # noqa: BLE001 - one failing hook must not keep others from running
            logger.exception("worker stop hook failed")


def default_worker_id(suffix: str = "") -> str:
    return f"{socket.gethostname()}-{os.getpid()}{suffix}"[:100]


def configured_workers() -> int:
    """Workers ``serve`` starts: the PLANNER_WORKERS setting (or environment variable)."""
    value = getattr(settings, "PLANNER_WORKERS", None)
    count = env_int("PLANNER_WORKERS", DEFAULT_WORKERS) if value is None else int(value)
    return max(0, count)


class Doorbell:
    """Wakes this process's idle workers: one per ring (a task enqueued here, or claimed).

    A ring nobody is waiting for is kept (up to one per worker), so a worker that polled just
    before a task was enqueued and is about to wait polls again at once instead of missing it.

    A ring wakes the worker that ran a task last (of those that never did, the one that went idle
    last), not the one idle longest: one run after another then lands on the same thread, whose
    database connection and memory are warm, instead of warming each of the 32 in turn
    (bench/soak.py, #20: the server's RSS grew 15 MiB over 40 sequential runs that way). Ranked
    by the last task, not by when it went idle: idle workers poll, each going back to wait every
    few seconds, and a ring woke the last to have polled, so runs still spread over a dozen
    threads in 300 (each connection ~0.3 MiB of prepared statements and page cache).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The waiting workers as (when it last ran a task, arrival, its event), ascending: the one
        # a ring wakes is last.
        self._idle: list[tuple[float, int, threading.Event]] = []
        self._arrivals = itertools.count()
        self._pending = 0
        self.members = 0

    def join(self) -> None:
        with self._lock:
            self.members += 1

    def leave(self) -> None:
        with self._lock:
            self.members = max(0, self.members - 1)
            self._pending = min(self._pending, self.members)

    def ring(self) -> None:
        with self._lock:
            if self.members == 0:
                return
            self._pending = min(self._pending + 1, self.members)
            if self._idle:
                self._idle.pop()[2].set()

    def wake_all(self) -> None:
        """For a stop: every waiter looks at its ``running`` flag now."""
        with self._lock:
            for _, _, waiter in self._idle:
                waiter.set()
            self._idle.clear()

    def wait(self, timeout: float, *, worked_at: float = 0.0) -> bool:
        """Until a ring (True: look for a task now) or ``timeout`` seconds (False).

        ``worked_at``: when the waiting worker last finished a task (``time.monotonic()``; 0 if
        never): the latest is woken first.
        """
        with self._lock:
            if self._pending:
                self._pending -= 1
                return True
            waiter = threading.Event()
            entry = (worked_at, next(self._arrivals), waiter)
            bisect.insort(self._idle, entry)
        waiter.wait(timeout)
        with self._lock:
            if entry in self._idle:  # not rung: timed out, or woken for a stop
                self._idle.remove(entry)
            if self._pending:
                self._pending -= 1
                return True
            return False


doorbell = Doorbell()


def _on_task_enqueued(sender: type, **kwargs: Any) -> None:
    if isinstance(sender, type) and issubclass(sender, DatabaseBackend):
        # Inside a transaction the row is not visible yet: ring once it is committed.
        transaction.on_commit(doorbell.ring)


task_enqueued.connect(_on_task_enqueued, dispatch_uid="planner_site.worker.doorbell")


class Heartbeat:
    """One ``WorkerBeat`` row per process while any of its workers runs (for /api/health)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._stopped = threading.Event()
        self.key = ""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worker-beat")
        self._beats: set[asyncio.Task[None]] = set()  # kept referenced while they run

    def beat(self) -> None:
        from planner_site.models import WorkerBeat

        WorkerBeat.objects.update_or_create(worker_id=self.key, defaults={"seen_at": timezone.now()})

    def start(self) -> None:
        with self._lock:
            self._users += 1
            if self._users > 1:
                return
            self.key = default_worker_id()
            self._stopped = stopped = threading.Event()
        self._beat_quietly()
        # The upkeep hooks store and broadcast events (emit_now): their async_to_sync must go
        # back to the loop the process's workers and sockets use (serve's, db_worker --threads'),
        # as the workers' own calls do, never to a loop of the beat's own: the in-process channel
        # layer's queues belong to that loop. asgiref keeps it in this thread-local when the
        # worker thread was started by sync_to_async; without one (db_worker's single thread,
        # tests) a plain thread does.
        loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
        if loop is not None and loop.is_running():
            beat = sync_to_async(self._beat_until, thread_sensitive=False, executor=self._executor)

            def schedule() -> None:
                task = loop.create_task(beat(stopped))
                self._beats.add(task)
                task.add_done_callback(self._beats.discard)

            loop.call_soon_threadsafe(schedule)
        else:
            threading.Thread(target=self._beat_until, args=(stopped,), name="worker-beat", daemon=True).start()

    def _beat_quietly(self) -> None:
        try:
            self.beat()
        except Exception:  # noqa: BLE001 - a missed beat only makes health say "none"
            logger.warning("worker heartbeat failed", exc_info=True)
        for hook in list(_beat_hooks):
            try:
                hook()
            except Exception:  # noqa: BLE001 - e.g. a locked database: the next beat tries again
                logger.warning("worker upkeep %s failed", getattr(hook, "__name__", hook), exc_info=True)
        close_old_connections()

    def _beat_until(self, stopped: threading.Event) -> None:
        try:
            while not stopped.wait(HEARTBEAT_SECONDS):
                self._beat_quietly()
        finally:
            connections.close_all()  # this thread's, kept between beats (CONN_MAX_AGE)

    def stop(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users > 0:
                return
            self._stopped.set()
        from planner_site.models import WorkerBeat

        try:
            WorkerBeat.objects.filter(worker_id=self.key).delete()
        finally:
            close_old_connections()


heartbeat = Heartbeat()


class HeartbeatWorker(Worker):
    """A django-tasks-db worker that keeps its process's heartbeat (for /api/health) and waits on
    the doorbell between polls. Claiming and running a task are django-tasks-db's own."""

    def __init__(self, *, bell: Doorbell | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bell = bell or doorbell

    def run(self) -> None:
        heartbeat.start()
        self.bell.join()
        try:
            self.work()
        finally:
            self.bell.leave()
            try:
                heartbeat.stop()
            finally:
                connections.close_all()  # the thread ends: its kept connection with it

    def claim(self) -> tuple[DBTaskResult | None, bool]:
        """Peek at the queue without a lock, then claim as django-tasks-db does: lock the next
        ready task and mark it ours.

        Returns the task (or None) and whether the queue could be read (False: it was locked).
        The peek is there because most claims find nothing (the one after every task, a ring
        another worker answered first), and on SQLite each would take the database's write lock,
        which every run's event writes wait for. A locked database, at the peek or the claim, is
        tried again on the next round.

        Both queries are django-tasks-db's own (``ready()`` for this worker's queues, then
        ``get_locked()``), compiled once per worker (``_QueueStatements``): compiling them was
        most of a claim's cost, and a worker claims after every task and on every ring.
        """
        statements = self._statements
        if statements is None:
            statements = self._statements = _QueueStatements(self._ready)
        try:
            if not statements.peek():
                return None, True
            with exclusive_transaction(statements.alias):
                task_result = statements.get_locked()
                if task_result is not None:
                    # "claim" the task, so it isn't run by another worker process
                    task_result.claim(self.worker_id)
                return task_result, True
        except OperationalError as e:
            # Ignore locked databases and keep trying. It should unlock eventually.
            if is_locked_database_exception(e):
                return None, False
            raise

    _statements: _QueueStatements | None = None
    _worked_at = 0.0  # when this worker last finished a task (time.monotonic()): the doorbell's rank

    def _ready(self, now: datetime) -> QuerySet[DBTaskResult]:
        """django-tasks-db's ``ready()`` queue of this worker, as of ``now``."""
        tasks = DBTaskResult.objects.filter(status=TaskResultStatus.READY).filter(
            Q(run_after=get_date_max()) | Q(run_after__lte=now)
        ).filter(backend_name=self.backend_name)
        if not self.process_all_queues:
            tasks = tasks.filter(queue_name__in=self.queue_names)
        if self.excluded_queue_names:
            tasks = tasks.exclude(queue_name__in=self.excluded_queue_names)
        return tasks

    def idle_wait(self) -> bool:
        """Until the doorbell rings (True), or this worker's share of the poll interval is over.

        The process's workers poll about once per ``interval`` between them; the random spread
        keeps them from polling all at once.
        """
        share = self.interval * max(1, self.bell.members)
        spread = random.uniform(0.5, 1.5)  # noqa: S311 - spreading only
        return self.bell.wait(share * spread, worked_at=self._worked_at)

    def work(self) -> None:
        """django-tasks-db's ``Worker.run`` loop, waiting on the doorbell instead of sleeping."""
        tasks_logger.info("Starting worker worker_id=%s queues=%s", self.worker_id, ",".join(self.queue_names))
        if self.startup_delay and self.interval:
            time.sleep(random.random())  # noqa: S311 - avoid a thundering herd at start

        rung = False
        while self.running:
            # Check for dropped/expired connections right after waking up
            close_old_connections()
            task_result, retrieved = self.claim()
            if task_result is not None:
                if not rung:
                    # Found by polling, so enqueued by another process, where more may be
                    # waiting: another idle worker looks at once while this one runs it.
                    self.bell.ring()
                self.run_task(task_result)
                self._worked_at = time.monotonic()

            if self.batch and retrieved and task_result is None:
                tasks_logger.info("No more tasks to run for worker_id=%s - exiting gracefully.", self.worker_id)
                return
            if self.max_tasks is not None and self._run_tasks >= self.max_tasks:
                tasks_logger.info(
                    "Run maximum tasks (%d) on worker=%s - exiting gracefully.", self._run_tasks, self.worker_id
                )
                return

            close_old_connections()
            rung = False
            if self.running and not task_result:
                rung = self.idle_wait()

    def stop(self) -> None:
        """Ask the loop to end after the current task; tasks in flight are told through hooks."""
        self.running = False
        self.bell.wake_all()


class _QueueStatements:
    """A worker's two queue reads, ``ready().exists()`` and ``ready().get_locked()``, compiled once
    (``Prepared``) and run with the time of each claim."""

    def __init__(self, ready: Callable[[datetime], QuerySet[DBTaskResult]]) -> None:
        self.alias = DBTaskResult.objects.db  # the database the tasks live in, as the library reads it
        self._peek = Prepared(lambda now: ready(now).values_list("pk")[:1], now=STAND_IN_TIME)
        # Compiled at its first use, inside the claim's transaction (select_for_update needs one).
        self._pick = Prepared(lambda now: ready(now).select_for_update(skip_locked=True)[:1], now=STAND_IN_TIME)

    def peek(self) -> bool:
        return bool(self._peek.rows(self.alias, now=timezone.now()))

    def get_locked(self) -> DBTaskResult | None:
        """The next task, its row locked; call inside a transaction."""
        return self._pick.one(DBTaskResult, self.alias, now=timezone.now())


def make_worker(*, worker_id: str, interval: float = 0.5, queues: list[str] | None = None) -> HeartbeatWorker:
    return HeartbeatWorker(
        queue_names=queues or ["*"],
        interval=interval,
        batch=False,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id=worker_id,
        excluded_queue_names=[],
    )
