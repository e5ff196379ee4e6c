"""The workers' doorbell across processes, on PostgreSQL's LISTEN / NOTIFY.

``planner_site.worker.doorbell`` wakes this process's idle workers when a task is enqueued here.
A task enqueued by another process (a web process next to ``db_worker`` processes) would wait for
the next poll, up to ``--interval`` seconds. On PostgreSQL, enqueuing also sends a NOTIFY in the
same transaction, so it is delivered when the task's row is committed, and every ``db_worker``
process listens and rings its own doorbell. Elsewhere (SQLite: one process) nothing is sent.
The poll stays: a notification missed while a listener reconnects costs one interval, no more.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import connections
from django_tasks_db.backend import DatabaseBackend
from django_tasks_db.compat import task_enqueued
from django_tasks_db.models import DBTaskResult

logger = logging.getLogger(__name__)

CHANNEL = "planner_tasks"
RETRY_SECONDS = 2.0


def _on_task_enqueued(sender: type, **kwargs: Any) -> None:
    if not (isinstance(sender, type) and issubclass(sender, DatabaseBackend)):
        return
    connection = connections[DBTaskResult.objects.db]  # the tasks' database: one transaction
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {CHANNEL}")


task_enqueued.connect(_on_task_enqueued, dispatch_uid="planner_site.notify.task_enqueued")


class Listener:
    """A thread on a connection of its own that rings ``ring`` on every NOTIFY, until stopped."""

    def __init__(self, ring: Any) -> None:
        self.ring = ring
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> bool:
        """Start listening on PostgreSQL (True); on another database do nothing (False)."""
        if connections[DBTaskResult.objects.db].vendor != "postgresql":
            return False
        self._thread = threading.Thread(
            target=self._listen_until_stopped, name="task-listener", daemon=True
        )
        self._thread.start()
        return True

    def stop(self) -> None:
        self._stopped.set()

    def _listen_until_stopped(self) -> None:
        import psycopg

        params = connections[DBTaskResult.objects.db].get_connection_params()
        while not self._stopped.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    # Tasks enqueued while (re)connecting were missed: look once now.
                    self.ring()
                    while not self._stopped.is_set():
                        for _note in conn.notifies(timeout=1.0):
                            self.ring()
            except Exception:  # noqa: BLE001 - the poll still finds tasks; try again shortly
                logger.warning("task listener lost its connection; retrying", exc_info=True)
                self._stopped.wait(RETRY_SECONDS)
