"""How events inside tasks change a run's view: the crew plan, tasks, the agent's plans and steps,
LLM and tool calls, people's answers.

``TaskEvents`` is half of ``crews.run_view.fold.RunView`` (which holds the view and the run's own
events): one ``on_<event>`` method per event type, each changing the parts it names and saying
which parts changed (``_emit``), so the socket re-renders only those.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from crews.models import PlanStep, Run
from crews.run_view.state import (
    Approval,
    Change,
    Deviation,
    Feedback,
    LLMCall,
    Note,
    PlanSegment,
    Rejected,
    Step,
    TaskView,
    ToolCall,
)
from crews.run_view.text import message_of, plan_url, skip_reason, text_of


def run_llm_ids(snapshot: Any) -> list[int]:
    """The ids of the LLMs a run's snapshot names (its agents', their planners', the crew's planning
    and manager LLMs): the page finds the LLM of a failed call among them, not by model alone."""
    snapshot = snapshot if isinstance(snapshot, dict) else {}
    crew = snapshot.get("crew") or {}
    agents = [*(snapshot.get("agents") or []), snapshot.get("agent") or {}]
    ids = [crew.get("planning_llm_id"), crew.get("manager_llm_id")]
    for agent in agents:
        if isinstance(agent, dict):
            ids += [agent.get("llm_id"), (agent.get("planning_config") or {}).get("llm_id")]
    return sorted({i for i in ids if isinstance(i, int) and not isinstance(i, bool)})


class TaskEvents:
    """The handlers of the events inside tasks (``RunView`` provides the state they change)."""

    run: Run
    tasks: list[TaskView]
    scope: TaskView
    waiting: dict[str, Any] | None
    provider_failure: dict[str, Any] | None
    plan_steps: dict[tuple[int, int], dict[int, list[tuple[int, str]]]]
    _steps: dict[tuple[str, str], Step]
    _open_llm: dict[tuple[str, str], list[LLMCall]]
    _open_tools: dict[tuple[str, str], list[ToolCall]]
    _changes: list[Change] | None
    task_for: Callable[[int | None], TaskView]
    _emit: Callable[[Change], None]

    # Crew plan --------------------------------------------------------------------------------

    def _crew_plan(self, **values: Any) -> None:
        state = self.scope.crew_plan if self.scope.crew_plan is not None else {}
        state.update(values)
        self.scope.crew_plan = state
        if "plan_id" in values:
            state["url"] = plan_url(values["plan_id"])
        status = state.get("status", "running")
        self.scope.status = {"drafting": "running", "failed": "failed", "drafted": "drafted",
                             "approved": "approved", "stopped": "stopped"}.get(status, "running")
        self._emit(Change("task-head", {"task": self.scope}))

    def on_crew_plan_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="drafting")

    def on_crew_plan_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="drafted", plan_id=data.get("plan_id"), version=data.get("version"))

    def on_crew_plan_approved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="approved", plan_id=data.get("plan_id"), version=data.get("version"))
        steps = self.plan_steps.get(plan_key(data) or (0, 0), {})
        for task in self.tasks:
            if task.task_id is not None and task.status in ("waiting", "running"):
                rows = [{"step_id": f"{task.task_id}.p{uid}", "number": n, "description": text}
                        for n, (uid, text) in enumerate(steps.get(task.task_id, []), start=1)]
                self._approved_segment(task, rows)

    def _approved_segment(self, task: TaskView, rows: list[dict[str, Any]]) -> None:
        """The task's approved crew-plan steps, each waiting for its turn: the agent's plan
        whatever its kind (ENGINE.md §2b), so their statuses tick here as the run goes."""
        old = next((s for s in task.plan if isinstance(s, PlanSegment) and s.status == "approved"), None)
        if old is not None and [s.step_id for s in old.steps] == [text_of(r.get("step_id")) for r in rows]:
            return
        if old is not None:
            task.plan.remove(old)
            for step in old.steps:
                self._steps.pop((task.key, step.step_id), None)
        if not rows:
            if old is not None:
                self._emit(Change("task", {"task": task}))
            return
        segment = PlanSegment(task_key=task.key, replan=0, status="approved")
        for raw in rows:
            step = Step(step_id=text_of(raw.get("step_id")), number=int(raw.get("number") or 0),
                        description=text_of(raw.get("description")), task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, step.step_id)] = step
        task.plan.insert(0, segment)
        self._emit(Change("task", {"task": task}))

    def on_agent_plan_bound(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._approved_segment(task, [r for r in data.get("steps") or [] if isinstance(r, dict)])

    def on_crew_plan_deviated(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        item = Deviation(seq, text_of(data.get("reason")), [text_of(t) for t in data.get("before") or []],
                         [text_of(t) for t in data.get("after") or []], bool(data.get("approved_by_person")))
        self._plan_note(task, item)  # type: ignore[arg-type]
        approved = next((s for s in task.plan if isinstance(s, PlanSegment) and s.status == "approved"), None)
        if item.by_person and approved is not None:
            # The steps a person approved join the approved plan, where they tick as they run.
            for raw in data.get("steps") or []:
                key = text_of(raw.get("step_id")) if isinstance(raw, dict) else ""
                if not key or (task.key, key) in self._steps:
                    continue
                step = Step(step_id=key, number=int(raw.get("number") or 0),
                            description=text_of(raw.get("description")), task_key=task.key, run_id=self.run.pk)
                approved.steps.append(step)
                self._steps[(task.key, key)] = step
            self._emit(Change("plan-item", {"item": approved, "task": task}))
        if self.waiting and self.waiting.get("kind") == "plan":
            self.waiting = None
            self._emit(Change("run-notice", {}))

    def on_crew_plan_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        self._crew_plan(status="failed", error=text_of(data.get("error")))
        self._note(self.scope, None, Note(seq, _("The crew plan failed."), "danger", text_of(data.get("error"))))

    def on_warning(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        note = Note(seq, message_of(data.get("message")) or _("Warning"), "warning")
        if step_id and (task.key, step_id) not in self._steps:
            step_id = None
        self._note(task, step_id, note)

    # Tasks ------------------------------------------------------------------------------------

    def _task_status(self, task: TaskView, status: str, *, started: bool = False, answer: bool = False) -> None:
        task.status = status
        task.started = task.started or started
        self._emit(Change("task-head", {"task": task}))
        if answer:
            self._emit(Change("task-answer", {"task": task}))

    def on_task_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        # A resumed run starts an interrupted task over: what it had done is replaced.
        self._reset_task(task)
        if data.get("agent"):
            task.agent = text_of(data.get("agent"))
        task.status, task.started = "running", True
        self._emit(Change("task", {"task": task}))
        self._update_rerunnable()

    def on_task_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.output, task.output_seq = text_of(data.get("output")), seq
        task.output_json = data.get("output_json")
        self._task_status(task, "done", answer=True)
        self._update_rerunnable()

    def on_task_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.error = text_of(data.get("error"))
        task.failure_kind = text_of(data.get("kind")) if data.get("kind") not in (None, "other") else ""
        self._task_status(task, "failed", answer=True)

    def on_task_skipped(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.error = text_of(data.get("reason"))
        self._task_status(task, "skipped", answer=True)

    def on_task_delegated(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Delegated to %(coworker)s") % {"coworker": text_of(data.get("coworker"))}
        self._note(task, step_id, Note(seq, text, "info", text_of(data.get("task"))))

    # The agent's own plan -----------------------------------------------------------------------

    def _segment(self, task: TaskView, replan: int) -> PlanSegment | None:
        for item in reversed(task.plan):
            if isinstance(item, PlanSegment) and item.replan == replan:
                return item
        return None

    def on_agent_plan_started(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        if segment is None:
            segment = PlanSegment(task_key=task.key, replan=replan, attempt=int(data.get("attempt") or 1))
            task.plan.append(segment)
            self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
        else:
            segment.attempt = int(data.get("attempt") or segment.attempt)
            segment.status = "drafting"
            self._emit(Change("plan-item", {"item": segment, "task": task}))

    def on_agent_plan_completed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        new = segment is None
        if segment is None:
            segment = PlanSegment(task_key=task.key, replan=replan)
            task.plan.append(segment)
        for old in segment.steps:  # a refined attempt replaces the previous attempt's steps
            self._steps.pop((task.key, old.step_id), None)
        segment.attempt = int(data.get("attempt") or 1)
        segment.status = "ready" if data.get("ready", True) else "not_ready"
        segment.steps = []
        for raw in data.get("steps") or []:
            if not isinstance(raw, dict):
                continue
            step = Step(step_id=text_of(raw.get("step_id")), number=int(raw.get("number") or 0),
                        description=text_of(raw.get("description")), tool=raw.get("tool"),
                        task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, step.step_id)] = step
        if new:
            self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
        else:
            self._emit(Change("plan-item", {"item": segment, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_agent_plan_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        replan = int(data.get("replan") or 0)
        segment = self._segment(task, replan)
        if segment is not None and segment.status == "drafting":
            segment.status, segment.error = "failed", text_of(data.get("error"))
            self._emit(Change("plan-item", {"item": segment, "task": task}))
        else:
            self._plan_note(task, Note(seq, _("Planning failed."), "danger", text_of(data.get("error"))))

    def on_agent_plan_refined(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        for item in data.get("refinements") or []:
            step = self._steps.get((task.key, text_of(item.get("step_id"))))
            if step is not None:
                step.description, step.refined = text_of(item.get("text")), True
                self._emit(Change("step-head", {"step": step, "task": task}))
        after = data.get("after_step")
        text = ngettext(
            "After step %(n)s the agent refined %(count)d later step.",
            "After step %(n)s the agent refined %(count)d later steps.",
            len(data.get("refinements") or []),
        ) % {"n": after, "count": len(data.get("refinements") or [])}
        self._plan_note(task, Note(seq, text, "info"))

    def on_agent_plan_replanned(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Replanned (%(count)s): %(reason)s") % {"count": data.get("count", 1), "reason": text_of(data.get("reason"))}
        self._plan_note(task, Note(seq, text, "warning"))

    def on_agent_plan_goal_achieved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Goal reached after %(done)s steps; %(left)s left undone.") % {
            "done": data.get("steps_done", 0), "left": data.get("steps_left", 0)}
        self._plan_note(task, Note(seq, text, "success"))

    def _plan_note(self, task: TaskView, note: Note | Deviation) -> None:
        task.plan.append(note)
        self._emit(Change("plan-item", {"item": note, "task": task}, into=f"plan-{task.key}"))

    # Steps ------------------------------------------------------------------------------------

    def _step(self, task: TaskView, step_id: str | None, data: dict[str, Any]) -> Step | None:
        key = step_id or text_of(data.get("step_id"))
        if not key:
            return None
        step = self._steps.get((task.key, key))
        if step is None:  # a step the plan did not announce: it gets a segment of its own
            segment = self._segment(task, -1)
            if segment is None:
                segment = PlanSegment(task_key=task.key, replan=-1, status="ready")
                task.plan.append(segment)
                self._emit(Change("plan-item", {"item": segment, "task": task}, into=f"plan-{task.key}"))
            step = Step(step_id=key, number=int(data.get("number") or 0), description=text_of(data.get("description")),
                        task_key=task.key, run_id=self.run.pk)
            segment.steps.append(step)
            self._steps[(task.key, key)] = step
            self._emit(Change("step", {"step": step, "task": task}, into=f"steps-{segment.dom_id}", wrapper="ol"))
        return step

    def on_step_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status = "running"
        if data.get("description"):
            step.description = text_of(data.get("description"))
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_step_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status = text_of(data.get("outcome")) or "completed"
        step.result, step.error = text_of(data.get("result")), text_of(data.get("error"))
        step.result_seq = seq
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("step-result", {"step": step, "task": task}))
        self._emit(Change("task-head", {"task": task}))

    def on_step_skipped(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.status, step.reason = "skipped", skip_reason(data.get("reason"))
        self._emit(Change("step-head", {"step": step, "task": task}))
        self._emit(Change("step-result", {"step": step, "task": task}))

    def on_step_observed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._step(task, step_id, data)
        if step is None:
            return
        step.learned = text_of(data.get("learned"))
        if data.get("reviewed", True) and not data.get("review_failed"):
            step.reviewed_ok = bool(data.get("success"))
        self._emit(Change("step-result", {"step": step, "task": task}))

    # Activity: LLM calls, tools, notes ----------------------------------------------------------

    def _container(self, task: TaskView, step_id: str | None) -> tuple[list[Any], str, Step | None]:
        step = self._steps.get((task.key, step_id)) if step_id else None
        if step is not None:
            return step.activity, f"activity-step-{task.key}-{step.key}", step
        return task.activity, f"activity-{task.key}", None

    def _add_entry(self, task: TaskView, step_id: str | None, entry: Any) -> None:
        entries, container, _step = self._container(task, step_id)
        entries.append(entry)
        if self._changes is not None:  # building the page's view from stored events: no changes to say
            self._emit(Change("entry", {"entry": entry}, into=container, wrapper="ol"))

    def _note(self, task: TaskView, step_id: str | None, note: Note) -> None:
        self._add_entry(task, step_id, note)

    def on_llm_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = LLMCall(seq=seq, model=text_of(data.get("model")), purpose=text_of(data.get("purpose")), run_id=self.run.pk)
        self._open_llm.setdefault((task.key, step_id or ""), []).append(call)
        self._add_entry(task, step_id, call)
        if self._changes is None:
            return
        # The stream area shows the call in progress: a new call starts it afresh.
        _entries, _container, step = self._container(task, step_id)
        target = step.stream_id if step is not None else f"delta-{task.key}"
        self._emit(Change("delta", {"target": target, "step_stream": step is not None}))

    def _close_llm(self, task: TaskView, step_id: str | None, seq: int, data: dict[str, Any]) -> LLMCall:
        calls = self._open_llm.get((task.key, step_id or ""))
        if calls:
            call = calls.pop(0)
            call.ended_seq = seq
            return call
        call = LLMCall(seq=seq, model=text_of(data.get("model")), purpose=text_of(data.get("purpose")), run_id=self.run.pk,
                       ended_seq=seq)
        self._add_entry(task, step_id, call)
        return call

    def on_llm_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = self._close_llm(task, step_id, seq, data)
        call.status = "done"
        self.provider_failure = None
        call.prompt_tokens = int(data.get("prompt_tokens") or 0)
        call.completion_tokens = int(data.get("completion_tokens") or 0)
        cost = data.get("cost_usd")
        call.cost_usd = float(cost) if cost is not None else None
        call.latency_ms = int(data["latency_ms"]) if data.get("latency_ms") is not None else None
        for holder in (self, task):
            holder.prompt_tokens += call.prompt_tokens
            holder.completion_tokens += call.completion_tokens
            holder.cost_usd += call.cost_usd or 0.0
            holder.cost_unknown += cost is None
            holder.llm_calls += 1
        if self._changes is not None:
            self._emit(Change("entry", {"entry": call}))
            self._emit(Change("run-stats", {}))
            self._emit(Change("task-head", {"task": task}))

    def on_llm_failed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = self._close_llm(task, step_id, seq, data)
        call.status, call.error, call.retrying = "failed", text_of(data.get("error")), bool(data.get("retrying"))
        if not call.retrying and not data.get("negotiated"):
            self.provider_failure = {"error": call.error, "kind": data.get("kind"), "model": text_of(data.get("model")),
                                     "llm_ids": run_llm_ids(self.run.snapshot)}
        self._emit(Change("entry", {"entry": call}))

    def on_tool_started(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call = ToolCall(seq=seq, name=text_of(data.get("name")), args=data.get("args"))
        self._open_tools.setdefault((task.key, step_id or ""), []).append(call)
        self._add_entry(task, step_id, call)

    def _close_tool(self, task: TaskView, step_id: str | None, seq: int, data: dict[str, Any]) -> tuple[ToolCall, bool]:
        name = text_of(data.get("name"))
        calls = self._open_tools.get((task.key, step_id or ""), [])
        for index, call in enumerate(calls):
            if call.name == name:
                return calls.pop(index), False
        return ToolCall(seq=seq, name=name), True  # failed before it started (bad arguments)

    def on_tool_completed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call, new = self._close_tool(task, step_id, seq, data)
        call.status, call.output, call.from_cache = "done", text_of(data.get("output")), bool(data.get("from_cache"))
        if new:
            self._add_entry(task, step_id, call)
        else:
            self._emit(Change("entry", {"entry": call}))

    def on_tool_failed(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        call, new = self._close_tool(task, step_id, seq, data)
        call.status, call.error = "failed", text_of(data.get("error"))
        if new:
            self._add_entry(task, step_id, call)
        else:
            self._emit(Change("entry", {"entry": call}))

    def on_budget_exceeded(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Budget reached: %(limit)s (used %(used)s of %(allowed)s).") % {
            "limit": text_of(data.get("limit")), "used": text_of(data.get("used")), "allowed": text_of(data.get("allowed"))}
        self._note(task, step_id if (task.key, step_id) in self._steps else None, Note(seq, text, "danger"))

    # The agent's loop: its turns, the replies it could not use, a forced answer ---------------

    def on_react_turn(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        step = self._steps.get((task.key, step_id)) if step_id else None
        holder: Step | TaskView = step if step is not None else task
        holder.turn, holder.max_turns = int(data.get("turn") or 0), int(data.get("max_turns") or 0)
        if step is not None:
            self._emit(Change("step-head", {"step": step, "task": task}))
        else:
            self._emit(Change("task-head", {"task": task}))

    def on_react_rejected(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        """``react.format_error`` and ``react.stuck``: the model's reply, kept for people to read."""
        task = self.task_for(task_id)
        entry = Rejected(seq=seq, turn=int(data.get("turn") or 0), max_turns=int(data.get("max_turns") or 0),
                         error=text_of(data.get("error") or data.get("reason")), reply=text_of(data.get("reply")),
                         reply_chars=int(data.get("reply_chars") or 0), repeats=int(data.get("repeats") or 0))
        self._add_entry(task, step_id, entry)

    def on_react_forced_answer(self, seq: int, task_id: Any, step_id: str | None, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        task.forced = "repeated" if data.get("reason") == "repeated" else "max_turns"
        task.max_turns = int(data.get("max_turns") or task.max_turns)
        self._emit(Change("task-head", {"task": task}))
        self._emit(Change("task-answer", {"task": task}))

    # People -----------------------------------------------------------------------------------

    def on_approval_requested(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        approval = Approval(seq=seq, approval_id=text_of(data.get("approval_id")), tool=text_of(data.get("tool")),
                            args=data.get("args"))
        task.approvals.append(approval)
        self._emit(Change("approval", {"approval": approval, "task": task}, into=f"approvals-{task.key}"))

    def on_approval_resolved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        wanted = text_of(data.get("approval_id"))
        for approval in task.approvals:
            if approval.approval_id == wanted or (not wanted and approval.status == "pending"):
                approval.status = "approved" if data.get("approve") else "denied"
                approval.note = text_of(data.get("note"))
                self._emit(Change("approval", {"approval": approval, "task": task}))
                break

    def on_feedback_requested(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        task.feedback = Feedback(seq=seq, answer=text_of(data.get("answer")))
        self._emit(Change("task-prompt", {"task": task}))

    def on_feedback_received(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        self._emit(Change("task-head", {"task": task}))
        if task.feedback is None:
            task.feedback = Feedback(seq=seq, answer="")
        task.feedback.status, task.feedback.text = "answered", text_of(data.get("text"))
        self._emit(Change("task-prompt", {"task": task}))
        text = task.feedback.text
        self._note(task, None, Note(seq, _("Feedback: %(text)s") % {"text": text} if text else _("Answer accepted."),
                                    "info" if text else "success"))

    def overlay_people(self, *, decided: dict[str, str], feedback_pending: bool) -> None:
        """Answers already in the database that the agent has not taken up yet (page renders)."""
        for task in self.all_tasks:
            for approval in task.approvals:
                if approval.status == "pending":
                    approval.decided = decided.get(approval.approval_id, "")
            if task.feedback is not None and task.feedback.status == "pending" and not feedback_pending:
                task.feedback.sent = True

    # Re-running from a task --------------------------------------------------------------------

    def _update_rerunnable(self) -> None:
        earlier_done = True
        for index, task in enumerate(self.tasks):
            before = task.rerunnable
            task.rerunnable = index > 0 and earlier_done
            earlier_done = earlier_done and task.status == "done"
            if before != task.rerunnable:
                self._emit(Change("task-head", {"task": task}))


def plan_key(data: dict[str, Any]) -> tuple[int, int] | None:
    """The (plan id, version) a crew_plan.approved event names."""
    try:
        return int(data["plan_id"]), int(data["version"])
    except (KeyError, TypeError, ValueError):
        return None


def crew_plan_steps(plan_id: int, version: int) -> dict[int, list[tuple[int, str]]]:
    """An approved crew plan version's steps (stable uid, text) by task id (one query)."""
    steps: dict[int, list[tuple[int, str]]] = {}
    rows = (PlanStep.objects.filter(version__plan_id=plan_id, version__number=version)
            .order_by("task_id_snapshot", "order").values_list("task_id_snapshot", "uid", "text"))
    for task_id, uid, text in rows:
        steps.setdefault(task_id, []).append((uid, text))
    return steps
