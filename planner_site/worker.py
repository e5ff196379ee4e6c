"""Run workers: django-tasks-db's worker plus a heartbeat, for ``serve`` and ``db_worker`` alike."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections
from django.utils import timezone
from django_tasks_db.management.commands.db_worker import Worker

logger = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 10.0

# Called (in the worker's thread) when the process is asked to stop, so that code running a task
# can wind down (a crew run marks itself interrupted) instead of being cut off mid-write.
_stop_hooks: list[Callable[[], None]] = []
_stop_lock = threading.Lock()


def on_worker_stop(hook: Callable[[], None]) -> Callable[[], None]:
    with _stop_lock:
        _stop_hooks.append(hook)

    def remove() -> None:
        with _stop_lock:
            if hook in _stop_hooks:
                _stop_hooks.remove(hook)

    return remove


def run_stop_hooks() -> None:
    with _stop_lock:
        hooks = list(_stop_hooks)
    for hook in hooks:
        try:
            hook()
        except Exception:  # noqa: BLE001 - one failing hook must not keep others from running
            logger.exception("worker stop hook failed")


def default_worker_id(suffix: str = "") -> str:
    return f"{socket.gethostname()}-{os.getpid()}{suffix}"[:100]


class HeartbeatWorker(Worker):
    """A django-tasks-db worker that records that it is alive (for /api/health)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._stopped = threading.Event()

    def beat(self) -> None:
        from planner_site.models import WorkerBeat

        WorkerBeat.objects.update_or_create(worker_id=self.worker_id, defaults={"seen_at": timezone.now()})

    def _beat_forever(self) -> None:
        while not self._stopped.wait(HEARTBEAT_SECONDS):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a missed beat only makes health say "none"
                logger.warning("worker heartbeat failed", exc_info=True)
            finally:
                close_old_connections()

    def run(self) -> None:
        self.beat()
        beater = threading.Thread(target=self._beat_forever, name=f"beat-{self.worker_id}", daemon=True)
        beater.start()
        try:
            super().run()
        finally:
            self._stopped.set()
            try:
                from planner_site.models import WorkerBeat

                WorkerBeat.objects.filter(worker_id=self.worker_id).delete()
            finally:
                close_old_connections()

    def stop(self) -> None:
        """Ask the loop to end after the current task; tasks in flight are told through hooks."""
        self.running = False


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
