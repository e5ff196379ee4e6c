"""REST operations of the crews app: crews and their tasks (plans and runs come later)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate
from ninja.responses import Status

from crews import selectors, services
from crews.schemas import (
    CrewIn,
    CrewOut,
    CrewPatch,
    TaskIn,
    TaskListOut,
    TaskOut,
    TaskPatch,
    TaskReorderIn,
)
from planner_site.apiutils import LimitOffset, api_field_names
from planner_site.schemas import errors

router = Router(tags=["crews"])

# Model field → API field, for the errors services raise.
CREW_FIELD_NAMES = {
    "manager_llm": "manager_llm_id",
    "planning_llm": "planning_llm_id",
    "agents": "agent_ids",
    "budget_max_tokens": "budget.max_tokens",
    "budget_max_cost_usd": "budget.max_cost_usd",
}
TASK_FIELD_NAMES = {"agent": "agent_id", "context": "context_task_ids"}


# Crews -----------------------------------------------------------------------------------------


@router.get("/crews", response=list[CrewOut], summary="List crews")
@paginate(LimitOffset)
def crew_list(request: HttpRequest) -> Any:
    return selectors.crew_list(user=request.user).prefetch_related("agents")


@router.post("/crews", response={201: CrewOut, **errors(422)}, summary="Create a crew")
def crew_create(request: HttpRequest, payload: CrewIn) -> Any:
    with api_field_names(CREW_FIELD_NAMES):
        crew = services.crew_create(actor=request.user, **payload.service_fields())
    return Status(201, crew)


@router.get("/crews/{id}", response={200: CrewOut, **errors(404)})
def crew_get(request: HttpRequest, id: int) -> Any:
    return selectors.crew_get(user=request.user, crew_id=id)


@router.patch("/crews/{id}", response={200: CrewOut, **errors(404, 422)}, summary="Change a crew")
def crew_update(request: HttpRequest, id: int, payload: CrewPatch) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    with api_field_names(CREW_FIELD_NAMES):
        return services.crew_update(actor=request.user, crew=crew, **payload.service_fields())


@router.delete("/crews/{id}", response={204: None, **errors(404)})
def crew_delete(request: HttpRequest, id: int) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    services.crew_delete(actor=request.user, crew=crew)
    return Status(204, None)


# Tasks -----------------------------------------------------------------------------------------


@router.get("/crews/{id}/tasks", response=list[TaskOut], tags=["tasks"])
@paginate(LimitOffset)
def task_list(request: HttpRequest, id: int) -> Any:
    return selectors.crew_tasks(crew=selectors.crew_get(user=request.user, crew_id=id))


@router.post(
    "/crews/{id}/tasks",
    response={201: TaskOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Add a task at the end of the crew",
)
def task_create(request: HttpRequest, id: int, payload: TaskIn) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    with api_field_names(TASK_FIELD_NAMES):
        task = services.task_create(actor=request.user, crew=crew, **payload.service_fields())
    return Status(201, task)


@router.post(
    "/crews/{id}/tasks/reorder",
    response={200: TaskListOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Put the crew's tasks in a new order",
    description="Name every task once; a task must stay after the tasks whose output it uses.",
)
def task_reorder(request: HttpRequest, id: int, payload: TaskReorderIn) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    tasks = services.task_reorder(actor=request.user, crew=crew, task_ids=payload.task_ids)
    return {"items": tasks, "count": len(tasks)}


@router.get("/tasks/{id}", response={200: TaskOut, **errors(404)}, tags=["tasks"])
def task_get(request: HttpRequest, id: int) -> Any:
    return selectors.task_get(user=request.user, task_id=id)


@router.patch(
    "/tasks/{id}",
    response={200: TaskOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Change a task",
)
def task_update(request: HttpRequest, id: int, payload: TaskPatch) -> Any:
    task = selectors.task_get(user=request.user, task_id=id, for_write=True)
    with api_field_names(TASK_FIELD_NAMES):
        return services.task_update(actor=request.user, task=task, **payload.service_fields())


@router.delete("/tasks/{id}", response={204: None, **errors(404)}, tags=["tasks"])
def task_delete(request: HttpRequest, id: int) -> Any:
    task = selectors.task_get(user=request.user, task_id=id, for_write=True)
    services.task_delete(actor=request.user, task=task)
    return Status(204, None)
