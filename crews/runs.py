"""Run services: kickoff, stop, people's answers, resume, re-run — the only place run status changes."""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop
from django_tasks_db.backend import DatabaseBackend

from agents.bridge import agent_snapshot
from agents.models import Agent
from agents.selectors import prompt_version_numbers
from crews import queue, selectors
from crews.bridge import _record, crew_snapshot, emit_now
from crews.models import RUN_WORKING, Crew, FeedbackRequest, Plan, Run, RunTask, ToolApproval
from crews.services import MAX_INPUT_CHARS, crew_check_runnable, crew_texts, inputs_validate
from planner_site.audit import audit
from planner_site.budgets import budget_check
from planner_site.errors import Conflict, NotFound, TooMany
from planner_site.prepared import STAND_IN_ID, STAND_IN_TIME, Prepared
from planner_site.rows import insert_new

logger = logging.getLogger(__name__)

S = Run.Status
FINISHED = {S.SUCCEEDED, S.FAILED, S.CANCELLED}
CANCELLABLE = {S.QUEUED, S.PLANNING, S.AWAITING_APPROVAL, S.RUNNING, S.AWAITING_INPUT, S.INTERRUPTED}


def _enqueue(run: Run) -> None:
    """Queue the run's task. A task stored in the database (django-tasks-db, as deployed) is
    written in the caller's transaction, so the run and its task commit together: a process that
    died in between would otherwise leave a run queued forever with no task to run it. (The
    worker doorbell still rings only once that commit is done.) Any other backend, such as the
    immediate one of tests, would run or send the task at once: it gets it after the commit."""
    execute_run = queue.worker.task("execute_run")
    if isinstance(execute_run.get_backend(), DatabaseBackend):
        execute_run.enqueue(run.pk)
    else:
        transaction.on_commit(lambda: execute_run.enqueue(run.pk))


# Someone's runs since a time: every kickoff counts them, compiled once (planner_site.prepared).
_RUNS_SINCE = Prepared(
    lambda actor, since: Run.objects.filter(created_by=actor, created_at__gte=since).order_by().values("pk"),
    actor=STAND_IN_ID,
    since=STAND_IN_TIME,
)


def _recent_runs(actor: Any, since: datetime) -> int:
    """How many runs ``actor`` started since ``since``."""
    sql, params = _RUNS_SINCE.sql(actor=actor.pk, since=since)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM ({sql}) recent", params)
        return int(cursor.fetchone()[0])


def _check_rate(actor: Any) -> None:
    limit = settings.PLANNER_KICKOFF_RATE_PER_MINUTE
    recent = _recent_runs(actor, timezone.now() - timedelta(minutes=1))
    if recent >= limit:
        raise TooMany(_("Too many runs started in the last minute; wait a moment and try again."))


def _record_queued(run: Run, data: dict[str, Any]) -> None:
    """Store a new run's first event without broadcasting it: nobody can follow a run before
    the transaction creating it commits, and a socket that joins later replays it from the
    database. (A broadcast from the request's thread is a round trip through the event loop.)
    Stored in the kickoff's transaction, without a savepoint of its own: its failure fails the
    kickoff, whose transaction rolls back the run with it."""
    _record(run.pk, "run.queued", data)


