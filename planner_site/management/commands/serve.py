"""manage.py serve: HTTP + websockets (Daphne) with run workers in the same process.

Before serving it applies pending migrations and runs the (idempotent) seed, one process at a
time (a PostgreSQL advisory lock: a scaled-out site's processes start together), so ``make run``
is this one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from planner_site.notify import Listener
from planner_site.warmup import collect_periodically, fewer_malloc_arenas, warm_in_background
from planner_site.worker import (
    configured_workers,
    default_worker_id,
    doorbell,
    make_worker,
    run_stop_hooks,
)

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve Crew Planner on one port with its workers in the same process (Ctrl-C stops it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="Runs executed at once in this process (0: none; default: the PLANNER_WORKERS setting).",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        fewer_malloc_arenas()  # before any thread starts
        # Importing daphne.server installs Twisted's asyncio reactor: it must come first.
        from asgiref.sync import sync_to_async
        from daphne.endpoints import build_endpoint_description_strings
        from daphne.server import Server
        from twisted.internet import defer, reactor

        from planner_site.asgi import application

        self.prepare()
        count = configured_workers() if opts["workers"] is None else max(0, opts["workers"])
        workers = [make_worker(worker_id=default_worker_id(f"-{i}")) for i in range(count)]
        futures: list[asyncio.Future[Any]] = []
        collecting: list[Callable[[], None]] = []  # stops the periodic collection, once begun
        # The workers' own threads: the loop's default executor has only cpu_count + 4 of them,
        # and other code (DNS lookups, asyncio.to_thread) needs those.
        pool = ThreadPoolExecutor(max_workers=max(1, count), thread_name_prefix="run-worker")

        stopping = False

        def start_workers() -> None:
            url = f"http://{opts['host']}:{opts['port']}/"
            if not workers:
                say_ready(url)
                return
            # Pages answer from now on; the workers take runs once what a run imports is loaded
            # (a second or two, more with litellm), so the first run is as quick as the next.
            self.stdout.write(f"Crew Planner is serving at {url}; warming up the run workers…", ending="\n")
            self.stdout.flush()
            warm_in_background(then=lambda: reactor.callFromThread(begin, url))

        def begin(url: str) -> None:
            if stopping:
                return
            # sync_to_async(thread_sensitive=False) gives each worker its own thread while keeping
            # Daphne's loop as the loop its async_to_sync calls go back to: group_send on the
            # in-memory channel layer then reaches this process's consumers at once.
            for worker in workers:
                run = sync_to_async(worker.run, thread_sensitive=False, executor=pool)
                futures.append(asyncio.ensure_future(run()))
            asyncio.ensure_future(ready_once_beating(url))
            # Every run of this process comes to this loop: they share its LLM connections.
            from agents.engine.wire import keep_sessions_on  # loaded by the warm-up by now

            keep_sessions_on(asyncio.get_event_loop())
            # Runs' cyclic garbage, freed while it is small, on this loop (its sockets' finalizers).
            collecting.append(collect_periodically(loop=asyncio.get_event_loop()))

        async def ready_once_beating(url: str) -> None:
            """"Ready" once the workers' first heartbeat is stored, so health then says "ok"."""
            beating = sync_to_async(_beating, thread_sensitive=False)
            for _ in range(250):  # 5 s at most: a slow database only delays the line
                if stopping or await beating():
                    break
                await asyncio.sleep(0.02)
            say_ready(url)

        def say_ready(url: str) -> None:
            self.stdout.write(self.style.SUCCESS(f"Crew Planner is ready at {url}"), ending="\n")
            self.stdout.flush()

        def stop_workers() -> Any:
            nonlocal stopping
            stopping = True
            for stop in collecting:
                stop()
            listener.stop()
            for worker in workers:
                worker.stop()
            run_stop_hooks()
            if not futures:
                return None
            waiting = asyncio.gather(*futures, return_exceptions=True)

            async def stopped() -> None:
                try:
                    # Shutdown waits for the workers to finish their current step, but not forever.
                    await asyncio.wait_for(waiting, timeout=15)
                finally:
                    from agents.engine.wire import close_kept_sessions

                    await close_kept_sessions()  # after the last run's last call

            return defer.Deferred.fromFuture(asyncio.ensure_future(stopped())).addErrback(
                lambda f: logger.warning("workers did not stop: %s", f)
            )

        # On PostgreSQL, tasks other processes enqueue wake this process's idle workers at once.
        listener = Listener(doorbell.ring)
        if workers:
            listener.start()
        reactor.callWhenRunning(start_workers)
        reactor.addSystemEventTrigger("before", "shutdown", stop_workers)
        endpoints = build_endpoint_description_strings(host=opts["host"], port=opts["port"])
        logger.info(
            "serving on %s with %d workers (debug=%s)", endpoints, len(workers), settings.DEBUG
        )
        Server(
            application=application,
            endpoints=endpoints,
            signal_handlers=True,
            http_timeout=None,
            websocket_timeout=86400,
            application_close_timeout=10,
            verbosity=1,
        ).run()

    def prepare(self) -> None:
        """Migrate the database if a migration is pending, then seed, one process at a time."""
        with _preparing_alone():
            _migrate_pending(self)  # worked out under the lock: another process may have just done it
            call_command("seed", stdout=self.stdout)
        connections.close_all()  # the workers' threads open their own


PREPARE_LOCK = 7_031_215  # any constant: the key of the advisory lock below


@contextlib.contextmanager
def _preparing_alone() -> Iterator[None]:
    """Hold PostgreSQL's advisory lock ``PREPARE_LOCK`` while preparing: several ``serve`` and
    ``db_worker`` processes of a new release start together, and two migrating or seeding at once
    collide (a relation that "already exists", a duplicate prompt version). SQLite is one
    machine's ``make run``; its file lock serialises writers."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [PREPARE_LOCK])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [PREPARE_LOCK])


def _migrate_pending(command: BaseCommand) -> bool:
    """Apply the pending migrations, saying how many; False (and quick) when there are none."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if not pending:
        return False
    command.stdout.write(f"Applying {len(pending)} database migrations…")
    command.stdout.flush()
    call_command("migrate", interactive=False, verbosity=0, stdout=command.stdout)
    return True


def _beating() -> bool:
    from django.db import close_old_connections

    from planner_site.models import WorkerBeat
    from planner_site.worker import heartbeat

    try:
        return bool(heartbeat.key) and WorkerBeat.objects.filter(worker_id=heartbeat.key).exists()
    finally:
        close_old_connections()
