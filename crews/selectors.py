"""Reads of the crews app, including who may see what (another user's crew is a 404)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, JSONField, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from agents.models import Agent, PlanningConfig
from crews.engine.interpolate import find_placeholders
from crews.models import (
    PLAN_STEP_ORDER,
    Crew,
    Plan,
    PlanStep,
    PlanVersion,
    Run,
    RunEvent,
    RunLLMCall,
    RunTask,
    Task,
)
from planner_site.errors import Forbidden, NotFound
from planner_site.prepared import STAND_IN_ID, STAND_IN_ID_2, Prepared
from planner_site.roles import can_build, is_admin


def crew_visible(*, user: Any) -> QuerySet[Crew]:
    return _crews_seen_by(user).select_related("owner", "planning_llm", "manager_llm")


def _crews_seen_by(user: Any) -> QuerySet[Crew]:
    """Who sees which crew: an admin every crew, anyone else their own and the shared ones."""
    if is_admin(user):
        return Crew.objects.all()
    return _crews_owned_or_shared(user.pk)


def _crews_owned_or_shared(user_id: int) -> QuerySet[Crew]:
    return Crew.objects.filter(Q(owner=user_id) | Q(shared=True))


def crew_list(*, user: Any) -> QuerySet[Crew]:
    return crew_visible(user=user).order_by("name", "id")


def crew_get(*, user: Any, crew_id: int, for_write: bool = False) -> Crew:
    """The crew if ``user`` may see it (and change it, with ``for_write``); else NotFound."""
    crew = (
        crew_visible(user=user)
        .prefetch_related(
            Prefetch("agents", queryset=Agent.objects.select_related("planning_config")),
            crew_tasks_prefetch(),
        )
        .filter(pk=crew_id)
        .first()
    )
    if crew is None:
        raise NotFound(_("No crew with id %(id)s.") % {"id": crew_id})
    if for_write:
        crew_check_write(user=user, crew=crew)
    return crew


_PLANNING_CONFIG = Agent._meta.get_field("planning_config")  # an agent's, the reverse one-to-one

# The kickoff's reads of a crew, compiled once (planner_site.prepared): compiling them was most
# of their cost, paid by every kickoff. Who sees the crew is _crews_seen_by's rule, as everywhere.
_KICKOFF_CREW = Prepared(lambda crew: Crew.objects.order_by().filter(pk=crew), crew=STAND_IN_ID)
_KICKOFF_CREW_SEEN = Prepared(
    lambda crew, user: _crews_owned_or_shared(user).order_by().filter(pk=crew),
    crew=STAND_IN_ID,
    user=STAND_IN_ID_2,
)
_KICKOFF_AGENTS = Prepared(lambda crew: Agent.objects.filter(crews=crew), crew=STAND_IN_ID)
_KICKOFF_PLANNING = Prepared(
    lambda crew: PlanningConfig.objects.filter(agent__crews=crew).order_by(), crew=STAND_IN_ID
)
_KICKOFF_TASKS = Prepared(lambda crew: Task.objects.filter(crew=crew).order_by(), crew=STAND_IN_ID)
_KICKOFF_LINKS = Prepared(
    lambda crew: Task.context.through.objects.order_by()
    .filter(from_task__crew=crew)
    .values_list("from_task_id", "to_task_id"),
    crew=STAND_IN_ID,
)


def crew_get_for_kickoff(*, user: Any, crew_id: int) -> Crew:
    """The crew as ``crew_get(..., for_write=True)`` checks it, with what a kickoff reads.

    That is the crew's own row (no joined owner or LLMs: a run refers to them by id) and the
    related rows ``crews.bridge.crew_snapshot`` reads through the prefetch cache: the agents
    with their planning settings, the tasks with their agents (with theirs), and the tasks each
    one reads. Five plain queries, compiled once, fill that cache: ``prefetch_related`` costs
    five times as much CPU for the same rows (it compiles each query, builds a filtered queryset
    per object and orders tasks through the crew's own ordering, which the snapshot sorts
    anyway); every kickoff pays it.
    """
    if is_admin(user):
        crew = _KICKOFF_CREW.one(Crew, crew=crew_id)
    else:
        crew = _KICKOFF_CREW_SEEN.one(Crew, crew=crew_id, user=user.pk)
    if crew is None:
        raise NotFound(_("No crew with id %(id)s.") % {"id": crew_id})
    crew_check_write(user=user, crew=crew)
    agents = _KICKOFF_AGENTS.all(Agent, crew=crew.pk)
    planning = _KICKOFF_PLANNING.all(PlanningConfig, crew=crew.pk)
    configs = {config.agent_id: config for config in planning}
    for agent in agents:  # as select_related("planning_config") leaves them: no query to read it
        config = configs.get(agent.pk)
        _PLANNING_CONFIG.set_cached_value(agent, config)
        if config is not None:
            _PLANNING_CONFIG.field.set_cached_value(config, agent)
    tasks = _KICKOFF_TASKS.all(Task, crew=crew.pk)
    # A task's agent is nearly always one of the crew's: the same row, already read.
    agent_by_id = {agent.pk: agent for agent in agents}
    outsiders = {task.agent_id for task in tasks if task.agent_id is not None} - agent_by_id.keys()
    if outsiders:
        agent_by_id.update(
            {a.pk: a for a in Agent.objects.filter(pk__in=outsiders).select_related("planning_config")}
        )
    for task in tasks:
        if task.agent_id is not None:
            task.agent = agent_by_id[task.agent_id]
    used: dict[int, list[int]] = {}
    for task_id, used_id in _KICKOFF_LINKS.rows(crew=crew.pk):
        used.setdefault(task_id, []).append(used_id)
    by_id = {task.pk: task for task in tasks}
    # A task only reads earlier tasks of its own crew (services check it); read any other anyway.
    others = {i for ids in used.values() for i in ids} - by_id.keys()
    if others:
        by_id.update({task.pk: task for task in Task.objects.filter(pk__in=others)})
    related_rows_known(crew, "agents", agents)
    related_rows_known(crew, "tasks", tasks)
    for task in tasks:
        related_rows_known(task, "context", [by_id[i] for i in used.get(task.pk, ())])
    return crew


def related_rows_known(obj: Any, relation: str, rows: list[Any]) -> None:
    """Make ``obj.<relation>.all()`` the given rows, as ``prefetch_related`` would leave it:
    for rows read (or written) already, which the caller vouches are all of them.

    The cached queryset is the relation's own (filtered to ``obj``), so anything but ``all()``
    still asks the database the right question.
    """
    queryset = getattr(obj, relation).get_queryset()
    queryset._result_cache = rows
    queryset._prefetch_done = True
    obj.__dict__.setdefault("_prefetched_objects_cache", {})[relation] = queryset


def crew_check_write(*, user: Any, crew: Crew) -> None:
    if is_admin(user) or (crew.owner_id == user.pk and can_build(user)):
        return
    # A viewer already sees this crew: its role is what stops it (403). A builder looking at
    # someone else's shared crew gets the same 404 as for a missing one.
    if can_build(user):
        raise NotFound(_("No crew with id %(id)s.") % {"id": crew.pk})
    raise Forbidden(_("Your role cannot change crews."))


def task_get(*, user: Any, task_id: int, for_write: bool = False) -> Task:
    task = Task.objects.select_related("crew", "agent").prefetch_related("context").filter(pk=task_id).first()
    if task is None or not crew_visible(user=user).filter(pk=task.crew_id).exists():
        raise NotFound(_("No task with id %(id)s.") % {"id": task_id})
    if for_write:
        crew_check_write(user=user, crew=task.crew)
    return task


def crew_tasks(*, crew: Crew, with_context: bool = True) -> list[Task]:
    """The crew's tasks in order, with their agents and (unless ``with_context=False``, for
    pages that never show it: a query and a model per link) the tasks each one reads."""
    tasks = crew.tasks.select_related("agent").order_by("order", "id")
    return list(tasks.prefetch_related("context") if with_context else tasks)


def crew_context_links(*, crew: Crew) -> dict[int, list[int]]:
    """Which tasks each task of ``crew`` reads (task id → ids), in one query."""
    links: dict[int, list[int]] = {}
    for reader, source in Task.context.through.objects.filter(from_task__crew=crew).values_list(
            "from_task_id", "to_task_id"):
        links.setdefault(reader, []).append(source)
    return links


def crew_tasks_as_read(*, crew: Crew) -> list[Task]:
    """``crew_tasks(crew=crew)``, from the tasks the crew was read with when it was read with
    them (``crew_get``, ``crew_tasks_prefetch``): the API shows a crew's tasks, and its input
    names from them, without reading them twice more."""
    cached = getattr(crew, "_prefetched_objects_cache", {}).get("tasks")
    if cached is None:
        return crew_tasks(crew=crew)
    return sorted(cached, key=lambda task: (task.order, task.pk))


def crew_tasks_prefetch() -> Prefetch:
    """The crews' tasks as ``crew_tasks`` reads them (in their order within the crew, which the
    model's ordering reaches by joining the crew), for crews read at once."""
    tasks = Task.objects.select_related("agent").order_by("order", "id").prefetch_related("context")
    return Prefetch("tasks", queryset=tasks)


