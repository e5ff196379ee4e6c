"""Writes of the crews app: crews and their tasks (plans and runs live in their own modules)."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils.translation import gettext as _

from agents.models import Agent
from crews.engine.interpolate import find_placeholders, missing_inputs
from crews.models import Crew, Task
from crews.task_checks import clean_task_checks
from planner_site.body_checks import MAX_INPUT_KEYS, BodyRefused, check_text_ceilings, check_value
from planner_site.errors import Forbidden
from planner_site.roles import can_build

_UNSET: Any = object()
CREW_FIELDS = (
    "name", "description", "process", "manager_llm", "manager_llm_id", "planning", "planning_llm",
    "planning_llm_id", "review_plan",
    "run_without_plan_on_failure", "on_step_failure", "max_rpm", "budget_max_tokens", "budget_max_cost_usd",
    "default_inputs", "shared", "memory",
)
TASK_FIELDS = (
    "name", "description", "expected_output", "agent", "agent_id", "async_execution", "human_input",
    "output_schema", "guardrails", "guardrail_max_retries",
)
_INPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
logger = logging.getLogger(__name__)


def _input_size(value: Any) -> int:
    """An input value's length as a prompt sees it (JSON for anything but text); -1 if not JSON."""
    try:
        return len(value) if isinstance(value, str) else len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return -1


def _require_builder(actor: Any) -> None:
    if not can_build(actor):
        raise Forbidden(_("Your role cannot create or change agents and crews."))


def _validate_crew(crew: Crew) -> None:
    errors: dict[str, str] = {}
    inputs = crew.default_inputs
    if not isinstance(inputs, dict):
        errors["default_inputs"] = _("Default inputs must be an object of name: value.")
    else:
        bad = [k for k in inputs if not _INPUT_NAME.match(k)]
        too_long = [k for k, v in inputs.items() if _input_size(v) > MAX_INPUT_CHARS]
        if bad:
            errors["default_inputs"] = _("%(name)s is not a valid input name (letters, digits, _ and -).") % {
                "name": bad[0]
            }
        elif len(inputs) > MAX_INPUT_KEYS:
            errors["default_inputs"] = _("At most %(n)s inputs.") % {"n": MAX_INPUT_KEYS}
        elif too_long:
            errors[f"default_inputs.{too_long[0]}"] = _(
                "This value is too long (at most %(n)s characters)."
            ) % {"n": MAX_INPUT_CHARS}
        else:
            try:
                check_value(inputs, field="default_inputs")
            except BodyRefused as exc:
                errors[exc.field] = exc.message
    if crew.process == Crew.Process.HIERARCHICAL and not crew.manager_llm_id:
        errors["manager_llm"] = _("A hierarchical crew needs a manager LLM.")
    if errors:
        raise ValidationError(errors)


def _save_crew(crew: Crew) -> None:
    crew.full_clean(exclude=["owner"])
    check_text_ceilings(crew)
    _validate_crew(crew)
    try:
        with transaction.atomic():
            crew.save()
    except IntegrityError as exc:
        # Only the owner's unique name is that sentence; anything else is said for what it is.
        taken = Crew.objects.filter(owner_id=crew.owner_id, name=crew.name).exclude(pk=crew.pk).exists()
        if taken:
            raise ValidationError({"name": _("You already have a crew with this name.")}) from None
        logger.warning("A crew could not be stored: %s", exc)
        raise ValidationError(_("The database refused these values; nothing was saved.")) from None