@transaction.atomic
def run_kickoff(*, actor: Any, crew: Crew, inputs: Any, plan: Plan | None = None,
                review_plan: bool | None = None, rerun_of: Run | None = None,
                done: dict[int, RunTask] | None = None, planning: bool | None = None,
                enqueue: bool = True) -> Run:
    """Validate, snapshot the crew, queue the run; it starts once this transaction commits.

    A given plan must be approved and belong to this crew: it is then used verbatim. Without
    one, a crew with planning drafts its plan inside the run (and waits with ``review_plan``).
    A re-run (``rerun_of``) of that plan follows the very version the earlier run followed.
    ``planning`` overrides the crew's setting for this run only: it is written into the
    snapshot, which is the crew as this run runs it. ``enqueue=False`` leaves the run for the
    caller to execute in the foreground (``manage.py kickoff``): no worker will pick it up.
    """
    _check_rate(actor)
    budget_check(actor=actor)
    snapshot = crew_snapshot(crew)
    snapshot["prompts"] = prompt_version_numbers()  # the prompt versions it runs with: the run page links them
    if planning is not None:
        snapshot["crew"]["planning"] = planning
    crew_check_runnable(crew=crew, snapshot=snapshot)
    clean = inputs_validate(crew=crew, inputs=inputs, texts=crew_texts(snapshot))
    plan_version = None
    if plan is not None:
        if plan.crew_id != crew.pk:
            raise ValidationError({"plan_id": _("This plan belongs to another crew.")})
        if rerun_of is not None and rerun_of.plan_id == plan.pk and rerun_of.plan_version:
            plan_version = rerun_of.plan_version
        elif plan.status != Plan.Status.APPROVED or plan.approved_version is None:
            raise ValidationError({"plan_id": _("Approve the plan before running it.")})
        else:
            plan_version = plan.approved_version
    run = Run(
        crew=crew, created_by=actor, plan=plan, plan_version=plan_version,
        inputs=clean, snapshot=snapshot, rerun_of=rerun_of,
        review_plan=crew.review_plan if review_plan is None else review_plan,
    )
    insert_new([run])
    done = done or {}
    results = [
        RunTask(
            run=run, task_id_snapshot=t["id"], order=index, name=t["name"],
            agent_name=next((a["name"] for a in snapshot["agents"] if a["id"] == t["agent_id"]), ""),
            status=RunTask.Status.DONE if t["id"] in done else RunTask.Status.WAITING,
            output=done[t["id"]].output if t["id"] in done else "",
        )
        for index, t in enumerate(snapshot["tasks"])
    ]
    insert_new(results)
    # The response shows the run as kicked off: its task rows are these (no query to read them).
    selectors.related_rows_known(run, "task_results", results)
    _record_queued(run, {"crew_id": crew.pk, "plan_id": run.plan_id, "plan_version": run.plan_version})
    audit(actor=actor, action="run.started", target=run, crew=crew.pk)
    if enqueue:
        _enqueue(run)
    return run


@transaction.atomic
def run_kickoff_agent(*, actor: Any, agent: Agent, message: str) -> Run:
    """An agent asked something directly: the message is its task (planning per its settings)."""
    _check_rate(actor)
    budget_check(actor=actor)
    if not isinstance(message, str) or not message.strip():
        raise ValidationError({"message": _("Write what the agent should do.")})
    if len(message) > MAX_INPUT_CHARS:
        raise ValidationError({"message": _("The message is too long.")})
    run = Run.objects.create(
        agent=agent, created_by=actor, message=message.strip(), snapshot={"agent": agent_snapshot(agent), "prompts": prompt_version_numbers()}
    )
    _record_queued(run, {"agent_id": agent.pk})
    audit(actor=actor, action="run.started", target=run, agent=agent.pk)
    _enqueue(run)
    return run


# The locked reads every run makes at its claim and at each change of state, compiled once.
# A change of state decides on the status and the claim only: not the snapshot (the crew's whole
# definition, decoded from JSON with every read of the full row).
_LOCKED_RUN = Prepared(
    lambda run: Run.objects.select_for_update().only("id", "status", "worker_id").filter(pk=run), run=STAND_IN_ID
)
_LOCKED_RUN_TO_CLAIM = Prepared(
    lambda run: Run.objects.select_for_update()
    .only("id", "status", "cancel_requested", "started_at")
    .filter(pk=run),
    run=STAND_IN_ID,
)


@functools.cache
def _update_sql(vendor: str, model: type[Run] | type[RunTask], fields: tuple[str, ...], where: tuple[str, ...]) -> str:
    """``UPDATE`` of ``fields`` where ``where`` equal their values, built once per database kind."""
    quote = connection.ops.quote_name
    meta = model._meta
    sets = ", ".join(f"{quote(meta.get_field(name).column)} = %s" for name in fields)
    tests = " AND ".join(f"{quote(meta.get_field(name).column)} = %s" for name in where)
    return f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {tests}"