def crew_input_names(*, crew: Crew, tasks: list[Task] | None = None) -> list[str]:
    """Placeholders ``{name}`` in the agents' role/goal/backstory and the tasks' texts
    (``tasks``: the crew's, in order, when the caller has them already)."""
    texts: list[str] = []
    tasks = crew_tasks(crew=crew) if tasks is None else tasks
    agents = {a.pk: a for a in crew.agents.all()}
    for task in tasks:
        if task.agent_id and task.agent_id not in agents and task.agent is not None:
            agents[task.agent_id] = task.agent
    for agent in agents.values():
        texts += [agent.role, agent.goal, agent.backstory]
    for task in tasks:
        texts += [task.description, task.expected_output]
    return find_placeholders(texts)


def crew_can_write(*, user: Any, crew: Crew) -> bool:
    """Whether ``user`` may change ``crew`` (pages hide their edit controls otherwise)."""
    return is_admin(user) or (crew.owner_id == user.pk and can_build(user))


def task_context_choices(*, crew: Crew, task: Task | None = None) -> QuerySet[Task]:
    """Tasks whose output ``task`` may use: the crew's earlier tasks (all of them for a new task)."""
    qs = crew.tasks.order_by("order", "id")
    if task is None:
        return qs
    return qs.filter(Q(order__lt=task.order) | Q(order=task.order, pk__lt=task.pk))