def _owned_agents(crew: Crew, agents: Sequence[Agent | int]) -> list[Agent]:
    ids = [a.pk if isinstance(a, Agent) else int(a) for a in agents]
    found = {a.pk: a for a in Agent.objects.filter(pk__in=ids, owner_id=crew.owner_id)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise ValidationError({"agent_ids": _("Unknown agent %(id)s.") % {"id": missing[0]}})
    return [found[i] for i in ids]


@transaction.atomic
def crew_create(*, actor: Any, agents: Sequence[Agent | int] = (), **fields: Any) -> Crew:
    """Builders create crews they own, from their own agents."""
    _require_builder(actor)
    crew = Crew(owner=actor, **{k: v for k, v in fields.items() if k in CREW_FIELDS})
    _save_crew(crew)
    crew.agents.set(_owned_agents(crew, agents))
    return crew


@transaction.atomic
def crew_update(*, actor: Any, crew: Crew, agents: Sequence[Agent | int] | None = None, **fields: Any) -> Crew:
    """An agent still assigned to a task cannot be removed from the crew."""
    _require_builder(actor)
    for key, value in fields.items():
        if key in CREW_FIELDS:
            setattr(crew, key, value)
    _save_crew(crew)
    if agents is not None:
        chosen = _owned_agents(crew, agents)
        used = set(crew.tasks.exclude(agent=None).values_list("agent_id", flat=True))
        dropped = used - {a.pk for a in chosen}
        if dropped:
            name = Agent.objects.get(pk=min(dropped)).name
            raise ValidationError(
                {"agent_ids": _("%(name)s still does a task of this crew.") % {"name": name}}
            )
        crew.agents.set(chosen)
    return crew


def crew_delete(*, actor: Any, crew: Crew) -> None:
    """A crew goes with its tasks, plans and runs; not while one of its runs works (a
    ``Conflict`` naming it, from ``crews.runs.run_guard_delete``)."""
    _require_builder(actor)
    with transaction.atomic():  # a refusal rolls back to here, not the caller's transaction
        crew.delete()


# Tasks ---------------------------------------------------------------------------------------


def _validate_context(task: Task, context: Sequence[Task | int]) -> list[Task]:
    """Context may only name earlier tasks of the same crew, so there can be no cycle."""
    ids = [t.pk if isinstance(t, Task) else int(t) for t in context]
    if task.pk is not None and task.pk in ids:
        raise ValidationError({"context_task_ids": _("A task cannot use its own output.")})
    found = {t.pk: t for t in Task.objects.filter(pk__in=ids, crew_id=task.crew_id)}
    for task_id in ids:
        other = found.get(task_id)
        if other is None:
            raise ValidationError(
                {"context_task_ids": _("Task %(id)s is not part of this crew.") % {"id": task_id}}
            )
        if (other.order, other.pk) >= (task.order, task.pk or 10**18):
            raise ValidationError(
                {"context_task_ids": _("%(name)s comes after this task; only earlier tasks can be used.")
                 % {"name": other.name}}
            )
    return [found[i] for i in ids]


def _attach_agent(task: Task) -> None:
    if task.agent_id is None:
        return
    agent = Agent.objects.filter(pk=task.agent_id, owner_id=task.crew.owner_id).first()
    if agent is None:
        raise ValidationError({"agent_id": _("Unknown agent %(id)s.") % {"id": task.agent_id}})
    # Assigning an agent to a task makes it a member of the crew, as a user would expect.
    task.crew.agents.add(agent)


@transaction.atomic
def task_create(*, actor: Any, crew: Crew, context: Sequence[Task | int] = (), **fields: Any) -> Task:
    """New tasks go last; their context may only use earlier tasks."""
    _require_builder(actor)
    last = crew.tasks.aggregate(m=Max("order"))["m"]
    task = Task(crew=crew, order=(last + 1) if last is not None else 0)
    for key, value in fields.items():
        if key in TASK_FIELDS:
            setattr(task, key, value)
    clean_task_checks(task)
    task.full_clean(exclude=["crew"])
    check_text_ceilings(task)
    _attach_agent(task)
    chosen = _validate_context(task, context)
    task.save()
    task.context.set(chosen)
    return task


@transaction.atomic
def task_update(*, actor: Any, task: Task, context: Sequence[Task | int] | None = None, **fields: Any) -> Task:
    _require_builder(actor)
    for key, value in fields.items():
        if key in TASK_FIELDS:
            setattr(task, key, value)
    clean_task_checks(task)
    task.full_clean(exclude=["crew"])
    check_text_ceilings(task)
    _attach_agent(task)
    if context is not None:
        task.context.set(_validate_context(task, context))
    task.save()
    return task


@transaction.atomic
def task_delete(*, actor: Any, task: Task) -> None:
    _require_builder(actor)
    crew = task.crew
    task.delete()
    for index, remaining in enumerate(crew.tasks.order_by("order", "id")):
        if remaining.order != index:
            Task.objects.filter(pk=remaining.pk).update(order=index)


@transaction.atomic
def task_reorder(*, actor: Any, crew: Crew, task_ids: Sequence[int]) -> list[Task]:
    """The new order must name every task once and keep each task after the tasks it uses."""
    _require_builder(actor)
    tasks = {t.pk: t for t in crew.tasks.prefetch_related("context")}
    if sorted(task_ids) != sorted(tasks) or len(set(task_ids)) != len(task_ids):
        raise ValidationError({"task_ids": _("Give every task of this crew exactly once.")})
    position = {task_id: index for index, task_id in enumerate(task_ids)}
    for task in tasks.values():
        for used in task.context.all():
            if position[used.pk] > position[task.pk]:
                raise ValidationError(
                    {"task_ids": _("%(task)s uses the output of %(used)s, which would come after it.")
                     % {"task": task.name, "used": used.name}}
                )
    for task_id, index in position.items():
        Task.objects.filter(pk=task_id).update(order=index)
        tasks[task_id].order = index
    return sorted(tasks.values(), key=lambda t: position[t.pk])


@transaction.atomic
def task_move(*, actor: Any, task: Task, offset: int) -> list[Task]:
    """Swap a task with its neighbour (``offset`` -1 up, +1 down); the reorder rules still apply.

    Moving the first task up or the last one down changes nothing.
    """
    ids = list(task.crew.tasks.order_by("order", "id").values_list("pk", flat=True))
    here = ids.index(task.pk)
    there = here + offset
    if 0 <= there < len(ids):
        ids[here], ids[there] = ids[there], ids[here]
    return task_reorder(actor=actor, crew=task.crew, task_ids=ids)


# Running a crew -------------------------------------------------------------------------------

MAX_INPUT_CHARS = 20_000


def inputs_validate(*, crew: Crew, inputs: Any, texts: list[str]) -> dict[str, Any]:
    """Crew defaults overlaid with ``inputs``; every placeholder filled, values scalars or JSON."""
    if not isinstance(inputs, dict):
        raise ValidationError({"inputs": _("Inputs must be an object of name: value.")})
    merged = {**(crew.default_inputs or {}), **inputs}
    errors: dict[str, str] = {}
    for name, value in merged.items():
        try:
            size = len(value) if isinstance(value, str) else len(json.dumps(value))
        except (TypeError, ValueError):
            errors[f"inputs.{name}"] = _("This value is not text, a number or JSON.")
            continue
        if size > MAX_INPUT_CHARS:
            errors[f"inputs.{name}"] = _("This value is too long (at most %(n)s characters).") % {"n": MAX_INPUT_CHARS}
    for name in missing_inputs(texts, merged):
        errors[f"inputs.{name}"] = _("Give a value for {%(name)s}.") % {"name": name}
    if errors:
        raise ValidationError(errors)
    wanted = set(find_placeholders(texts))
    return {k: v for k, v in merged.items() if k in wanted or k in inputs}


def crew_texts(snapshot: dict[str, Any]) -> list[str]:
    texts: list[str] = []
    for agent in snapshot["agents"]:
        texts += [agent["role"], agent["goal"], agent["backstory"]]
    for task in snapshot["tasks"]:
        texts += [task["description"], task["expected_output"]]
    return texts


def crew_check_runnable(*, crew: Crew, snapshot: dict[str, Any]) -> None:
    if not snapshot["tasks"]:
        raise ValidationError({"tasks": _("Add a task before running this crew.")})
    if crew.process == Crew.Process.HIERARCHICAL:
        if not crew.manager_llm_id:
            raise ValidationError({"manager_llm_id": _("A hierarchical crew needs a manager LLM.")})
        if not snapshot["agents"]:
            raise ValidationError({"agent_ids": _("A hierarchical crew needs at least one agent.")})
    else:
        for task in snapshot["tasks"]:
            if task["agent_id"] is None:
                raise ValidationError({"tasks": _("Task %(name)s has no agent.") % {"name": task["name"]}})
