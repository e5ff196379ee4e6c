"""Crew and task pages: list, detail, create, edit, delete crews; add, edit, move, delete tasks."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents import selectors as agent_selectors
from agents.views import (
    HtmxHttpRequest,
    confirm_delete,
    domain_errors,
    redirect_after_post,
    require_builder,
)
from crews import selectors, services
from crews.diagram import crew_diagram, manager_label
from crews.forms import CrewForm, TaskForm
from crews.models import Crew
from crews.views.plans import kickoff_context
from planner_site.roles import can_build


def _detail_url(crew: Crew, anchor: str = "") -> str:
    return reverse("crews:crew-detail", args=[crew.pk]) + (f"#{anchor}" if anchor else "")


def _input_rows(crew: Crew) -> list[dict[str, Any]]:
    """The crew's discovered input names with their default values, for display."""
    defaults = crew.default_inputs or {}
    rows = []
    for name in selectors.crew_input_names(crew=crew):
        value = defaults.get(name)
        if value is not None and not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False)
        rows.append({"name": name, "value": value})
    return rows


def _task_list_context(request: HtmxHttpRequest, crew: Crew) -> dict[str, Any]:
    tasks = selectors.crew_tasks(crew=crew)
    return {
        "crew": crew,
        "tasks": tasks,
        "can_edit": selectors.crew_can_write(user=request.user, crew=crew),
        # Drawn with the task list, so a task added, moved or deleted redraws it too.
        "diagram": crew_diagram(tasks, manager=manager_label(crew)),
    }


# Crews ---------------------------------------------------------------------------------------


@require_GET
@domain_errors
def crew_list(request: HtmxHttpRequest) -> HttpResponse:
    crews = selectors.crew_list(user=request.user)
    return render(
        request, "crews/crew_list.html", {"crews": crews, "can_create": can_build(request.user)}
    )


