"""Folding a run's events into what its page shows: ``RunView``, built in one pass over the events.

The run page renders a ``RunView`` built in one pass over the run's events (one query), and the
HTML websocket keeps one per connection: it folds each event it sends into the view and
re-renders only the parts that changed (``RunView.apply`` names them). Page and socket so print
the same markup from the same state. Everything dynamic comes from the events, never from the
run row, so a view folded up to seq N is exactly what a page that showed N events displays.

This module holds the view itself (building, reading, applying) and the run's own events; what
happens inside tasks is folded by ``crews.run_view.fold_tasks``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from crews.models import Run, RunEvent, RunTask
from crews.run_view.fold_checks import CheckEvents
from crews.run_view.fold_knowledge import KnowledgeEvents
from crews.run_view.fold_progress import ProgressParts, run_manager
from crews.run_view.fold_tasks import TaskEvents, crew_plan_steps, plan_key
from crews.run_view.state import (
    Change,
    LLMCall,
    LogRow,
    PlanSegment,
    Step,
    TaskView,
    ToolCall,
    UsageAndOutput,
    log_rows_html,
    parts,
    summary_of,
)
from crews.run_view.text import (
    ACTIVE,
    FINISHED,
    RUN_SCOPE,
    RUN_STATUS_TONE,
    message_of,
    plan_diff_url,
    plan_url,
    run_status_label,
    text_of,
    time_of,
    words,
)

# What sets a waiting run running again: the events that end each wait (``_resume_work``).
_RESUMED_BY: dict[str, tuple[str, ...]] = {
    "awaiting_input": ("run.running", "feedback.received", "approval.resolved", "task.started"),
    "awaiting_approval": ("run.running", "crew_plan.approved", "task.started"),
    "planning": ("run.running", "crew_plan.approved", "task.started"),
}


class RunView(TaskEvents, CheckEvents, KnowledgeEvents, ProgressParts, UsageAndOutput):
    """The run's state after its events up to ``last_seq``; ``apply`` moves it one event on."""

    def __init__(self, run: Run, tasks: Iterable[RunTask] = (), *, started_task_ids: Iterable[int] = ()) -> None:
        self.run = run
        self.is_agent_run = run.crew_id is None
        self.status = "queued"
        self.last_seq = 0
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.paused_at: datetime | None = None  # interrupted: the clock stops until resumed
        self.output = ""
        self.error = ""
        self.notice_reason = ""
        # The last LLM call that failed for good ({error, kind, model}): the failed run's notice
        # words it (agents/_llm_failure.html); an answer after it clears it.
        self.provider_failure: dict[str, Any] | None = None
        self.waiting: dict[str, Any] | None = None  # what the run waits for a person to do
        self.holds: dict[tuple[int | None, str | None], dict[str, Any]] = {}  # LLM calls held back
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = 0
        self.llm_calls = 0
        self.log: list[LogRow] = []
        self.tasks: list[TaskView] = []
        self.by_id: dict[int, TaskView] = {}
        started = set(started_task_ids)
        for row in tasks:
            task = TaskView(
                key=str(row.task_id_snapshot), task_id=row.task_id_snapshot, number=row.order + 1,
                name=row.name, agent=row.agent_name, run_id=run.pk,
            )
            if row.status == RunTask.Status.DONE and row.task_id_snapshot not in started:
                task.status, task.output, task.reused = "done", row.output, True
                task.output_json = row.output_json
            self.tasks.append(task)
            self.by_id[row.task_id_snapshot] = task
        # The scope's name is lazy: a socket's view is built before it knows its reader's language.
        if self.is_agent_run:
            agent = (run.snapshot or {}).get("agent") or {}
            self.scope = TaskView(key=RUN_SCOPE, task_id=None, number=None, run_id=run.pk,
                                  name=agent.get("name") or gettext_lazy("Agent"), agent=agent.get("role", ""))
        else:
            self.scope = TaskView(key=RUN_SCOPE, task_id=None, number=None, name=gettext_lazy("Crew plan"), crew_plan={},
                                  run_id=run.pk)
        self._open_llm: dict[tuple[str, str], list[LLMCall]] = {}
        self._open_tools: dict[tuple[str, str], list[ToolCall]] = {}
        self._steps: dict[tuple[str, str], Step] = {}
        self._changes: list[Change] | None = None
        self._scope_shown = True
        # Approved crew plans' steps by (plan id, version), loaded by whoever builds the view.
        self.plan_steps: dict[tuple[int, int], dict[int, list[tuple[int, str]]]] = {}

    # Building ---------------------------------------------------------------------------------

    @classmethod
    def build(cls, run: Run, *, upto: int | None = None) -> RunView:
        """The view of ``run`` from the database: its task rows, then its events in one query."""
        events = RunEvent.objects.filter(run_id=run.pk).order_by("seq")
        if upto is not None:
            events = events.filter(seq__lte=upto)
        rows = list(events.values_list("seq", "type", "task_id", "step_id", "data", "at"))
        if upto is None:
            started = {r[2] for r in rows if r[1] == "task.started"}
        else:  # a task that starts later was not done when this run began either
            started = set(RunEvent.objects.filter(run_id=run.pk, type="task.started")
                          .values_list("task_id", flat=True))
        view = cls(run, RunTask.objects.filter(run_id=run.pk).order_by("order"), started_task_ids=started)
        view.manager = run_manager(run)
        approved = [plan_key(r[4]) for r in rows if r[1] == "crew_plan.approved"]
        if approved and approved[-1] is not None:
            view.plan_steps[approved[-1]] = crew_plan_steps(*approved[-1])
        for seq, type_, task_id, step_id, data, at in rows:
            view.fold(seq, type_, task_id, step_id or None, data or {}, at)
        view.finish_building()
        return view

    def finish_building(self) -> None:
        self._update_rerunnable()
        self._scope_shown = self.show_scope

    # Reading ----------------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def status_tone(self) -> str:
        return RUN_STATUS_TONE.get(self.status, "muted")

    @property
    def status_label(self) -> str:
        return run_status_label(self.status)

    @property
    def clock_running(self) -> bool:
        return self.started_at is not None and self.finished_at is None and self.paused_at is None

    @property
    def elapsed_seconds(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.finished_at or self.paused_at or timezone.now()
        return max(0.0, (end - self.started_at).total_seconds())

    @property
    def elapsed(self) -> str:
        """h:mm:ss, as run.js ticks it on while the run works."""
        seconds = self.elapsed_seconds
        if seconds is None:
            return "—"
        minutes, secs = divmod(int(seconds), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

    @property
    def all_tasks(self) -> list[TaskView]:
        return [self.scope, *self.tasks]

    @property
    def show_scope(self) -> bool:
        """A crew's run scope (its plan, its manager) is shown once it has something to show."""
        return self.is_agent_run or self.scope.has_content or bool(self.scope.crew_plan)

    @property
    def forced_tasks(self) -> list[str]:
        """The tasks whose answer was forced: a run that succeeds with them says so."""
        return [str(task.name) for task in self.all_tasks if task.forced]

    @property
    def unpriced(self) -> str:
        """How many LLM calls had no price, in a sentence."""
        return ngettext("(+ %(n)s call without a price)", "(+ %(n)s calls without a price)",
                        self.cost_unknown) % {"n": self.cost_unknown}

    def stats_html(self, oob: bool = False) -> SafeString:
        """Elapsed time, tokens, cost and LLM calls."""
        return SafeString(parts().run_stats(self, words(), oob))

    @property
    def log_html(self) -> SafeString:
        return log_rows_html(self.log)

    @property
    def has_pending_prompts(self) -> bool:
        return any(
            (t.feedback is not None and t.feedback.status == "pending")
            or any(a.status == "pending" for a in t.approvals)
            for t in self.all_tasks
        )

    @property
    def event_count(self) -> int:
        return len(self.log)

    def task_for(self, task_id: int | None) -> TaskView:
        if task_id is None:
            return self.scope
        task = self.by_id.get(task_id)
        if task is None:  # not in the snapshot (should not happen): shown at the end
            task = TaskView(key=str(task_id), task_id=task_id, number=len(self.tasks) + 1,
                            name=_("Task %(id)s") % {"id": task_id}, run_id=self.run.pk)
            self.tasks.append(task)
            self.by_id[task_id] = task
            self._emit(Change("task", {"task": task}, into="tasks", wrapper="ol"))
        return task

    # Applying ---------------------------------------------------------------------------------

    def apply(self, event: dict[str, Any]) -> list[Change]:
        """Fold one stored event (API.md's Event shape) and say which parts changed."""
        self._changes = []
        try:
            self.fold(event["seq"], event["type"], event.get("task_id"), event.get("step_id"),
                      event.get("data") or {}, time_of(event.get("at")))
            return self._dedupe(self._changes)
        finally:
            self._changes = None

    def _emit(self, change: Change) -> None:
        if self._changes is not None:
            self._changes.append(change)

    @staticmethod
    def _dedupe(changes: list[Change]) -> list[Change]:
        """A part replaced twice is rendered once (its latest state is what both show)."""
        seen: set[tuple[str, str]] = set()
        out: list[Change] = []
        for change in reversed(changes):
            if change.into is None:
                ident = (change.part, _ident(change.context))
                if ident in seen:
                    continue
                seen.add(ident)
            out.append(change)
        out.reverse()
        return out

    def fold(self, seq: int, type_: str, task_id: int | None, step_id: str | None,
             data: dict[str, Any], at: datetime | None) -> None:
        self.last_seq = max(self.last_seq, seq)
        self.log.append(LogRow(seq, type_, at.isoformat() if at else "", task_id, summary_of(data)))
        watched = self._watched() if self._changes is not None else None  # the diagram, the wait
        self._resume_work(type_)
        handler = _HANDLERS.get(type_)
        if handler is not None:
            handler(self, seq, task_id, step_id, data, at)
        self._hold(type_, task_id, step_id, data, at)
        if watched is not None:
            self._emit_watched(watched)
        if type_.startswith("run."):
            self._emit_run_parts()  # a run.* event always restates the run's status
        if not self._scope_shown and self.show_scope:
            self._scope_shown = True  # a crew's plan or manager has something to show now
            self._emit(Change("task", {"task": self.scope}))

    # Run status -------------------------------------------------------------------------------

    def _set_status(self, status: str) -> None:
        if status != self.status:
            self.status = status
            self._emit_run_parts()

    def _emit_run_parts(self) -> None:
        for part in ("run-status", "run-stats", "run-controls", "run-notice"):
            self._emit(Change(part, {}))

    def _resume_work(self, type_: str) -> None:
        """A person's answer or an approved plan sets the run running again (``run.running``).

        Runs recorded before ``run.running`` existed are read from the events that follow.
        """
        if type_ in _RESUMED_BY.get(self.status, ()):
            if self.waiting is not None:
                self.waiting = None
                self._emit(Change("run-notice", {}))
            self._set_status("running")

    def on_run_queued(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._set_status("queued")

    def on_run_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        if self.started_at is None:
            self.started_at = at
        if self.paused_at is not None and at is not None and self.started_at is not None:
            # resumed after an interruption: the time it sat interrupted does not count
            self.started_at += at - self.paused_at
        self.paused_at = None
        self._set_status("running")
        self._emit(Change("run-stats", {}))
        if self.is_agent_run:
            if self.scope.started:  # a resumed agent run starts its work over
                self._reset_task(self.scope)
                self.scope.status = "running"
                self._emit(Change("task", {"task": self.scope}))
            self._task_status(self.scope, "running", started=True)

    def _reset_task(self, task: TaskView) -> None:
        task.plan, task.activity, task.approvals, task.feedback = [], [], [], None
        task.output = task.error = task.forced = ""
        task.output_json = None
        task.output_seq = task.turn = task.max_turns = 0
        task.reused = False
        for key in [k for k in self._steps if k[0] == task.key]:
            del self._steps[key]
        for key in [k for k in (*self._open_llm, *self._open_tools) if k[0] == task.key]:
            self._open_llm.pop(key, None)
            self._open_tools.pop(key, None)

    def on_run_planning(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._set_status("planning")

    def on_run_awaiting_approval(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.waiting = {"kind": "plan", "plan_id": data.get("plan_id"), "version": data.get("version"),
                        "url": plan_url(data.get("plan_id"))}
        if data.get("kind") == "deviation":
            # A step of the approved plan failed and the crew asks first: the agent's proposal is
            # the plan's newest version; the person compares it with the approved one.
            task = self.task_for(data.get("task_id"))
            self.waiting.update(kind="deviation", task=task.name, reason=text_of(data.get("reason")),
                                diff_url=plan_diff_url(data.get("plan_id"), data.get("version")))
        self._set_status("awaiting_approval")
        self._emit(Change("run-notice", {}))

    def on_run_awaiting_input(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        kind = data.get("kind", "feedback")
        target = None
        for task in self.all_tasks:
            if kind == "feedback" and task.feedback is not None and task.feedback.status == "pending":
                target = f"prompt-{task.key}"
            if kind == "approval":
                for approval in task.approvals:
                    if approval.approval_id == data.get("approval_id"):
                        target = approval.dom_id
        self.waiting = {"kind": kind, "target": target}
        self._set_status("awaiting_input")
        self._emit(Change("run-notice", {}))

    def on_run_cancelling(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.waiting = None
        self._set_status("cancelling")

    def _stop_unfinished_plans(self, task: TaskView) -> None:
        """A plan still being drafted and a step still working stop with the run."""
        for item in task.plan:
            if not isinstance(item, PlanSegment):
                continue
            if item.status == "drafting":
                item.status = "stopped"
                self._emit(Change("plan-item", {"item": item, "task": task}))
            for step in item.steps:
                if step.status == "running":
                    step.status = "stopped"
                    self._emit(Change("step-head", {"step": step, "task": task}))

    def on_run_resumed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self.notice_reason = ""
        self._set_status("queued")

    def on_run_end(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None, *, status: str) -> None:
        self.waiting = None
        self.notice_reason = message_of(data.get("reason"))
        if status == "interrupted":
            self.paused_at = at
        else:
            self.finished_at = at
        if status == "succeeded":
            self.output = text_of(data.get("output"))
            self._emit(Change("run-output", {}))
        if status == "failed":
            self.error = message_of(data.get("error"))
            # The notice words a provider failure only when that failure is what ended the run:
            # a run that failed later for another reason keeps its own error.
            if self.provider_failure and self.provider_failure["error"] not in text_of(data.get("error")):
                self.provider_failure = None
        # What was in progress ends with the run: no "Drafting", "Planning…" or working step after it.
        end_task = {"succeeded": "done", "failed": "failed", "cancelled": "stopped", "interrupted": "waiting"}[status]
        drafting = self.scope.drafting
        for task in self.all_tasks:
            self._stop_unfinished_plans(task)
            if self.is_agent_run and task is self.scope and status in ("succeeded", "failed"):
                task.output, task.error = self.output, self.error
                self._task_status(task, end_task, answer=True)
            elif task.status == "running":
                self._task_status(task, "stopped" if status != "interrupted" else "waiting", answer=True)
            elif task.status == "waiting" and task.task_id is not None and status in ("cancelled", "failed"):
                self._task_status(task, "not_run")  # it never started, and now never will
            if task.feedback is not None and task.feedback.status == "pending":
                task.feedback.status = "closed"
                self._emit(Change("task-prompt", {"task": task}))
            for approval in task.approvals:
                if approval.status == "pending":
                    approval.status = "closed"
                    self._emit(Change("approval", {"approval": approval, "task": task}))
            for llm in (e for e in task.activity if isinstance(e, LLMCall) and e.status == "running"):
                llm.status = "failed"
                self._emit(Change("entry", {"entry": llm}))
        for calls in self._open_llm.values():
            for llm in calls:
                if llm.status == "running":
                    llm.status = "failed"
                    self._emit(Change("entry", {"entry": llm}))
        self._open_llm.clear()
        for tools in self._open_tools.values():  # a tool cut short by the stop says so
            for tool in tools:
                tool.status = "failed"
                self._emit(Change("entry", {"entry": tool}))
        self._open_tools.clear()
        if drafting:
            self._crew_plan(status="failed" if status == "failed" else "stopped")
        self._set_status(status)
        self._emit_run_parts()
        self._update_rerunnable()


def _ident(context: dict[str, Any]) -> str:
    for name in ("task", "step", "entry", "approval", "item"):
        obj = context.get(name)
        if obj is not None:
            return f"{name}:{id(obj)}"
    return json.dumps(context, sort_keys=True, default=str)


def _ended(status: str) -> Any:
    def handler(view: RunView, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        view.on_run_end(seq, task_id, step_id, data, at, status=status)
    return handler


_HANDLERS: dict[str, Any] = {
    "run.queued": RunView.on_run_queued,
    "run.started": RunView.on_run_started,
    "run.planning": RunView.on_run_planning,
    "run.awaiting_approval": RunView.on_run_awaiting_approval,
    "run.awaiting_input": RunView.on_run_awaiting_input,
    "run.cancelling": RunView.on_run_cancelling,
    "run.resumed": RunView.on_run_resumed,
    "run.succeeded": _ended("succeeded"),
    "run.failed": _ended("failed"),
    "run.cancelled": _ended("cancelled"),
    "run.interrupted": _ended("interrupted"),
    "crew_plan.started": RunView.on_crew_plan_started,
    "crew_plan.completed": RunView.on_crew_plan_completed,
    "crew_plan.approved": RunView.on_crew_plan_approved,
    "crew_plan.deviated": RunView.on_crew_plan_deviated,
    "agent_plan.bound": RunView.on_agent_plan_bound,
    "crew_plan.failed": RunView.on_crew_plan_failed,
    "crew_plan.warning": RunView.on_warning,
    "agent_plan.warning": RunView.on_warning,
    "task.started": RunView.on_task_started,
    "task.completed": RunView.on_task_completed,
    "task.failed": RunView.on_task_failed,
    "task.skipped": RunView.on_task_skipped,
    "task.delegated": RunView.on_task_delegated,
    "guardrail.passed": RunView.on_guardrail_passed,
    "guardrail.failed": RunView.on_guardrail_failed,
    "knowledge.retrieved": RunView.on_knowledge_retrieved,
    "memory.recalled": RunView.on_memory_recalled,
    "memory.saved": RunView.on_memory_saved,
    "agent_plan.started": RunView.on_agent_plan_started,
    "agent_plan.completed": RunView.on_agent_plan_completed,
    "agent_plan.failed": RunView.on_agent_plan_failed,
    "agent_plan.refined": RunView.on_agent_plan_refined,
    "agent_plan.replanned": RunView.on_agent_plan_replanned,
    "agent_plan.goal_achieved": RunView.on_agent_plan_goal_achieved,
    "step.started": RunView.on_step_started,
    "step.completed": RunView.on_step_completed,
    "step.skipped": RunView.on_step_skipped,
    "step.observed": RunView.on_step_observed,
    "llm.started": RunView.on_llm_started,
    "llm.completed": RunView.on_llm_completed,
    "llm.failed": RunView.on_llm_failed,
    "tool.started": RunView.on_tool_started,
    "tool.completed": RunView.on_tool_completed,
    "tool.failed": RunView.on_tool_failed,
    "budget.exceeded": RunView.on_budget_exceeded,
    "approval.requested": RunView.on_approval_requested,
    "approval.resolved": RunView.on_approval_resolved,
    "feedback.requested": RunView.on_feedback_requested,
    "feedback.received": RunView.on_feedback_received,
    "react.turn": RunView.on_react_turn,
    "react.format_error": RunView.on_react_rejected,
    "react.stuck": RunView.on_react_rejected,
    "react.forced_answer": RunView.on_react_forced_answer,
}


def run_duration(run: Run) -> timedelta | None:
    """For run lists: from start to end (or to now while it works)."""
    if run.started_at is None:
        return None
    end = run.finished_at or (timezone.now() if run.status in ACTIVE else None)
    return (end - run.started_at) if end else None


def fold_events(run: Run, tasks: Sequence[RunTask], events: Iterable[RunEvent]) -> RunView:
    """A view from rows already in memory (tests, benchmarks)."""
    events = list(events)
    started = {e.task_id for e in events if e.type == "task.started"}
    view = RunView(run, tasks, started_task_ids=started)
    for e in events:
        view.fold(e.seq, e.type, e.task_id, e.step_id or None, e.data or {}, e.at)
    view.finish_building()
    return view