def _save_run(run: Run, fields: tuple[str, ...]) -> None:
    """``run.save(update_fields=fields)`` for a locked run, in one UPDATE compiled once: the
    ORM compiles one for every save, and every run changes state four times or more. Values go
    through the fields as save() sends them; no signals (nothing listens to a run's saves)."""
    meta = Run._meta
    params = [meta.get_field(name).get_db_prep_save(meta.get_field(name).pre_save(run, False), connection)
              for name in fields]
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(connection.vendor, Run, fields, ("id",)), [*params, run.pk])


def _transition(run_id: int, status: str, event: str | None, data: dict[str, Any] | None = None,
                *, allowed: set[str] | None = None, **fields: Any) -> bool:
    """Move a run to ``status`` (only from ``allowed``), then record ``event``; False if refused."""
    with transaction.atomic():
        run = _LOCKED_RUN.one(Run, run=run_id)
        if run is None:
            raise Run.DoesNotExist(f"no run {run_id}")
        if allowed is not None and run.status not in allowed:
            return False
        run.status = status
        for key, value in fields.items():
            setattr(run, key, value)
        _save_run(run, ("status", *fields))
        if event:
            emit_now(run_id, event, data)
    return True


def run_claim(*, run_id: int, worker_id: str) -> Run | None:
    """A worker takes a queued run; a run stopped before it started ends here as cancelled.

    Reads only what it decides on: the snapshot (the crew's whole definition) is the runner's.
    """
    with transaction.atomic():
        run = _LOCKED_RUN_TO_CLAIM.one(Run, run=run_id)
        if run is None or run.status != S.QUEUED:
            return None
        now = timezone.now()
        if run.cancel_requested:
            run.status, run.finished_at = S.CANCELLED, now
            _save_run(run, ("status", "finished_at"))
            emit_now(run_id, "run.cancelled", {})
            return None
        run.status = S.RUNNING
        run.started_at = run.started_at or now
        run.heartbeat_at = now
        run.worker_id = worker_id
        _save_run(run, ("status", "started_at", "heartbeat_at", "worker_id"))
        emit_now(run_id, "run.started", {"worker": worker_id})
    return run


def run_heartbeat(*, run_id: int, owner: str | None = None) -> bool:
    """Record that the run's worker is alive; returns whether it must stop: someone asked it
    to, or the run is no longer working under ``owner`` (its claim's worker id)."""
    mine = Run.objects.filter(pk=run_id, status__in=RUN_WORKING)
    if owner is not None:
        mine = mine.filter(worker_id=owner)
    if not mine.update(heartbeat_at=timezone.now()):
        return True
    return bool(Run.objects.filter(pk=run_id).values_list("cancel_requested", flat=True).first())


def run_set_planning(*, run_id: int) -> None:
    _transition(run_id, S.PLANNING, "run.planning", allowed={S.RUNNING, S.PLANNING})


def _back_to_running(run_id: int, allowed: set[str], *, announce: bool = True, **fields: Any) -> str | None:
    """A run that planned or waited works again, and says so (``run.running``) for live clients;
    the status it had, or None when it was not in ``allowed`` (nothing said).

    ``fields`` are written in the same UPDATE, and written even when the run does not work again.
    ``announce=False`` leaves ``run.running`` to the caller, to store with events of its own.
    Inside a caller's transaction (the runner's plan hop) no savepoint of its own: nothing here
    is worth rolling back alone.
    """
    with transaction.atomic(savepoint=False):
        run = _LOCKED_RUN.one(Run, run=run_id)
        if run is None:
            raise Run.DoesNotExist(f"no run {run_id}")
        if run.status not in allowed:
            if fields:
                Run.objects.filter(pk=run_id).update(**fields)
            return None
        previous = run.status
        run.status = S.RUNNING
        for key, value in fields.items():
            setattr(run, key, value)
        _save_run(run, ("status", *fields))
        if announce:
            emit_now(run_id, "run.running", {"from": previous})
    return previous