# Runs and plans ----------------------------------------------------------------------------------


def run_visible(*, user: Any) -> QuerySet[Run]:
    """Runs of the crews ``user`` sees, and the agent runs (an agent asked directly, no crew)
    that ``user`` started or whose agent it owns.

    An agent run is private: sharing a crew shares its agents, never what their owner asked
    them (before the share or after it).
    """
    qs = Run.objects.select_related("crew", "agent", "created_by", "plan")
    if is_admin(user):
        return qs
    crews = crew_visible(user=user).values("pk")
    mine = Q(created_by=user.pk) | Q(agent__owner=user.pk)
    return qs.filter(Q(crew__in=crews) | (Q(crew__isnull=True) & mine))


def run_get(*, user: Any, run_id: int, for_write: bool = False) -> Run:
    """The run if ``user`` may see it; with ``for_write`` (stop, answer, re-run) also act on it.

    Acting is for the run's creator, the owner of its crew (or agent) and admins. Someone who
    sees the run only because its crew is shared gets a 404 as a builder, a 403 as a viewer.
    """
    run = run_visible(user=user).filter(pk=run_id).first()
    if run is None:
        raise NotFound(_("No run with id %(id)s.") % {"id": run_id})
    if for_write and not run_can_write(user=user, run=run):
        if can_build(user):
            raise NotFound(_("No run with id %(id)s.") % {"id": run_id})
        raise Forbidden(_("Your role cannot change runs."))
    return run


def run_can_write(*, user: Any, run: Run) -> bool:
    """Whether ``user`` may stop, answer, approve or re-run ``run`` (pages hide the controls)."""
    if is_admin(user):
        return True
    owner_id = run.crew.owner_id if run.crew is not None else (run.agent.owner_id if run.agent else None)
    return can_build(user) and user.pk in (run.created_by_id, owner_id)


