"""manage.py db_worker: django-tasks-db's worker, with the heartbeat /api/health reports.

It takes the upstream command's options; ``--reload`` is ignored (a worker that restarts itself
would interrupt runs). ``--threads N`` (default 1, upstream's behaviour) executes up to N runs at
once in this process, the way ``serve`` does: each worker is a thread, and the runs' coroutines
share this process's one event loop. Runs mostly wait on LLMs and people, so one process keeps
many of them; start one such process per core to spread their CPU.
"""

from __future__ import annotations

import asyncio
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.core.management.base import CommandError, CommandParser
from django_tasks_db.management.commands import db_worker

from planner_site.notify import Listener
from planner_site.worker import HeartbeatWorker, doorbell, run_stop_hooks


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

    async def _run_threads(self, workers: list[PlannerWorker]) -> None:
        """Every worker in a thread of its own, their async_to_sync calls back on this loop.

        SIGINT or SIGTERM asks each to stop after its current task; runs in flight are told
        through the stop hooks, so they mark themselves interrupted instead of being cut off.
        """
        loop = asyncio.get_running_loop()

        def stop() -> None:
            run_stop_hooks()
            for each in workers:
                each.stop()

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
        with ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="run-worker") as pool:
            await asyncio.gather(
                *(
                    sync_to_async(each.run, thread_sensitive=False, executor=pool)()
                    for each in workers
                )
            )