def run_set_running(*, run_id: int, plan: Plan | None = None, announce: bool = True) -> str | None:
    """The run works again; with ``plan``, following its approved version (``run_use_plan``)
    from the same locked read and UPDATE: every planned run does both at once."""
    fields = {} if plan is None else {"plan": plan, "plan_version": plan.approved_version}
    return _back_to_running(run_id, {S.PLANNING, S.AWAITING_APPROVAL, S.AWAITING_INPUT}, announce=announce,
                            **fields)


@transaction.atomic  # the request and the waiting status appear together
def run_wait_for_plan_approval(*, run_id: int, plan: Plan) -> None:
    Run.objects.filter(pk=run_id).update(plan=plan, planning_plan=plan)
    _transition(run_id, S.AWAITING_APPROVAL, "run.awaiting_approval",
                {"plan_id": plan.pk, "version": plan.version}, allowed={S.PLANNING, S.RUNNING})


def run_propose_plan_change(*, run_id: int, task_id: int, keep_uids: list[int], texts: list[str],
                            reason: str) -> tuple[Plan, int] | None:
    """A step of the run's approved plan failed and the crew asks first (``on_step_failure="ask"``):
    the agent's proposed remaining steps become a new draft version of the run's own plan, and the
    run waits for a person to edit and approve it, as it waits for a plan it drafted.

    A run that follows the crew's shared plan gets a copy of its version first: a proposal never
    changes what other runs follow or later kickoffs use. Returns the plan and the version the run
    departs from, or None (nothing written) while the run is not running (it waits for a person
    already, or was stopped): the caller asks again once it runs.
    """
    from crews import plans

    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.plan_id is None or run.plan_version is None:
            raise Conflict(_("This run follows no plan."), code="no_plan")
        if run.status != S.RUNNING:
            return None
        plan_id, base = run.plan_id, run.plan_version
        if run.planning_plan_id != run.plan_id:  # the crew's plan: the run takes a copy of its version
            fork = plans.plan_fork_for_run(plan=run.plan, number=base, run_id=run.pk)
            plan_id, base = fork.pk, 1
            Run.objects.filter(pk=run_id).update(plan=fork, plan_version=1, planning_plan=fork)
        plan = plans.plan_propose_revision(
            plan_id=plan_id, base_version=base, task_id=task_id, keep_uids=keep_uids, texts=texts,
            note=f"proposed by the agent: {reason}",
        )
        _transition(run_id, S.AWAITING_APPROVAL, "run.awaiting_approval",
                    {"plan_id": plan.pk, "version": plan.version, "from_version": base, "task_id": task_id,
                     "reason": reason, "kind": "deviation"}, allowed={S.RUNNING})
    return plan, base


def run_resume_with_plan(*, run_id: int, plan: Plan) -> bool:
    """The person approved a revised plan: the run follows that version from now on (only if it
    still waits for it: a run stopped or swept meanwhile keeps what it had)."""
    return _transition(run_id, S.RUNNING, "run.running", {"from": S.AWAITING_APPROVAL},
                       allowed={S.AWAITING_APPROVAL}, plan_version=plan.approved_version)


def run_use_plan(*, run_id: int, plan: Plan) -> None:
    Run.objects.filter(pk=run_id).update(plan=plan, plan_version=plan.approved_version)


@transaction.atomic  # the request and the waiting status appear together
def run_wait_for_feedback(*, run_id: int, task_key: str, answer: str) -> FeedbackRequest:
    request = FeedbackRequest.objects.create(run_id=run_id, task_key=task_key, answer=answer)
    _transition(run_id, S.AWAITING_INPUT, "run.awaiting_input",
                {"kind": "feedback", "feedback_id": request.pk}, allowed={S.RUNNING})
    return request


