"""Reads of the crews app, including who may see what (another user's crew is a 404)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, Q, QuerySet
from django.utils.translation import gettext as _

from crews.engine.interpolate import find_placeholders
from crews.models import Crew, Task
from planner_site.errors import Forbidden, NotFound
from planner_site.roles import can_build, is_admin


def crew_visible(*, user: Any) -> QuerySet[Crew]:
    qs = Crew.objects.select_related("owner", "planning_llm", "manager_llm")
    if is_admin(user):
        return qs
    return qs.filter(Q(owner=user) | Q(shared=True))


def crew_list(*, user: Any) -> QuerySet[Crew]:
    return crew_visible(user=user).order_by("name", "id")


def crew_get(*, user: Any, crew_id: int, for_write: bool = False) -> Crew:
    """The crew if ``user`` may see it (and change it, with ``for_write``); else NotFound."""
    crew = (
        crew_visible(user=user)
        .prefetch_related(
            "agents",
            Prefetch("tasks", queryset=Task.objects.select_related("agent").prefetch_related("context")),
        )
        .filter(pk=crew_id)
        .first()
    )
    if crew is None:
        raise NotFound(_("No crew with id %(id)s.") % {"id": crew_id})
    if for_write:
        crew_check_write(user=user, crew=crew)
    return crew


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


def crew_tasks(*, crew: Crew) -> list[Task]:
    return list(crew.tasks.select_related("agent").prefetch_related("context").order_by("order", "id"))


def crew_input_names(*, crew: Crew) -> list[str]:
    """Placeholders ``{name}`` in the agents' role/goal/backstory and the tasks' texts."""
    texts: list[str] = []
    tasks = crew_tasks(crew=crew)
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
