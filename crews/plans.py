"""Plan services: draft in the background, edit as immutable versions, regenerate, approve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from agents.engine.specs import ApprovedStep
from crews import queue
from crews.models import PLAN_STEP_ORDER, Crew, Plan, PlanLLMCall, PlanStep, PlanVersion, Run, Task
from planner_site.budgets import budget_check
from planner_site.errors import Conflict, NotFound, TooMany
from planner_site.prepared import STAND_IN_ID, STAND_IN_NUMBER, Prepared
from planner_site.rows import insert_new

MAX_STEP_CHARS = 2_000
MAX_STEPS_PER_TASK = 50


# A step as versions copy and compare it: (stable id, text, pinned); a new step has no id yet.
StepTuple = tuple[int | None, str, bool]


def version_steps(plan: Plan, number: int | None = None, *, task_id: int | None = None
                  ) -> dict[int, list[StepTuple]]:
    """Steps of version ``number`` (default: current) by task id, in order, as tuples.

    What edits read: one query and no model instances (a 20 x 20 plan is 400 rows), or only
    ``task_id``'s steps.
    """
    rows = PlanStep.objects.filter(version__plan=plan, version__number=number or plan.version)
    if task_id is not None:
        rows = rows.filter(task_id_snapshot=task_id)
    steps: dict[int, list[StepTuple]] = {}
    for task, uid, text, pinned in rows.order_by(*PLAN_STEP_ORDER).values_list(
            "task_id_snapshot", "uid", "text", "pinned"):
        steps.setdefault(task, []).append((uid, text, pinned))
    return steps


def current_steps(plan: Plan, number: int | None = None) -> dict[int, list[PlanStep]]:
    """Steps of version ``number`` (default: current) by task id, in order; a deleted task's
    steps are there too, under the id it had (a run's snapshot still has that task)."""
    version = plan.versions.filter(number=number or plan.version).first()
    steps: dict[int, list[PlanStep]] = {}
    if version is None:
        return steps
    for step in version.steps.order_by(*PLAN_STEP_ORDER):
        steps.setdefault(step.task_id_snapshot, []).append(step)
    return steps


def steps_by_task_key(plan: Plan, number: int) -> dict[str, list[ApprovedStep]]:
    """What the engine runs: an approved version's steps by task key, each with its stable id
    (``<task id>.p<uid>``), which the run's step events carry."""
    # One query of the three columns the engine needs, not the version row and then its step
    # models (``current_steps``), compiled once: every run that follows a plan reads it here.
    return _approved_steps(_APPROVED_STEPS.rows(plan=plan.pk, number=number or plan.version))


_APPROVED_STEPS = Prepared(
    lambda plan, number: PlanStep.objects.filter(version__plan_id=plan, version__number=number)
    .order_by(*PLAN_STEP_ORDER).values_list("task_id_snapshot", "uid", "text"),
    plan=STAND_IN_ID, number=STAND_IN_NUMBER,
)


def _approved_steps(rows: Any) -> dict[str, list[ApprovedStep]]:
    """(task id, uid, text) rows in ``PLAN_STEP_ORDER`` (or ``PlanStep``s) by task key."""
    steps: dict[str, list[ApprovedStep]] = {}
    for row in rows:
        task_id, uid, text = (row.task_id_snapshot, row.uid, row.text) if isinstance(row, PlanStep) else row
        steps.setdefault(str(task_id), []).append(ApprovedStep(id=approved_step_id(task_id, uid), text=text))
    return steps


def approved_step_id(task_id: int | str, uid: int) -> str:
    return f"{task_id}.p{uid}"


# A task as a version remembers it: the fields of a run's snapshot that its steps were written for.
VERSION_TASK_FIELDS = ("id", "order", "name", "description", "expected_output", "agent_id")


def tasks_snapshot(*, crew_id: int) -> list[dict[str, Any]]:
    """The crew's tasks now, in order, as ``PlanVersion.tasks`` keeps them (every plan a run
    drafts reads them: compiled once)."""
    return [dict(zip(VERSION_TASK_FIELDS, row, strict=True)) for row in _TASKS_NOW.rows(crew=crew_id)]


_TASKS_NOW = Prepared(
    lambda crew: Task.objects.filter(crew_id=crew).order_by("order", "id").values_list(*VERSION_TASK_FIELDS),
    crew=STAND_IN_ID,
)


def _new_version(plan: Plan, *, actor: Any, note: str, steps: Mapping[int, Sequence[StepTuple]],
                 keep: int | None = None, keep_deleted: bool = False,
                 tasks: list[dict[str, Any]] | None = None) -> PlanVersion:
    """Write ``steps`` (task id -> [(uid or None, text, pinned)]) as the plan's next version.

    With ``keep`` (a version number), the tasks not in ``steps`` keep that version's steps. The
    database copies those rows itself: an edit of one step costs one task's rows here, not the
    whole plan's, and every version still has rows of its own (versions stay immutable).
    ``tasks`` is ``tasks_snapshot`` when the caller read it already, in the same transaction.
    """
    number = plan.version + 1  # ``plan`` is locked (select_for_update) by every caller
    version = PlanVersion.objects.create(plan=plan, number=number, note=note, created_by=actor,
                                         tasks=tasks if tasks is not None else tasks_snapshot(crew_id=plan.crew_id))
    if keep is not None:
        source = PlanVersion.objects.values_list("pk", flat=True).get(plan=plan, number=keep)
        _copy_steps(source=source, target=version.pk, skip_tasks=list(steps), keep_deleted=keep_deleted)
    next_uid = plan.next_step_uid
    rows = []
    alive = ({t["id"] for t in tasks} if tasks is not None
             else set(Task.objects.filter(pk__in=list(steps)).values_list("pk", flat=True)))
    for task_id, task_steps in steps.items():
        for order, (uid, text, pinned) in enumerate(task_steps):
            if uid is None:
                uid, next_uid = next_uid, next_uid + 1
            # A task deleted since (a run's copy still runs it): its steps keep its id, no link.
            rows.append(PlanStep(version=version, uid=uid, task_id=task_id if task_id in alive else None,
                                 task_id_snapshot=task_id, order=order, text=text, pinned=pinned))
    PlanStep.objects.bulk_create(rows)
    fields = {"version": number, "next_step_uid": next_uid}
    if plan.status == Plan.Status.APPROVED:
        fields["status"] = Plan.Status.DRAFT  # approval is bound to a version: an edit needs a new one
    Plan.objects.filter(pk=plan.pk).update(**fields)
    return version


def _copy_steps(*, source: int, target: int, skip_tasks: Sequence[int], keep_deleted: bool = False) -> None:
    """Copy version ``source``'s steps, less those of ``skip_tasks`` and of deleted tasks, into
    version ``target``: a new version is for the crew's tasks as they are now.

    One ``INSERT … SELECT`` (the ORM has no way to say it): the rows never travel through Python.
    """
    meta = PlanStep._meta
    quote = connection.ops.quote_name
    table = quote(meta.db_table)
    version, task = (quote(meta.get_field(name).column) for name in ("version", "task"))
    copied = ", ".join(quote(meta.get_field(name).column)
                       for name in ("uid", "task", "task_id_snapshot", "order", "text", "pinned"))
    snapshot = quote(meta.get_field("task_id_snapshot").column)
    sql = f"INSERT INTO {table} ({version}, {copied}) SELECT %s, {copied} FROM {table} WHERE {version} = %s"
    if not keep_deleted:
        sql += f" AND {task} IS NOT NULL"
    params: list[int] = [target, source]
    if skip_tasks:
        sql += f" AND {snapshot} NOT IN ({', '.join(['%s'] * len(skip_tasks))})"
        params += skip_tasks
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _check_draft_rate(actor: Any) -> None:
    """Each draft is a paid LLM call: a person drafts at most as many plans a minute as they may
    start runs (``PLANNER_KICKOFF_RATE_PER_MINUTE``)."""
    since = timezone.now() - timedelta(minutes=1)
    if Plan.objects.filter(created_by=actor, created_at__gte=since).count() >= settings.PLANNER_KICKOFF_RATE_PER_MINUTE:
        raise TooMany(_("Too many plans drafted in the last minute; wait a moment and try again."))


@transaction.atomic
def plan_draft(*, actor: Any, crew: Crew, inputs: Any, enqueue: bool = True) -> Plan:
    """Start drafting a plan for ``crew`` with ``inputs``; it fills in in the background.

    Drafting is paid LLM calls, counted in the person's daily spend: a spent daily budget refuses
    a draft as it refuses a kickoff (``budget_check``).

    ``enqueue=False`` leaves the drafting to the caller (``runner.generate_plan`` in the
    foreground, as ``manage.py kickoff --plan auto`` does).
    """
    from agents.selectors import llm_default
    from crews.bridge import crew_snapshot
    from crews.services import crew_check_runnable, crew_texts, inputs_validate

    _check_draft_rate(actor)
    budget_check(actor=actor)
    snapshot = crew_snapshot(crew)
    crew_check_runnable(crew=crew, snapshot=snapshot)
    clean = inputs_validate(crew=crew, inputs=inputs, texts=crew_texts(snapshot))
    plan = Plan.objects.create(
        crew=crew, inputs=clean, created_by=actor, llm=crew.planning_llm or llm_default(),
        status=Plan.Status.GENERATING,
    )
    if enqueue:
        generate_plan = queue.worker.task("generate_plan")
        transaction.on_commit(lambda: generate_plan.enqueue(plan.pk))
    return plan


def plan_store_draft(*, plan_id: int, steps: Mapping[str, Sequence[str]], usage: Mapping[str, Any],
                     task_ids: Sequence[int], warnings: Sequence[Mapping[str, Any]] = ()) -> Plan:
    """The planner's draft becomes version 1 (or the next version when re-drafting); its
    ``warnings`` (``{"task_id", "message"}``) replace those of an earlier draft."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        # The crew's tasks, read once: the version keeps them, and they say which ids are valid.
        tasks = tasks_snapshot(crew_id=plan.crew_id)
        rows = _draft_rows(tasks, steps, task_ids)
        _new_version(plan, actor=None, note="drafted", steps=rows, tasks=tasks)
        _add_usage(plan.pk, usage, user_id=plan.created_by_id, status=Plan.Status.DRAFT, error="",
                   warnings=_kept_warnings(warnings))
    return Plan.objects.get(pk=plan_id)


def _draft_rows(tasks: list[dict[str, Any]], steps: Mapping[str, Sequence[str]],
                task_ids: Sequence[int]) -> dict[int, list[StepTuple]]:
    """A draft's steps as a version's rows: only for ``task_ids`` the crew still has (every one
    of them listed, even without steps), each cut to the limits."""
    valid = {t["id"] for t in tasks} & set(task_ids)
    rows = {int(k): [(None, text[:MAX_STEP_CHARS], False) for text in v[:MAX_STEPS_PER_TASK]]
            for k, v in steps.items() if int(k) in valid}
    for task_id in task_ids:
        if task_id in valid:
            rows.setdefault(task_id, [])
    return rows


def _kept_warnings(warnings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{"task_id": w.get("task_id"), "message": str(w.get("message", ""))} for w in warnings]


def plan_store_run_draft(*, run: Run, steps: Mapping[str, Sequence[str]], usage: Mapping[str, Any],
                         task_ids: Sequence[int], warnings: Sequence[Mapping[str, Any]] = (),
                         approve: bool) -> tuple[Plan, dict[str, list[ApprovedStep]]]:
    """A run's own draft stored as a new plan with its version 1, approved as drafted when
    ``approve``; the plan and its steps as the engine runs them (``steps_by_task_key``).

    What ``plan_store_draft`` and then ``plan_approve`` (``allow_gaps``, no superseding) leave,
    written at once: the plan row is inserted as it ends up (version, step ids, usage, status)
    instead of being inserted, locked, updated twice, read again, locked and updated again, and
    the steps come from the rows written, not read back. Every planned run stores one; the
    caller's transaction (or this one) holds it all, with no savepoint of its own.
    """
    with transaction.atomic(savepoint=False):
        tasks = tasks_snapshot(crew_id=run.crew_id)
        rows = _draft_rows(tasks, steps, task_ids)
        count = sum(len(task_steps) for task_steps in rows.values())
        plan = Plan(
            # The id, not ``run.created_by``: the runner's run row has no user loaded (a query).
            crew_id=run.crew_id, inputs=run.inputs, created_by_id=run.created_by_id,
            llm_id=run.snapshot["crew"]["planning_llm_id"],
            status=Plan.Status.APPROVED if approve else Plan.Status.DRAFT, version=1,
            approved_version=1 if approve else None, next_step_uid=1 + count,
            prompt_tokens=int(usage.get("prompt_tokens", 0)), completion_tokens=int(usage.get("completion_tokens", 0)),
            cost_usd=Decimal(str(usage.get("cost_usd", 0))), warnings=_kept_warnings(warnings),
        )
        insert_new([plan])  # compiled once (nothing listens to these models' saves)
        version = PlanVersion(plan=plan, number=1, note="drafted", created_by=None, tasks=tasks)
        insert_new([version])
        uids = iter(range(1, count + 1))
        task_order = {t["id"]: t["order"] for t in tasks}  # only valid tasks have rows: all alive
        written = [PlanStep(version=version, uid=next(uids), task_id=task_id, task_id_snapshot=task_id,
                            order=order, text=text, pinned=pinned)
                   for task_id, task_steps in rows.items() for order, (_uid, text, pinned) in enumerate(task_steps)]
        insert_new(written)
    # ``PLAN_STEP_ORDER``, as the steps would be read back.
    written.sort(key=lambda step: (task_order[step.task_id_snapshot], step.task_id_snapshot, step.order))
    return plan, _approved_steps(written)


def draft_warnings(task_warnings: Mapping[str, Sequence[str]], warnings: Sequence[str]) -> list[dict[str, Any]]:
    """A draft's warnings as ``plan_store_draft`` keeps them: by task id where they are about one."""
    by_task = [{"task_id": int(key), "message": m} for key, messages in task_warnings.items() for m in messages]
    told = {w["message"] for w in by_task}
    return by_task + [{"task_id": None, "message": m} for m in warnings if m not in told]


def plan_tasks(plan: Plan, *, run: Run | None = None) -> list[tuple[int, str]]:
    """(id, name) of the tasks ``plan`` covers, in order: for a plan a run drafted for itself,
    the tasks of that run's snapshot (``run``, or the run that drafted it); otherwise the tasks its
    current version was written for. Never the crew's tasks as they are now: a task a builder adds
    meanwhile is not the plan's (a run snapshotted without it will not run it)."""
    if run is None or run.planning_plan_id != plan.pk:
        run = Run.objects.filter(planning_plan_id=plan.pk).only("pk", "snapshot", "planning_plan_id").order_by(
            "-created_at", "-id").first()
    rows: Any = (run.snapshot or {}).get("tasks") if run is not None and isinstance(run.snapshot, dict) else None
    if not rows and plan.version:
        rows = PlanVersion.objects.filter(plan_id=plan.pk, number=plan.version).values_list("tasks", flat=True).first()
    if not rows and plan.version:
        # A version written before versions kept their tasks: the tasks it has steps for.
        ids = sorted(version_steps(plan))
        names = dict(Task.objects.filter(pk__in=ids).values_list("pk", "name"))
        rows = [{"id": i, "name": names.get(i, "")} for i in ids]
    return [(int(t["id"]), str(t.get("name") or "")) for t in rows or [] if isinstance(t, dict) and "id" in t]


@dataclass(frozen=True)
class PlanGaps:
    """What the current version of a plan lacks, by task id, over the plan's own tasks
    (``plan_tasks``), each with the planner's warning about that task when it gave one.

    ``placeholders``: tasks with a placeholder step (the planner's ``"..."``, an empty step, a
    bare "Step 1"), junk that would be sent to a model: approval is refused (``plan_incomplete``).
    ``unplanned``: tasks with no steps at all. Not a block: such a task's agent plans it as usual
    when it runs (ENGINE.md §2b); the plan page says so beside Approve.
    """

    placeholders: dict[int, str] = field(default_factory=dict)
    unplanned: dict[int, str] = field(default_factory=dict)


def plan_gaps(plan: Plan, *, run: Run | None = None) -> PlanGaps:
    """The current version's placeholder steps and tasks without steps (``PlanGaps``)."""
    from agents.engine.plan_parsing import is_placeholder_step

    steps = version_steps(plan) if plan.version else {}
    told: dict[int, list[str]] = {}
    for warning in plan.warnings or []:
        if isinstance(warning, dict) and isinstance(warning.get("task_id"), int):
            told.setdefault(warning["task_id"], []).append(str(warning.get("message", "")))
    gaps = PlanGaps()
    for number, (task_id, name) in enumerate(plan_tasks(plan, run=run), start=1):
        texts = [text for _uid, text, _pinned in steps.get(task_id, [])]
        placeholder = next((t for t in texts if is_placeholder_step(t)), None)
        if placeholder is not None:
            gap = _("Task %(n)s (%(name)s) has a placeholder step (“%(text)s”), not a real one.") % {
                "n": number, "name": name, "text": placeholder.strip()[:40]}
            gaps.placeholders[task_id] = " ".join([gap, *told.get(task_id, [])])
        elif not texts:
            gap = _("Task %(n)s (%(name)s) has no steps: its agent will plan it when it runs.") % {
                "n": number, "name": name}
            gaps.unplanned[task_id] = " ".join([gap, *told.get(task_id, [])])
    return gaps


def gaps_message(gaps: Mapping[int, str]) -> str:
    """Why approval is refused (``PlanGaps.placeholders``)."""
    return _("Write real steps or regenerate these tasks before approving. %(gaps)s") % {
        "gaps": " ".join(gaps.values())}


def _add_usage(plan_id: int, usage: Mapping[str, Any], *, user_id: int | None, **fields: Any) -> None:
    """Add a drafting's usage to the plan's totals and, for a drafting outside a run (its
    ``calls``: each ``llm.completed``'s data and when), keep each call as a ``PlanLLMCall`` of
    ``user_id``'s, which usage and the daily budgets count. A run's own drafting has no ``calls``
    here: its calls are the run's events. ``fields`` are set on the plan in the same UPDATE."""
    Plan.objects.filter(pk=plan_id).update(
        prompt_tokens=F("prompt_tokens") + int(usage.get("prompt_tokens", 0)),
        completion_tokens=F("completion_tokens") + int(usage.get("completion_tokens", 0)),
        cost_usd=F("cost_usd") + Decimal(str(usage.get("cost_usd", 0))),
        **fields,
    )
    if not usage.get("calls"):
        return
    PlanLLMCall.objects.bulk_create(
        PlanLLMCall(plan_id=plan_id, user_id=user_id, at=call["at"], model=str(call.get("model") or "")[:200],
                    purpose=str(call.get("purpose") or "")[:50], prompt_tokens=int(call.get("prompt_tokens") or 0),
                    completion_tokens=int(call.get("completion_tokens") or 0),
                    cost_usd=Decimal(str(call.get("cost_usd") or 0)))
        for call in usage.get("calls", ())
    )


STOPPED_DRAFTING = gettext_noop("Drafting stopped: the worker drafting this plan stopped. Draft it again.")
STOPPED_REGENERATING = gettext_noop("Regenerating stopped: the worker doing it stopped. Try again.")


def plans_sweep_stale() -> list[int]:
    """Worker upkeep (``planner_site.worker.on_heartbeat``), as for runs: a draft or a
    regeneration whose worker died would keep its plan "generating" (every edit a 409) or its
    task "regenerating" (every regenerate a 409) for good.

    Drafting a plan is a few LLM calls, each bounded by its LLM's timeout, so a draft or a
    regeneration not finished ``PLANNER_PLAN_STALE_SECONDS`` after it started has lost its
    worker; it is failed, and the person can start it again. Returns the plans' ids.
    """
    cutoff = timezone.now() - timedelta(seconds=settings.PLANNER_PLAN_STALE_SECONDS)
    drafts = list(Plan.objects.filter(status=Plan.Status.GENERATING, updated_at__lt=cutoff).values_list("pk", flat=True))
    for plan_id in drafts:
        plan_fail(plan_id=plan_id, error=STOPPED_DRAFTING)
    regenerating = list(
        Plan.objects.filter(updated_at__lt=cutoff).exclude(regenerating_task_ids=[]).values_list("pk", flat=True)
    )
    for plan_id in regenerating:
        with transaction.atomic():
            plan = Plan.objects.select_for_update().get(pk=plan_id)
            if plan.updated_at >= cutoff or not plan.regenerating_task_ids:
                continue
            plan.regenerating_task_ids, plan.error = [], STOPPED_REGENERATING
            plan.save(update_fields=["regenerating_task_ids", "error", "updated_at"])
    return drafts + regenerating


def plan_fail(*, plan_id: int, error: str, usage: Mapping[str, Any] | None = None, failure_kind: str = "") -> None:
    """A drafting that failed with ``error``. ``failure_kind`` is the kind of provider failure
    (``agents.engine.failures``) when an LLM call's error ended it: kept with the plan's warnings
    (``plan_failure_kind``), so the page words that failure by kind and never reads one from the
    words of another error (a missing input named ``{api_key}`` is no refused key)."""
    changes: dict[str, Any] = {"status": Plan.Status.FAILED, "error": error}
    if failure_kind:
        changes["warnings"] = [{"task_id": None, "failure_kind": failure_kind}]
    Plan.objects.filter(pk=plan_id, status=Plan.Status.GENERATING).update(**changes)
    if usage:
        owner = Plan.objects.filter(pk=plan_id).values_list("created_by_id", flat=True).first()
        _add_usage(plan_id, usage, user_id=owner)


def plan_failure_kind(plan: Plan) -> str:
    """The kind of provider failure that failed ``plan``'s drafting (``plan_fail``), or ``""``."""
    if plan.status != Plan.Status.FAILED:
        return ""
    return next((str(w["failure_kind"]) for w in plan.warnings or []
                 if isinstance(w, dict) and w.get("failure_kind")), "")


def _parse_body(plan: Plan, tasks: Any, task_of_uid: Mapping[int, int]) -> dict[int, list[StepTuple]]:
    """The body's tasks and their steps; a step's id must be one of its own task's steps
    (``task_of_uid``: each current step's task).

    An id under another task is refused: that task's steps would keep it too when it is not in
    the body (a version holds each id once), and a step that changes task is a new step.
    """
    if not isinstance(tasks, list):
        raise ValidationError({"tasks": _("Give a list of tasks with their steps.")})
    crew_tasks = set(Task.objects.filter(crew_id=plan.crew_id).values_list("pk", flat=True).order_by())
    parsed: dict[int, list[StepTuple]] = {}
    seen_uids: set[int] = set()
    for i, entry in enumerate(tasks):
        task_id = entry.get("task_id") if isinstance(entry, dict) else None
        if not isinstance(task_id, int) or task_id not in crew_tasks:
            raise ValidationError({f"tasks[{i}].task_id": _("Unknown task %(id)s.") % {"id": task_id}})
        if task_id in parsed:
            raise ValidationError({f"tasks[{i}].task_id": _("Task %(id)s is listed twice.") % {"id": task_id}})
        steps = entry.get("steps")
        if not isinstance(steps, list):
            raise ValidationError({f"tasks[{i}].steps": _("Give a list of steps.")})
        if len(steps) > MAX_STEPS_PER_TASK:
            raise ValidationError({f"tasks[{i}].steps": _("At most %(n)s steps per task.") % {"n": MAX_STEPS_PER_TASK}})
        rows = []
        for j, step in enumerate(steps):
            where = f"tasks[{i}].steps[{j}]"
            if not isinstance(step, dict):
                raise ValidationError({where: _("A step is an object with its text.")})
            text = step.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ValidationError({f"{where}.text": _("A step needs some text.")})
            if len(text) > MAX_STEP_CHARS:
                raise ValidationError({f"{where}.text": _("A step is at most %(n)s characters.") % {"n": MAX_STEP_CHARS}})
            uid = step.get("id")
            if uid is not None:
                if not isinstance(uid, int) or task_of_uid.get(uid) != task_id or uid in seen_uids:
                    raise ValidationError({f"{where}.id": _("Unknown or repeated step id %(id)s.") % {"id": uid}})
                seen_uids.add(uid)
            rows.append((uid, text.strip(), bool(step.get("pinned", False))))
        parsed[task_id] = rows
    return parsed


@transaction.atomic
def plan_update(*, actor: Any, plan: Plan, expected_version: int | None, tasks: Any, note: str = "edited") -> Plan:
    """Save an edit as a new version; a stale ``expected_version`` is a conflict and saves nothing.

    Tasks not in the body keep their steps. Steps keep their ids; a step without one is new.
    """
    locked = Plan.objects.select_for_update().get(pk=plan.pk)
    if locked.status in (Plan.Status.GENERATING, Plan.Status.FAILED, Plan.Status.SUPERSEDED):
        raise Conflict(_("This plan cannot be edited while it is %(status)s.") % {"status": locked.get_status_display().lower()}, code="plan_state")
    if expected_version is None:
        raise ValidationError({"If-Match": _("Send the version you edited in the If-Match header.")})
    if expected_version != locked.version:
        raise Conflict(
            _("This plan changed elsewhere (now version %(now)s, you edited %(yours)s): reload it.")
            % {"now": locked.version, "yours": expected_version},
            code="stale_version",
        )
    task_of_uid = dict(
        PlanStep.objects.filter(version__plan=locked, version__number=locked.version).values_list("uid", "task_id")
    )
    _new_version(locked, actor=actor, note=note, steps=_parse_body(locked, tasks, task_of_uid), keep=locked.version)
    return Plan.objects.get(pk=plan.pk)


@transaction.atomic
def plan_restore(*, actor: Any, plan: Plan, number: int) -> Plan:
    """Restoring version ``number`` saves its steps as a new version."""
    locked = Plan.objects.select_for_update().get(pk=plan.pk)
    if not locked.versions.filter(number=number).exists():
        raise NotFound(_("This plan has no version %(n)s.") % {"n": number})
    if locked.status in (Plan.Status.GENERATING, Plan.Status.SUPERSEDED):
        raise Conflict(_("This plan cannot be changed now."), code="plan_state")
    _new_version(locked, actor=actor, note=f"restored v{number}", steps={}, keep=number)
    return Plan.objects.get(pk=plan.pk)


@transaction.atomic
def plan_approve(*, actor: Any, plan: Plan, version: int | None = None, supersede: bool = True,
                 allow_gaps: bool = False) -> Plan:
    """Approval binds to the current version; older approved plans of the crew are superseded.

    A plan a run drafted for itself (``supersede=False``) leaves the crew's other plans alone.
    A person approves only a plan without placeholder steps (``plan_gaps``: a conflict,
    ``plan_incomplete``, naming the tasks); a task with no steps is no block (its agent plans it
    when it runs, ENGINE.md §2b). Only the plan's own tasks count (``plan_tasks``), not a task
    added to the crew since. A run approving its own draft (``allow_gaps``) is not checked.
    """
    locked = Plan.objects.select_for_update().get(pk=plan.pk)
    if locked.status not in (Plan.Status.DRAFT, Plan.Status.APPROVED):
        raise Conflict(_("Only a drafted plan can be approved."), code="plan_state")
    if version is not None and version != locked.version:
        raise Conflict(_("This plan changed elsewhere: reload it before approving."), code="stale_version")
    if not allow_gaps and (gaps := plan_gaps(locked).placeholders):
        raise Conflict(gaps_message(gaps), code="plan_incomplete", field=f"tasks.{next(iter(gaps))}")
    if supersede:
        Plan.objects.filter(crew_id=locked.crew_id, status=Plan.Status.APPROVED).exclude(pk=locked.pk).update(
            status=Plan.Status.SUPERSEDED)
    locked.status = Plan.Status.APPROVED
    locked.approved_version = locked.version
    locked.save(update_fields=["status", "approved_version", "updated_at"])
    return locked


@transaction.atomic
def plan_fork_for_run(*, plan: Plan, number: int, run_id: int) -> Plan:
    """Version ``number`` of ``plan`` copied into a plan of the run's own, approved, with the same
    step ids (``<task>.p<uid>`` stays valid): a run revises its copy (``on_step_failure="ask"``),
    never the crew's shared plan, which other runs follow and later kickoffs use."""
    source = PlanVersion.objects.get(plan=plan, number=number)
    fork = Plan.objects.create(
        crew_id=plan.crew_id, inputs=plan.inputs, llm_id=plan.llm_id, created_by_id=plan.created_by_id,
        status=Plan.Status.APPROVED, version=1, approved_version=1, next_step_uid=plan.next_step_uid,
    )
    version = PlanVersion.objects.create(plan=fork, number=1, tasks=source.tasks,
                                         note=f"plan {plan.pk} version {number}, for run {run_id}")
    _copy_steps(source=source.pk, target=version.pk, skip_tasks=[], keep_deleted=True)
    return fork


@transaction.atomic
def plan_propose_revision(*, plan_id: int, base_version: int, task_id: int, keep_uids: Sequence[int],
                          texts: Sequence[str], note: str) -> Plan:
    """An agent's proposal for a task's remaining steps (``on_step_failure="ask"``), as a new
    draft version of a run's own plan built on ``base_version`` (the version the run follows):
    the task keeps the steps it completed (``keep_uids``) and the rest of its steps become
    ``texts``. The plan needs approving again before the run goes on."""
    locked = Plan.objects.select_for_update().get(pk=plan_id)
    current = version_steps(locked, base_version, task_id=task_id).get(task_id, [])
    kept = [step for step in current if step[0] in set(keep_uids)]
    proposed: list[StepTuple] = [(None, text[:MAX_STEP_CHARS], False) for text in texts if text.strip()]
    rows = {task_id: (kept + proposed)[:MAX_STEPS_PER_TASK]}
    _new_version(locked, actor=None, note=note[:200], steps=rows, keep=base_version, keep_deleted=True)
    Plan.objects.filter(pk=locked.pk).update(status=Plan.Status.DRAFT)
    return Plan.objects.get(pk=plan_id)


@transaction.atomic
def plan_regenerate(*, actor: Any, plan: Plan, task: Task, feedback: str = "") -> Plan:
    """Re-draft one task's unpinned steps (pinned ones stay where they are), in the background.
    Paid LLM calls, as a draft's: a spent daily budget refuses it (``budget_check``)."""
    budget_check(actor=actor)
    locked = Plan.objects.select_for_update().get(pk=plan.pk)
    if task.crew_id != locked.crew_id:
        raise NotFound(_("No task with id %(id)s in this plan.") % {"id": task.pk})
    if locked.status not in (Plan.Status.DRAFT, Plan.Status.APPROVED):
        raise Conflict(_("Only a drafted plan can be regenerated."), code="plan_state")
    if not isinstance(feedback, str) or len(feedback) > MAX_STEP_CHARS:
        raise ValidationError({"feedback": _("The note is at most %(n)s characters.") % {"n": MAX_STEP_CHARS}})
    busy = list(locked.regenerating_task_ids or [])
    if task.pk in busy:
        raise Conflict(_("This task is already being regenerated."), code="busy")
    locked.regenerating_task_ids = [*busy, task.pk]
    locked.save(update_fields=["regenerating_task_ids", "updated_at"])  # when it started: the sweep's clock
    regenerate_plan_task = queue.worker.task("regenerate_plan_task")
    transaction.on_commit(lambda: regenerate_plan_task.enqueue(locked.pk, task.pk, feedback.strip(), actor.pk if actor else None))
    return locked


def _words(text: str) -> str:
    """What tells two step texts apart: their words, whatever the spacing or case."""
    return " ".join(text.split()).casefold()


def merge_regenerated(old: Sequence[StepTuple], new_texts: Sequence[str]) -> list[StepTuple]:
    """Pinned steps keep their places; new steps fill the other places in order, extras at the end.

    The planner is shown the pinned steps and often writes them out again: a new step with a
    pinned step's text is that step, never a second copy of it.
    The task keeps at most ``MAX_STEPS_PER_TASK`` steps, pinned ones first: a longer list could
    not be saved again, so every later edit of the task would be refused.
    """
    pinned_texts = {_words(text) for _uid, text, pinned in old if pinned}
    room = max(0, MAX_STEPS_PER_TASK - sum(1 for _uid, _text, pinned in old if pinned))
    texts = [text for text in (t[:MAX_STEP_CHARS] for t in new_texts) if _words(text) not in pinned_texts]
    fresh: list[StepTuple] = [(None, text, False) for text in texts[:room]]
    merged: list[StepTuple] = []
    for uid, text, pinned in old:
        if pinned:
            merged.append((uid, text, True))
        elif fresh:
            merged.append(fresh.pop(0))
    return merged + fresh


def plan_store_regenerated(*, plan_id: int, task_id: int, texts: Sequence[str], actor: Any,
                           usage: Mapping[str, Any], error: str = "") -> Plan:
    """Apply a regeneration onto the newest version, so edits made meanwhile are kept."""
    with transaction.atomic():
        plan = Plan.objects.select_for_update().get(pk=plan_id)
        plan.regenerating_task_ids = [t for t in plan.regenerating_task_ids or [] if t != task_id]
        plan.error = error
        plan.save(update_fields=["regenerating_task_ids", "error"])
        _add_usage(plan_id, usage, user_id=actor.pk if actor is not None else plan.created_by_id)
        if not error and plan.status in (Plan.Status.DRAFT, Plan.Status.APPROVED):
            merged = merge_regenerated(version_steps(plan, task_id=task_id).get(task_id, []), texts)
            _new_version(plan, actor=actor, note="regenerated", steps={task_id: merged}, keep=plan.version)
    return Plan.objects.get(pk=plan_id)


@transaction.atomic
def plan_step_undelete(*, actor: Any, plan: Plan, task_id: int, index: int, deleted_in: int,
                       expected_version: int | None) -> Plan:
    """Undo a step's delete (made in version ``deleted_in``, at ``index`` of ``task_id``).

    Right after the delete the version before it is restored, so the step keeps its id; after
    other edits the step's text goes back at its old place as a new step. Either way a new version.
    """
    locked = Plan.objects.select_for_update().get(pk=plan.pk)  # nobody saves in between
    if locked.version == deleted_in == expected_version:
        return plan_restore(actor=actor, plan=locked, number=deleted_in - 1)
    _uid, old_text, old_pinned = version_steps(locked, deleted_in - 1, task_id=task_id)[task_id][index]
    rows: list[dict[str, Any]] = [
        {"id": uid, "text": text, "pinned": pinned}
        for uid, text, pinned in version_steps(locked, task_id=task_id).get(task_id, [])
    ]
    rows.insert(min(index, len(rows)), {"text": old_text, "pinned": old_pinned})
    return plan_update(actor=actor, plan=locked, expected_version=expected_version,
                       tasks=[{"task_id": task_id, "steps": rows}], note="undid a delete")