def run_list(
    *,
    user: Any,
    crew_id: int | None = None,
    status: str | None = None,
    started_by_id: int | None = None,
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[Run]:
    """The runs ``user`` sees (``run_visible``), newest first; every filter only narrows them.

    ``since`` and ``until`` are days in the current time zone, both included.
    """
    qs = run_visible(user=user)
    if crew_id is not None:
        qs = qs.filter(crew_id=crew_id)
    if status:
        qs = qs.filter(status=status)
    if started_by_id is not None:
        qs = qs.filter(created_by_id=started_by_id)
    # Compared as instants, not as ``created_at__date``: a function around the column would
    # keep the (crew, -created_at) index from serving the range. The first and last days a date
    # can be leave nothing out (and have no day before or after them to compute).
    if since is not None and since > date.min:
        qs = qs.filter(created_at__gte=_day_start(since))
    if until is not None and until < date.max:
        qs = qs.filter(created_at__lt=_day_start(until + timedelta(days=1)))
    return qs.order_by("-created_at", "-id")


def _day_start(day: date) -> datetime:
    """The first instant of ``day`` in the current time zone (the site's: nothing activates another)."""
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def run_crews(*, user: Any) -> QuerySet[Crew]:
    """The crews of the runs ``user`` sees: the only ones the history's crew filter offers."""
    return Crew.objects.filter(pk__in=run_visible(user=user).values("crew_id")).order_by("name", "pk")


def run_starters(*, user: Any, crew_id: int | None = None) -> QuerySet[Any]:
    """The people who started runs ``user`` sees (of one crew with ``crew_id``): the only ones the
    history's "started by" filter offers."""
    runs = run_visible(user=user)
    if crew_id is not None:
        runs = runs.filter(crew_id=crew_id)
    return get_user_model().objects.filter(pk__in=runs.values("created_by_id")).order_by("username", "pk")


def run_events(*, run: Run | int, after: int = 0, limit: int = 500) -> list[RunEvent]:
    """The run's stored events with ``seq > after``, oldest first, at most ``limit`` of them."""
    run_id = run if isinstance(run, int) else run.pk
    limit = max(1, min(int(limit), 1000))
    return list(RunEvent.objects.filter(run_id=run_id, seq__gt=max(0, int(after))).order_by("seq")[:limit])


# Stored events whose text the run page loads when its disclosure opens: event type -> field.
LOADED_LATER = {"step.completed": "result", "task.completed": "output"}


@dataclass(frozen=True)
class LoadedText:
    """A step's result or a task's answer, as its event stored it."""

    type: str
    task_id: int | None
    task_name: str
    step_id: str | None
    number: Any  # the step's number (``step.completed``), else None
    text: str


def run_loaded_text(*, run: Run, seq: int) -> LoadedText | None:
    """What event ``seq`` of ``run`` carries for the page to load later (``LOADED_LATER``);
    None when that event is not one of those or carries no text."""
    row = (RunEvent.objects.filter(run_id=run.pk, seq=seq, type__in=list(LOADED_LATER))
           .values_list("type", "task_id", "step_id", "data").first())
    if row is None:
        return None
    type_, task_id, step_id, data = row
    data = data if isinstance(data, dict) else {}
    text = data.get(LOADED_LATER[type_])
    if not isinstance(text, str) or not text:
        return None
    task_name = (RunTask.objects.filter(run_id=run.pk, task_id_snapshot=task_id).values_list("name", flat=True)
                 .first() if task_id is not None else None)
    return LoadedText(
        type=type_, task_id=task_id, task_name=task_name or "", step_id=step_id or data.get("step_id"),
        number=(data.get("number") or "") if type_ == "step.completed" else None, text=text,
    )


LLM_CALL_ENDS = ("llm.completed", "llm.failed")


def run_llm_call(*, run: Run, seq: int) -> RunLLMCall | None:
    """What the LLM call that event ``seq`` of ``run`` ended (its ``llm.completed`` or
    ``llm.failed``) sent and got back; None when that call was not kept (a run from before
    calls were kept). Raises ``NotFound`` when event ``seq`` ends no LLM call of the run."""
    found = RunLLMCall.objects.filter(run_id=run.pk, seq=seq).first()
    if found is None and not RunEvent.objects.filter(run_id=run.pk, seq=seq, type__in=LLM_CALL_ENDS).exists():
        raise NotFound(_("Run %(run)s has no LLM call at event %(seq)s.") % {"run": run.pk, "seq": seq})
    return found


def plan_get(*, user: Any, plan_id: int, for_write: bool = False) -> Plan:
    """The plan if ``user`` sees its crew (and may change the crew, with ``for_write``)."""
    plan = Plan.objects.select_related("crew", "llm").filter(pk=plan_id).first()
    if plan is None or not crew_visible(user=user).filter(pk=plan.crew_id).exists():
        raise NotFound(_("No plan with id %(id)s.") % {"id": plan_id})
    if for_write:
        try:
            crew_check_write(user=user, crew=plan.crew)
        except NotFound:
            raise NotFound(_("No plan with id %(id)s.") % {"id": plan_id}) from None
    return plan


def plan_versions(*, plan: Plan) -> QuerySet[PlanVersion]:
    """Every saved version of ``plan``, newest first, with its steps."""
    steps = PlanStep.objects.select_related("task").order_by(*PLAN_STEP_ORDER)
    return plan.versions.select_related("created_by").prefetch_related(
        Prefetch("steps", queryset=steps)).order_by("-number")


def plan_as_of(*, plan: Plan, number: int) -> Plan:
    """``plan`` as it read at version ``number``: a copy, never saved, whose ``version`` is it."""
    if not plan.versions.filter(number=number).exists():
        raise NotFound(_("This plan has no version %(n)s.") % {"n": number})
    shown = copy.copy(plan)
    shown.version = number
    return shown


# What changed in a run's tasks since its plan was approved --------------------------------------

# A task field whose change makes approved steps stale, and what the change is called.
PLAN_CHANGE_FIELDS = {"description": "description", "expected_output": "expected_output", "agent_id": "agent"}


def plan_changes(*, approved: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """How ``tasks`` differ from the tasks a plan version was written for (``approved``, its
    ``PlanVersion.tasks``): each as ``{task_id, name, change}``, ``change`` one of "deleted",
    "added", "description", "expected_output", "agent"; in the tasks' order, deleted ones last.

    A version that remembers no tasks (none of the crew's) tells nothing: no changes.
    """
    if not approved:
        return []
    before = {t["id"]: t for t in approved}
    now = {t["id"] for t in tasks}
    changes: list[dict[str, Any]] = []
    for task in tasks:
        old = before.get(task["id"])
        if old is None:
            changes.append({"task_id": task["id"], "name": task["name"], "change": "added"})
            continue
        changes += [{"task_id": task["id"], "name": task["name"], "change": change}
                    for field, change in PLAN_CHANGE_FIELDS.items() if old.get(field) != task.get(field)]
    changes += [{"task_id": t["id"], "name": t["name"], "change": "deleted"} for t in approved if t["id"] not in now]
    return changes


def run_with_plan_tasks(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` with the tasks of the plan version each one follows (``plan_tasks``) in the same
    query: what ``run_plan_changes`` compares, for a list of runs."""
    version = PlanVersion.objects.filter(plan=OuterRef("plan_id"), number=OuterRef("plan_version")).values("tasks")
    return runs.annotate(plan_tasks=Subquery(version[:1], output_field=JSONField()))


def run_plan_changes(*, run: Run) -> list[dict[str, Any]]:
    """Which of the run's tasks changed between the approval of the plan version it follows and
    its kickoff (``plan_changes``). The run runs its tasks as they were at kickoff, so later
    edits of the crew change nothing for it; a run without an approved plan has no changes."""
    if run.plan_id is None or run.plan_version is None:
        return []
    if "plan_tasks" in run.__dict__:  # read with ``run_with_plan_tasks``
        approved = run.plan_tasks
    else:
        approved = (PlanVersion.objects.filter(plan_id=run.plan_id, number=run.plan_version)
                    .values_list("tasks", flat=True).first())
    return plan_changes(approved=approved or [], tasks=(run.snapshot or {}).get("tasks", []))


# Plan editor and kickoff panel -------------------------------------------------------------------


def plan_list(*, crew: Crew, limit: int = 5) -> list[Plan]:
    """The crew's newest plans, for the kickoff panel (the caller has checked the crew)."""
    return list(crew.plans.select_related("created_by", "llm").order_by("-created_at", "-id")[:limit])


def plan_usage_totals(*, crew: Crew) -> dict[str, Any]:
    """What drafting the crew's plans has used so far: how many plans, tokens and US dollars."""
    totals = crew.plans.aggregate(
        plans=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"), cost=Sum("cost_usd"),
    )
    return {
        "plans": totals["plans"],
        "tokens": (totals["prompt"] or 0) + (totals["completion"] or 0),
        "cost_usd": totals["cost"] or Decimal(0),
    }


def plan_version_history(*, plan: Plan) -> QuerySet[PlanVersion]:
    """The plan's versions, newest first, with who saved each (without their steps)."""
    return plan.versions.select_related("created_by").order_by("-number")


def plan_waiting_run(*, plan: Plan) -> Run | None:
    """The run that drafted ``plan`` for itself and now waits for someone to approve it."""
    return (
        Run.objects.filter(planning_plan=plan, status=Run.Status.AWAITING_APPROVAL).order_by("-created_at").first()
    )
