"""What the top of the run page shows of its progress (issue #15): the crew's diagram with each
task's status and steps, and what the run waits for (a person, a retry's back-off, a free slot
under a requests-per-minute limit).

``ProgressParts`` is a part of ``crews.run_view.fold.RunView``, as ``TaskEvents`` is. Both parts are
read from the view's state, so ``RunView.fold`` compares them before and after each event it
applies and re-renders (``run-diagram``, ``run-wait``) only the ones that changed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language

from agents.selectors import llm_list
from crews.diagram import Diagram, crew_diagram, manager_of
from crews.models import Run
from crews.run_view.state import Change, TaskView
from crews.run_view.text import ACTIVE, text_of

# What a task's status is called in the diagram (templates/crews/_diagram.html words each).
_DIAGRAM_STATUS = {"waiting": "queued", "running": "running", "done": "done", "failed": "failed",
                   "skipped": "skipped", "stopped": "stopped", "not_run": "not_run"}


@dataclass(frozen=True, slots=True)
class _Box:
    """A run's task as ``crew_diagram`` reads it."""

    pk: int
    name: str
    agent: str


def run_manager(run: Run) -> str | None:
    """The manager the diagram of a hierarchical crew's run shows, as the run's snapshot names it
    (a query for a hierarchical crew's: call it where the database may be used, when the view is
    built)."""
    crew = (run.snapshot or {}).get("crew") or {}
    if crew.get("process") != "hierarchical":
        return None
    llm_id = crew.get("manager_llm_id")
    name = llm_list().filter(pk=llm_id).values_list("name", flat=True).first() if llm_id else None
    return manager_of(crew.get("process"), name)


# Bench (#15 review): 20 sockets on one run, each folding and sending 100 step events, took 4.9 s
# without this and 0.8 s with it (1 socket: 0.22 s either way); each drew the same picture again.
_DIAGRAMS: OrderedDict[tuple[Any, ...], SafeString] = OrderedDict()
_DIAGRAMS_KEPT = 256
_DIAGRAMS_LOCK = threading.Lock()  # socket views render in the thread pool of sync_to_async


def diagram_html(view: ProgressParts) -> SafeString:
    """The run's diagram as ``crews/_diagram.html`` draws it, rendered once per run, state and
    language in this process: the picture depends on the events alone, never on who reads it.
    (The run's creation time keys it too: a test database hands a run's id out again.)"""
    if view.is_agent_run or not view.tasks:
        return SafeString("")
    key = (view.run.pk, view.run.created_at, get_language(), str(view.manager or ""), view.diagram_key())
    with _DIAGRAMS_LOCK:
        html = _DIAGRAMS.get(key)
        if html is not None:
            _DIAGRAMS.move_to_end(key)
            return html
    diagram = view.diagram
    context = {"diagram": diagram, "diagram_id": "run-flow"}
    html = mark_safe(render_to_string("crews/_diagram.html", context) if diagram else "")  # noqa: S308
    with _DIAGRAMS_LOCK:
        _DIAGRAMS[key] = html
        while len(_DIAGRAMS) > _DIAGRAMS_KEPT:
            _DIAGRAMS.popitem(last=False)
    return html


