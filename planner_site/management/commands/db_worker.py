"""manage.py db_worker: django-tasks-db's worker, with the heartbeat /api/health reports.

It takes the upstream command's options; ``--reload`` is ignored (a worker that restarts itself
would interrupt runs). ``--threads N`` (default 1, upstream's behaviour) executes up to N runs at
once in this process, the way ``serve`` does: each worker is a thread, and the runs' coroutines
share this process's one event loop. Runs mostly wait on LLMs and people, so one process keeps
many of them; start one such process per core to spread their CPU.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.core.management.base import CommandError, CommandParser
from django_tasks_db.management.commands import db_worker

from planner_site.notify import Listener
from planner_site.warmup import collect_periodically, fewer_malloc_arenas, warm
from planner_site.worker import HeartbeatWorker, doorbell, run_stop_hooks

logger = logging.getLogger(__name__)

# How long a failed worker's siblings get to finish their current task before the process exits.
STOP_SECONDS = 30.0


class PlannerWorker(HeartbeatWorker):
    def shutdown(self, signum: int, frame: Any) -> None:
        # Tell a run in flight to wind down (it marks itself interrupted) before the loop ends.
        run_stop_hooks()
        super().shutdown(signum, frame)


class Command(db_worker.Command):
    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--threads",
            type=int,
            default=1,
            help="Runs executed at once by this process (default: %(default)r).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.configure_logging(options["verbosity"])
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        threads = options["threads"]
        if threads < 1:
            raise CommandError("--threads must be 1 or more.")
        if threads > 1 and (options["batch"] or options["max_tasks"] is not None):
            raise CommandError("--batch and --max-tasks work with one thread only.")

        def worker(suffix: str = "") -> PlannerWorker:
            return PlannerWorker(
                queue_names=queue_names,
                interval=options["interval"],
                batch=options["batch"],
                backend_name=options["backend_name"],
                startup_delay=options["startup_delay"],
                max_tasks=options["max_tasks"],
                worker_id=options["worker_id"][: 64 - len(suffix)] + suffix,
                excluded_queue_names=excluded,
            )

        # The same care of memory as serve's (planner_site.warmup): two malloc arenas, set before
        # any thread starts, and runs' cyclic garbage collected every second while they run.
        fewer_malloc_arenas()
        # What a run imports, loaded before the first run is taken, so that run is not seconds
        # slower than the next (planner_site.warmup).
        try:
            warm()
        except Exception:  # a run imports what it needs itself, and reports a failure
            logger.exception("warming up failed; runs will load what they need")
        stop_collecting = collect_periodically()
        # On PostgreSQL, a task enqueued by a web process wakes an idle worker here at once.
        listener = Listener(doorbell.ring)
        listener.start()
        try:
            if threads == 1:
                one = worker()
                one.configure_signals()
                one.run()
            else:
                asyncio.run(self._run_threads([worker(f"-{i}") for i in range(threads)]))
        finally:
            listener.stop()
            stop_collecting()

    async def _run_threads(self, workers: list[PlannerWorker]) -> None:
        """Every worker in a thread of its own, their async_to_sync calls back on this loop.

        SIGINT or SIGTERM asks each to stop after its current task; runs in flight are told
        through the stop hooks, so they mark themselves interrupted instead of being cut off. A
        second signal exits at once (the sweep marks what was running interrupted), as
        django-tasks-db's own worker does. A worker that fails (say the database went away)
        stops the others the same way, and the process exits with its error, so a supervisor
        restarts it instead of a process that no longer works.
        """
        loop = asyncio.get_running_loop()
        signals = 0

        def stop_all() -> None:
            run_stop_hooks()
            for each in workers:
                each.stop()

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                logger.warning("Asked again: stopping now, runs in flight are left to the sweep.")
                os._exit(1)
            stop_all()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal)
        pool = ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="run-worker")
        running = [
            asyncio.ensure_future(sync_to_async(each.run, thread_sensitive=False, executor=pool)())
            for each in workers
        ]
        done, pending = await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
        error = next((task.exception() for task in done if task.exception() is not None), None)
        if pending:
            stop_all()  # a worker failed: the others finish their current task
            _done, pending = await asyncio.wait(pending, timeout=STOP_SECONDS)
        pool.shutdown(wait=False)
        if pending:
            logger.error("%d worker threads did not stop within %g s.", len(pending), STOP_SECONDS)
            os._exit(1)  # their threads would hold the interpreter's exit forever
        if error is not None:
            raise error