@transaction.atomic  # the request and the waiting status appear together
def run_wait_for_approval(*, run_id: int, approval_id: str, tool: str, args: dict[str, Any]) -> ToolApproval:
    approval = ToolApproval.objects.create(run_id=run_id, approval_id=approval_id, tool=tool, args=args)
    _transition(run_id, S.AWAITING_INPUT, "run.awaiting_input",
                {"kind": "approval", "approval_id": approval_id}, allowed={S.RUNNING})
    return approval


def run_resume_after_person(*, run_id: int) -> None:
    _back_to_running(run_id, {S.AWAITING_INPUT})


def _waits_for_a_person(run: Run) -> bool:
    """A request left pending by a run that stopped, or whose worker died, has nobody to read
    its answer. (``running``: the request is written just before the run starts waiting.)"""
    status = Run.objects.filter(pk=run.pk).values_list("status", flat=True).first()
    return status in (S.AWAITING_INPUT, S.RUNNING)


def run_feedback(*, actor: Any, run: Run, text: str) -> FeedbackRequest:
    """Answer the pending feedback request; an empty text accepts the agent's answer."""
    if not isinstance(text, str):
        raise ValidationError({"text": _("Feedback must be text.")})
    with transaction.atomic():
        request = (
            FeedbackRequest.objects.select_for_update()
            .filter(run=run, status=FeedbackRequest.Status.PENDING).order_by("-id").first()
        )
        if request is None or not _waits_for_a_person(run):
            raise Conflict(_("This run is not waiting for feedback."), code="not_waiting")
        request.text = text.strip()
        request.status = FeedbackRequest.Status.ANSWERED
        request.answered_by = actor
        request.answered_at = timezone.now()
        request.save()
    return request


def run_decide_approval(*, actor: Any, run: Run, approval_id: str, approve: bool, note: str = "") -> ToolApproval:
    with transaction.atomic():
        approval = ToolApproval.objects.select_for_update().filter(run=run, approval_id=approval_id).first()
        if approval is None:
            raise NotFound(_("This run has no approval %(id)s.") % {"id": approval_id})
        if approval.status != ToolApproval.Status.PENDING:
            raise Conflict(_("This tool call was already decided."), code="already_decided")
        if not _waits_for_a_person(run):
            raise Conflict(_("This run is not waiting for a decision."), code="not_waiting")
        approval.status = ToolApproval.Status.APPROVED if approve else ToolApproval.Status.DENIED
        approval.note = (note or "").strip()
        approval.decided_by = actor
        approval.decided_at = timezone.now()
        approval.save()
    audit(actor=actor, action="run.tool_approved" if approve else "run.tool_denied", target=run, tool=approval.tool)
    return approval