class ProgressParts:
    """The run's diagram and its wait note (``RunView`` provides the state they read)."""

    run: Run
    status: str
    tasks: list[TaskView]
    is_agent_run: bool
    _changes: list[Change] | None
    manager: str | None = None  # a hierarchical crew's manager (``run_manager``), set when built
    log: list[Any]
    # What the last event applied left of the diagram's key and the wait, by how many events were
    # folded then: the next event starts from it (``_watched``).
    _watched_after: tuple[int, tuple[tuple[Any, ...], dict[str, Any] | None]] | None = None
    # The LLM calls held back now, by (task id, step id): a retry's back-off or a rate limiter's
    # wait, from ``llm.failed`` {retry_in} or ``llm.waiting`` until that call starts again.
    holds: dict[tuple[int | None, str | None], dict[str, Any]]

    # The diagram -------------------------------------------------------------------------------

    def _diagram_status(self, task: TaskView) -> str:
        if task.waits_for_person:
            return "person"
        return _DIAGRAM_STATUS.get(task.status, "queued")

    @property
    def diagram(self) -> Diagram | None:
        """The crew's tasks in order with their status and steps; None for an agent's run."""
        if self.is_agent_run or not self.tasks:
            return None
        rows = [_Box(t.task_id, str(t.name), str(t.agent)) for t in self.tasks if t.task_id is not None]
        snapshot = {t.get("id"): t for t in (self.run.snapshot or {}).get("tasks") or [] if isinstance(t, dict)}
        context = {pk: snapshot.get(pk, {}).get("context_ids") or [] for pk in (r.pk for r in rows)}
        steps = {t.task_id: len(t.steps) for t in self.tasks if t.task_id is not None and t.steps}
        return crew_diagram(
            rows, manager=self.manager, context=context, steps=steps,
            statuses={t.task_id: self._diagram_status(t) for t in self.tasks if t.task_id is not None},
            done={t.task_id: t.steps_done for t in self.tasks if t.task_id is not None and t.steps},
        )

    @property
    def diagram_html(self) -> SafeString:
        return diagram_html(self)

    def diagram_key(self) -> tuple[Any, ...]:
        """What the diagram shows that events change: each task's agent, status and steps (with
        its name: all of the picture but the crew's links and manager, fixed for a run)."""
        return tuple((t.task_id, str(t.name), str(t.agent), self._diagram_status(t), len(t.steps), t.steps_done)
                     for t in self.tasks)

    # What the run waits for --------------------------------------------------------------------

    @property
    def wait(self) -> dict[str, Any] | None:
        """What holds the run's LLM calls back now (``run-wait`` in crews/run_detail.html): ``kind``
        is retry or rate_limit. A person's turn is said by the run's notice (``run-notice``)."""
        if self.status in ACTIVE and self.holds:
            return list(self.holds.values())[-1]  # the newest
        return None

    @property
    def now_ms(self) -> int:
        """The server's time as the page renders, in epoch ms (``data-now-ms`` on the run page):
        run.js counts a wait down to its ``until_ms`` by it, so a reader's clock set wrong does
        not skew the count. (Not in the note itself: the socket's note is the page's, byte for byte.)"""
        return int(timezone.now().timestamp() * 1000)

    def _hold(self, type_: str, task_id: int | None, step_id: str | None, data: dict[str, Any],
              at: datetime | None = None) -> None:
        """Keep what holds an LLM call back until that call starts again (or the run moves on),
        with when the wait ends (``until_ms``: the event's time plus its seconds, in epoch ms) for
        the countdown."""
        key = (task_id, step_id)
        if type_ == "llm.waiting":
            self.holds.pop(key, None)
            self.holds[key] = {"kind": "rate_limit", "seconds": _seconds(data.get("seconds")),
                               "until_ms": _until_ms(at, data.get("seconds")),
                               "limit": text_of(data.get("limit")), "rpm": data.get("rpm")}
        elif type_ == "llm.failed" and data.get("retrying") and data.get("retry_in") is not None:
            self.holds.pop(key, None)
            self.holds[key] = {"kind": "retry", "seconds": _seconds(data.get("retry_in")),
                               "until_ms": _until_ms(at, data.get("retry_in")),
                               "attempt": data.get("attempt"), "max_retries": data.get("max_retries"),
                               "rate_limited": data.get("kind") == "rate_limited"}
        elif type_ in ("llm.started", "llm.completed", "llm.failed", "step.completed", "step.skipped"):
            self.holds.pop(key, None)  # the call goes on, or its step ended (a timed-out one too)
        elif type_.startswith("task."):  # the task ended or starts over: none of its calls waits now
            for held in [k for k in self.holds if k[0] == task_id]:
                del self.holds[held]
        elif type_.startswith("run."):
            self.holds.clear()  # stopped, finished, waiting for a person: nothing holds a call now

    def _watched(self) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
        """The diagram's key and the wait before the event being folded (already in ``log``): what
        the previous event left when it was applied, else read now."""
        if self._watched_after is not None and self._watched_after[0] == len(self.log) - 1:
            return self._watched_after[1]
        return self.diagram_key(), self.wait

    def _emit_watched(self, before: tuple[tuple[Any, ...], dict[str, Any] | None]) -> None:
        """Re-render the diagram and the wait note if the event changed them."""
        if self._changes is None:
            return
        diagram, wait = after = self.diagram_key(), self.wait
        self._watched_after = (len(self.log), after)
        if diagram != before[0]:
            self._changes.append(Change("run-diagram", {}))
        if wait != before[1]:
            self._changes.append(Change("run-wait", {}))


def _seconds(value: Any) -> int:
    """Whole seconds, rounded up: "Waiting 1 s" rather than "Waiting 0 s"."""
    try:
        return max(1, -int(-float(value) // 1))
    except (TypeError, ValueError, OverflowError):
        return 1


def _until_ms(at: datetime | None, seconds: Any) -> int | None:
    """When a wait of ``seconds`` from ``at`` ends, in epoch ms; None without a (time-zone aware)
    time or a number of seconds: the note then says its words without counting down."""
    if at is None or timezone.is_naive(at):
        return None
    try:
        return int((at + timedelta(seconds=max(0.0, float(seconds)))).timestamp() * 1000)
    except (TypeError, ValueError, OverflowError):
        return None
