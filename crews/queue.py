"""How services start and stop background work without importing the worker.

Layers point one way: views → services → models and the bridge → engines, and the worker
(``crews.runner``, run by the tasks in ``crews.tasks``) uses services. So a service that queues a
run or stops one in this process cannot import the worker; it asks this module, which the
worker side fills in when the app is ready (``CrewsConfig.ready`` imports ``crews.tasks``, which
registers its tasks, and ``crews.runner``, which registers its in-process stop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class WorkerEntryPoints:
    """The background tasks (``django.tasks`` tasks) and the stop of a run working here."""

    execute_run: Any = None  # Task: run a crew or an agent
    generate_plan: Any = None  # Task: draft a plan
    regenerate_plan_task: Any = None  # Task: redraft one task's unpinned steps
    cancel_in_process: Callable[[int], None] = lambda run_id: None  # a worker elsewhere polls

    def task(self, name: str) -> Any:
        found = getattr(self, name)
        if found is None:  # pragma: no cover - the app registry always loads crews.tasks
            raise RuntimeError(f"the worker's task {name!r} is not registered: is the crews app ready?")
        return found


worker = WorkerEntryPoints()