@require_GET
@domain_errors
def crew_detail(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = selectors.crew_get(user=request.user, crew_id=crew_id)
    inputs = _input_rows(crew)
    used = {row["name"] for row in inputs}
    unused = sorted(name for name in (crew.default_inputs or {}) if name not in used)
    context = {**_task_list_context(request, crew), "inputs": inputs, "unused_inputs": unused}
    template = "crews/crew_detail.html"
    if request.htmx:
        template += "#task-list"
    else:
        context.update(kickoff_context(request, crew))
    return render(request, template, context)


def _crew_form_response(
    request: HtmxHttpRequest, form: CrewForm, *, crew: Crew | None = None
) -> HttpResponse:
    template = "crews/crew_form.html"
    if request.htmx:
        template += "#crew-form"
    return render(request, template, {"form": form, "crew": crew})


@require_http_methods(["GET", "POST"])
@domain_errors
def crew_create(request: HtmxHttpRequest) -> HttpResponse:
    require_builder(request)
    form = CrewForm(
        request.POST if request.method == "POST" else None,
        agents=agent_selectors.agent_choices(owner=request.user),
        llms=agent_selectors.llm_list(),
    )
    if request.method == "POST" and form.is_valid():
        try:
            crew = services.crew_create(actor=request.user, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Crew “%(name)s” created.") % {"name": crew.name})
            return redirect_after_post(request, _detail_url(crew))
    return _crew_form_response(request, form)


@require_http_methods(["GET", "POST"])
@domain_errors
def crew_update(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = selectors.crew_get(user=request.user, crew_id=crew_id, for_write=True)
    form = CrewForm(
        request.POST if request.method == "POST" else None,
        agents=agent_selectors.agent_choices(owner=crew.owner),
        llms=agent_selectors.llm_list(),
        crew=crew,
        input_names=selectors.crew_input_names(crew=crew),
    )
    if request.method == "POST" and form.is_valid():
        try:
            crew = services.crew_update(actor=request.user, crew=crew, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Crew “%(name)s” saved.") % {"name": crew.name})
            return redirect_after_post(request, _detail_url(crew))
    return _crew_form_response(request, form, crew=crew)


@require_http_methods(["GET", "POST"])
@domain_errors
def crew_delete(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = selectors.crew_get(user=request.user, crew_id=crew_id, for_write=True)
    return confirm_delete(
        request,
        template="crews/crew_confirm_delete.html",
        context={"crew": crew},
        delete=lambda: services.crew_delete(actor=request.user, crew=crew),
        done_message=_("Crew “%(name)s” deleted.") % {"name": crew.name},
        done_url=reverse("crews:crew-list"),
    )


# Tasks ---------------------------------------------------------------------------------------


def _task_form_response(
    request: HtmxHttpRequest, form: TaskForm, *, crew: Crew, task: Any = None
) -> HttpResponse:
    template = "crews/task_form.html"
    if request.htmx:
        template += "#task-form"
    return render(request, template, {"form": form, "crew": crew, "task": task})


@require_http_methods(["GET", "POST"])
@domain_errors
def task_create(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = selectors.crew_get(user=request.user, crew_id=crew_id, for_write=True)
    form = TaskForm(
        request.POST if request.method == "POST" else None,
        agents=agent_selectors.agent_choices(owner=crew.owner),
        earlier_tasks=selectors.task_context_choices(crew=crew),
    )
    if request.method == "POST" and form.is_valid():
        try:
            task = services.task_create(actor=request.user, crew=crew, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Task “%(name)s” added.") % {"name": task.name})
            return redirect_after_post(request, _detail_url(crew, f"task-{task.pk}"))
    return _task_form_response(request, form, crew=crew)


@require_http_methods(["GET", "POST"])
@domain_errors
def task_update(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    task = selectors.task_get(user=request.user, task_id=task_id, for_write=True)
    crew = task.crew
    form = TaskForm(
        request.POST if request.method == "POST" else None,
        agents=agent_selectors.agent_choices(owner=crew.owner),
        earlier_tasks=selectors.task_context_choices(crew=crew, task=task),
        task=task,
    )
    if request.method == "POST" and form.is_valid():
        try:
            task = services.task_update(actor=request.user, task=task, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Task “%(name)s” saved.") % {"name": task.name})
            return redirect_after_post(request, _detail_url(crew, f"task-{task.pk}"))
    return _task_form_response(request, form, crew=crew, task=task)


@require_http_methods(["GET", "POST"])
@domain_errors
def task_delete(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    task = selectors.task_get(user=request.user, task_id=task_id, for_write=True)
    if request.method == "POST":
        services.task_delete(actor=request.user, task=task)
        messages.success(request, _("Task “%(name)s” deleted.") % {"name": task.name})
        return redirect_after_post(request, _detail_url(task.crew, "tasks"))
    template = "crews/task_confirm_delete.html"
    if request.htmx:
        template += "#delete-confirm"
    return render(request, template, {"task": task, "crew": task.crew})


@require_POST
@domain_errors
def task_move(request: HtmxHttpRequest, task_id: int) -> HttpResponse:
    """Up or down by one. htmx swaps the task list; a plain form goes back to the crew page."""
    task = selectors.task_get(user=request.user, task_id=task_id, for_write=True)
    offset = {"up": -1, "down": 1}.get(request.POST.get("direction", ""))
    error = status = ""
    if offset is None:
        error = _("Choose up or down.")
    else:
        try:
            services.task_move(actor=request.user, task=task, offset=offset)
        except ValidationError as exc:
            error = " ".join(exc.messages)
        else:
            status = (_("“%(name)s” moved up.") if offset < 0 else _("“%(name)s” moved down.")) % {
                "name": task.name
            }
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, status)
        return redirect_after_post(request, _detail_url(task.crew, f"task-{task.pk}"))
    context = {**_task_list_context(request, task.crew), "move_error": error, "move_status": status}
    return render(request, "crews/crew_detail.html#task-list", context)
