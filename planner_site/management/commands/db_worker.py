"""manage.py db_worker: django-tasks-db's worker, with the heartbeat /api/health reports.

It takes the upstream command's options; ``--reload`` is ignored (a worker that restarts itself
would interrupt runs).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError
from django_tasks_db.management.commands import db_worker

from planner_site.worker import HeartbeatWorker, run_stop_hooks


class PlannerWorker(HeartbeatWorker):
    def shutdown(self, signum: int, frame: Any) -> None:
        # Tell a run in flight to wind down (it marks itself interrupted) before the loop ends.
        run_stop_hooks()
        super().shutdown(signum, frame)


class Command(db_worker.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        self.configure_logging(options["verbosity"])
        queue_names = options["queue_name"].split(",")
        excluded = options["exclude_queues"].split(",") if options["exclude_queues"] else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = PlannerWorker(
            queue_names=queue_names,
            interval=options["interval"],
            batch=options["batch"],
            backend_name=options["backend_name"],
            startup_delay=options["startup_delay"],
            max_tasks=options["max_tasks"],
            worker_id=options["worker_id"],
            excluded_queue_names=excluded,
        )
        worker.configure_signals()
        worker.run()