def run_cancel(*, actor: Any, run: Run) -> Run:
    """Stopping is idempotent: a queued or interrupted run ends at once, a working one winds down."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status in FINISHED:
            raise Conflict(_("This run has already finished."), code="finished")
        if locked.status == S.CANCELLING:
            return locked
        locked.cancel_requested = True
        if locked.status in (S.QUEUED, S.INTERRUPTED):
            locked.status, locked.finished_at = S.CANCELLED, timezone.now()
            locked.save(update_fields=["cancel_requested", "status", "finished_at"])
            emit_now(locked.pk, "run.cancelled", {})
        else:
            locked.status = S.CANCELLING
            locked.save(update_fields=["cancel_requested", "status"])
            emit_now(locked.pk, "run.cancelling", {})
    audit(actor=actor, action="run.stopped", target=locked)
    transaction.on_commit(lambda: queue.worker.cancel_in_process(locked.pk))
    return locked


CUT_SHORT = gettext_noop("The run stopped before this task finished.")


def run_finish(*, run_id: int, status: str, output: str = "", error: str = "", owner: str | None = None) -> None:
    """End a run: succeeded, failed, cancelled, or interrupted (resumable).

    Only a working run ends, so a run ends once: one the sweep took for dead meanwhile (its
    worker was alive after all, but stalled) keeps the end the sweep gave it. A run a person
    asked to stop ends cancelled, even if its process was stopping too: interrupted would make
    the stop a resumable pause. ``owner`` (the claim's worker id) ends it only if that
    execution still owns it.
    """
    with transaction.atomic():
        run = _LOCKED_RUN.one(Run, run=run_id)
        if run is None:
            raise Run.DoesNotExist(f"no run {run_id}")
        if run.status not in RUN_WORKING or (owner is not None and run.worker_id != owner):
            logger.warning("run %s is %s (by %s) already: not marking it %s", run_id, run.status,
                           run.worker_id, status)
            return
        if status == S.INTERRUPTED and run.status == S.CANCELLING:
            status = S.CANCELLED
        data = {"output": output} if status == S.SUCCEEDED else ({"error": error} if error else {})
        _end(run, status, data, output=output, error=error)


def _end(run: Run, status: str, data: dict[str, Any], *, output: str = "", error: str = "") -> None:
    """End ``run`` (locked, working) as ``status``: its row, the task it cut short (failed, or
    waiting for the resume when interrupted) and the event that says so."""
    event = {S.SUCCEEDED: "run.succeeded", S.FAILED: "run.failed", S.CANCELLED: "run.cancelled",
             S.INTERRUPTED: "run.interrupted"}[status]
    run.status, run.output, run.error = status, output, error
    fields: tuple[str, ...] = ("status", "output", "error")
    # The task cut short (``RunTask.objects.filter(...).update(...)``, compiled once).
    if status == S.INTERRUPTED:
        cut_short, values = ("status",), [RunTask.Status.WAITING]
    else:
        run.finished_at = timezone.now()
        fields += ("finished_at",)
        cut_short, values = ("status", "error"), [RunTask.Status.FAILED, error or CUT_SHORT]
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(connection.vendor, RunTask, cut_short, ("run", "status")),
                       [*values, run.pk, RunTask.Status.RUNNING])
    _save_run(run, fields)
    emit_now(run.pk, event, data)


def run_mark_stale_interrupted(*, stale_after: float | None = None) -> list[int]:
    """Runs whose worker stopped beating are interrupted (resumable), or cancelled when a stop
    was asked; returns their ids."""
    seconds = stale_after if stale_after is not None else settings.PLANNER_RUN_STALE_SECONDS
    cutoff = timezone.now() - timedelta(seconds=seconds)
    ids = list(Run.objects.filter(status__in=RUN_WORKING, heartbeat_at__lt=cutoff).values_list("pk", flat=True))
    marked = []
    for run_id in ids:
        with transaction.atomic():
            run = Run.objects.select_for_update().get(pk=run_id)
            if run.status not in RUN_WORKING or (run.heartbeat_at and run.heartbeat_at >= cutoff):
                continue
            if run.status == S.CANCELLING:
                _end(run, S.CANCELLED, {"reason": gettext_noop("worker stopped")})
            else:
                _end(run, S.INTERRUPTED, {"reason": gettext_noop("the worker running it stopped")})
            marked.append(run_id)
    return marked


def runs_sweep_stale() -> list[int]:
    """Worker upkeep (``planner_site.worker.on_heartbeat``): when a worker process starts and on
    every heartbeat after, runs whose worker stopped beating are marked interrupted (or
    cancelled, when a stop was asked), so that a killed worker never leaves a run "running"."""
    marked = run_mark_stale_interrupted()
    if marked:
        logger.warning("Runs whose worker stopped beating, now interrupted or cancelled: %s", marked)
    return marked


def run_resume(*, actor: Any, run: Run) -> Run:
    """An interrupted run continues from its first unfinished task; finished outputs are kept."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.status != S.INTERRUPTED:
            raise Conflict(_("Only an interrupted run can be resumed."), code="not_interrupted")
        locked.status = S.QUEUED
        locked.save(update_fields=["status"])
        RunTask.objects.filter(run=locked).exclude(status=RunTask.Status.DONE).update(
            status=RunTask.Status.WAITING, error="")
        # Questions the stopped worker asked have nobody left to read their answers: the task
        # they belong to runs again and asks anew. Left pending, they would be listed and
        # "answered" for nothing.
        FeedbackRequest.objects.filter(run=locked, status=FeedbackRequest.Status.PENDING).delete()
        ToolApproval.objects.filter(run=locked, status=ToolApproval.Status.PENDING).delete()
        emit_now(locked.pk, "run.resumed", {})
        _enqueue(locked)
    audit(actor=actor, action="run.resumed", target=locked)
    return locked


def run_rerun(*, actor: Any, run: Run, from_task_id: int | None = None) -> Run:
    """The same crew, inputs and plan again; from a task, earlier tasks' outputs are reused."""
    if run.crew is None:
        if run.agent is None:
            raise Conflict(_("This run's crew no longer exists."), code="gone")
        return run_kickoff_agent(actor=actor, agent=run.agent, message=run.message)
    done: dict[int, RunTask] = {}
    if from_task_id is not None:
        results = list(run.task_results.order_by("order"))
        ids = [r.task_id_snapshot for r in results]
        if from_task_id not in ids:
            raise ValidationError({"from_task_id": _("This task was not part of the run.")})
        for result in results:
            if result.task_id_snapshot == from_task_id:
                break
            if result.status != RunTask.Status.DONE:
                raise ValidationError({"from_task_id": _("An earlier task did not finish; re-run from it instead.")})
            done[result.task_id_snapshot] = result
    # The same plan is the version the run followed, even if the plan was edited or superseded
    # since: that version was approved when it ran, and versions never change.
    plan = run.plan if run.plan_id and run.plan_version else None
    return run_kickoff(actor=actor, crew=run.crew, inputs=run.inputs, plan=plan, rerun_of=run, done=done)


@transaction.atomic
def run_approve_plan(*, actor: Any, run: Run, edit: Any = None, version: int | None = None) -> Plan:
    """Approve the plan a run drafted for itself (optionally edited first); the run continues.

    ``version`` (If-Match) is the version the person saw: a plan changed since is a 409, edit or
    not. The edit and the approval are one transaction, so nothing lands between them.
    """
    from crews import plans

    run = Run.objects.select_for_update().get(pk=run.pk)  # a stop or the sweep cannot land meanwhile
    if run.status != S.AWAITING_APPROVAL or run.planning_plan_id is None:
        raise Conflict(_("This run is not waiting for a plan approval."), code="not_waiting")
    plan = Plan.objects.select_for_update().get(pk=run.planning_plan_id)
    if edit is not None:
        if not isinstance(edit, dict):
            raise ValidationError({"plan": _("Send the plan edit as an object with its tasks.")})
        expected = plan.version if version is None else version
        plan = plans.plan_update(actor=actor, plan=plan, expected_version=expected, tasks=edit.get("tasks"))
        version = plan.version
    return plans.plan_approve(actor=actor, plan=plan, version=version, supersede=False)


def run_guard_delete(sender: type[Crew] | type[Agent], instance: Crew | Agent, **kwargs: Any) -> None:
    """A crew or an agent is not deleted while one of its runs works (``RUN_WORKING``): its
    worker would lose the run under it. Stop the run first; a queued run goes with them.

    Connected to ``pre_delete`` (crews.apps), so the rule holds for every way a crew or an
    agent is deleted (the pages, the API, the admin, a deleted owner), and the agents app needs
    to know nothing of runs. Deletion runs in a transaction: the runs not yet finished are
    locked, so none starts working between this check and the delete.
    """
    runs = Run.objects.filter(crew=instance) if isinstance(instance, Crew) else Run.objects.filter(agent=instance)
    waiting = runs.select_for_update().filter(status__in=[S.QUEUED, *RUN_WORKING]).order_by("pk")
    working = next((run for run in waiting.only("pk", "status") if run.status in RUN_WORKING), None)
    if working is not None:
        raise Conflict(
            _("Run %(id)s is still working: stop it first.") % {"id": working.pk}, code="run_working"
        )
