"""Downloads of a run task's structured answer (issue #18): the JSON as it was validated, and the
same as CSV (one row per object of a list; nested values as JSON text)."""

# No ``from __future__ import annotations``: ninja reads the operations' annotations.
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from ninja import Router

from crews import selectors
from crews.models import RunTask
from crews.output_table import as_csv, as_json
from planner_site.errors import NotFound
from planner_site.schemas import errors

router = Router(tags=["runs"])


def _output_json(request: HttpRequest, run_id: int, task_id: int) -> Any:
    run = selectors.run_get(user=request.user, run_id=run_id)
    found = RunTask.objects.filter(run=run, task_id_snapshot=task_id).values_list("output_json", flat=True).first()
    if found is None:
        raise NotFound(_("Task %(task)s of run %(run)s has no JSON output.") % {"task": task_id, "run": run_id})
    return found


def _download(body: str, content_type: str, name: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@router.get(
    "/runs/{id}/tasks/{task_id}/output.json",
    response={200: None, **errors(401, 404)},
    summary="Download a task's JSON output",
    openapi_extra={"responses": {200: {"description": "The answer as JSON.",
                                       "content": {"application/json": {"schema": {}}}}}},
)
def run_task_output_json(request: HttpRequest, id: int, task_id: int) -> HttpResponse:
    value = _output_json(request, id, task_id)
    return _download(as_json(value), "application/json", f"run-{id}-task-{task_id}.json")


@router.get(
    "/runs/{id}/tasks/{task_id}/output.csv",
    response={200: None, **errors(401, 404)},
    summary="Download a task's JSON output as CSV",
    openapi_extra={"responses": {200: {"description": "One row per object of a list, or one row.",
                                       "content": {"text/csv": {"schema": {"type": "string"}}}}}},
)
def run_task_output_csv(request: HttpRequest, id: int, task_id: int) -> HttpResponse:
    value = _output_json(request, id, task_id)
    return _download(as_csv(value), "text/csv; charset=utf-8", f"run-{id}-task-{task_id}.csv")
