"""Plan pages: the kickoff panel's draft, the visual plan editor and its fragments, approving,
regenerating, versions and their differences. The step edits are in ``plan_editor``; what both
share (the editor's context, errors, answers) in ``plan_context``.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from agents import selectors as agent_selectors
from agents.views import HtmxHttpRequest, domain_errors, redirect_after_post
from crews import plans, runs, selectors
from crews.forms_plans import KickoffForm
from crews.models import Crew, Plan
from crews.plan_diff import diff_versions
from crews.views.plan_context import (
    EDIT_ERRORS,
    TEMPLATE,
    editor_context,
    editor_saved,
    error_message,
    error_status,
    posted_version,
    run_url,
    section_in,
    step_in,
    to_int,
    undo_notes,
)
from crews.views.plan_editor import (
    plan_step_create,
    plan_step_delete,
    plan_step_move,
    plan_step_pin,
    plan_step_undelete,
    plan_step_update,
    plan_task_regenerate,
    plan_task_reorder,
)
from planner_site.errors import Conflict, TooMany

__all__ = ["diff_versions", "kickoff_context", "urlpatterns"]


# Kickoff panel (on the crew page) ------------------------------------------------------------


def kickoff_context(request: HtmxHttpRequest, crew: Crew, *, form: KickoffForm | None = None) -> dict[str, Any]:
    """What the crew page's kickoff panel shows: the inputs form, who plans, plans and runs."""
    names = selectors.crew_input_names(crew=crew)
    return {
        "kickoff_form": form or KickoffForm(names=names, defaults=crew.default_inputs),
        "can_run": selectors.crew_can_write(user=request.user, crew=crew),
        "planning_llm": crew.planning_llm or agent_selectors.llm_default(),
        "planning_usage": selectors.plan_usage_totals(crew=crew),
        "latest_plans": selectors.plan_list(crew=crew),
        "recent_runs": list(selectors.run_list(user=request.user, crew_id=crew.pk)[:5]),
    }


@require_http_methods(["GET", "POST"])
@domain_errors
def crew_kickoff(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    """Draft plan (then edit it) or Run now, from the crew's inputs.

    The panel lives on the crew page; this URL is its form's target, and its page is where a
    plain form's errors land. With htmx, errors replace the panel in place.
    """
    crew = selectors.crew_get(user=request.user, crew_id=crew_id, for_write=request.method == "POST")
    names = selectors.crew_input_names(crew=crew)
    form = KickoffForm(request.POST if request.method == "POST" else None, names=names, defaults=crew.default_inputs)
    status = 200
    if request.method == "POST" and form.is_valid():
        action = request.POST.get("action", "draft")
        try:
            if action == "run":
                run = runs.run_kickoff(actor=request.user, crew=crew, inputs=form.inputs())
            else:
                plan = plans.plan_draft(actor=request.user, crew=crew, inputs=form.inputs())
        except (ValidationError, TooMany) as exc:
            status = error_status(exc)
            if isinstance(exc, ValidationError):
                form.add_service_errors(exc)
            else:
                form.add_error(None, exc.detail)
        else:
            if action == "run":
                return redirect_after_post(request, run_url(run))
            return redirect_after_post(request, reverse("crews:plan-detail", args=[plan.pk]))
    context = {"crew": crew, **kickoff_context(request, crew, form=form)}
    if request.htmx:
        return render(request, "crews/_kickoff.html", context)  # 200: htmx swaps it in place
    return render(request, "crews/plan_kickoff.html", context, status=status if form.is_bound else 200)



# The editor page and its fragments -------------------------------------------------------------


@require_GET
@domain_errors
def plan_detail(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """The editor. htmx asks for pieces of it: ``?task=`` one task's section (polled while it
    regenerates), ``?step=`` one step's card (Cancel), otherwise the whole editor (polled while
    the plan is being drafted)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id)
    notes: dict[int, dict[str, Any]] = {}
    undo_uid, deleted_in = to_int(request.GET.get("undo")), to_int(request.GET.get("deleted_in"))
    if undo_uid and deleted_in:
        notes = undo_notes(plan, undo_uid, deleted_in)
    if not request.htmx:
        return render(request, TEMPLATE, editor_context(request, plan, notes=notes))
    task_id, uid = to_int(request.GET.get("task")), to_int(request.GET.get("step"))
    if task_id is not None and task_id in (plan.regenerating_task_ids or ()):
        # Polled every second while it regenerates: answered from the plan alone, without the
        # editor's context (its steps, its versions list), which the 204 would throw away.
        return HttpResponse(status=204)  # htmx swaps nothing and asks again in a second
    # A task's section needs only that task's steps.
    context = editor_context(request, plan, notes=notes, task_id=task_id)
    if task_id is not None:
        context["section"] = section = section_in(context, task_id)
        # Done: say so, and bring the new version and the history along.
        # A worker stored the error in English; the app's own messages have a translation.
        error = _(plan.error) if plan.error else ""
        context["save_status"] = error or _("New steps for “%(task)s”.") % {"task": section.task.name}
        section.error = error
        return render(request, f"{TEMPLATE}#task-poll", context)
    if uid is not None:
        for section in context["sections"]:
            if step := step_in(section, uid):
                context.update(section=section, step=step)
                return render(request, f"{TEMPLATE}#step-card", context)
        raise Http404(_("This step is no longer in the plan."))
    if request.GET.get("poll"):
        if context["generating"]:
            return HttpResponse(status=204)
        context["save_status"] = (
            _("Drafting failed.") if plan.status == Plan.Status.FAILED
            else _("The plan is ready: %(n)s steps.") % {"n": context["step_count"]}
        )
    return render(request, f"{TEMPLATE}#editor-update", context)



# Whole-plan actions and versions ----------------------------------------------------------------


@require_POST
@domain_errors
def plan_regenerate(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """Draft a fresh plan with the same inputs (also Try again after a failure) and open it."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    try:
        fresh = plans.plan_draft(actor=request.user, crew=plan.crew, inputs=plan.inputs)
    except (ValidationError, TooMany) as exc:
        return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
    return redirect_after_post(request, reverse("crews:plan-detail", args=[fresh.pk]))


@require_POST
@domain_errors
def plan_approve(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """Approve & run: approve the version on screen and start the crew with it. When a run
    drafted this plan and waits for it, Approve & continue lets that run go on instead."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    waiting = selectors.plan_waiting_run(plan=plan)
    version = posted_version(request)
    try:
        with transaction.atomic():  # a kickoff that fails leaves the plan as it was
            if version is None:
                raise ValidationError({"version": _("Reload the plan: the form did not say which version you saw.")})
            if waiting is not None:
                plans.plan_approve(actor=request.user, plan=plan, version=version, supersede=False)
                runs.run_approve_plan(actor=request.user, run=waiting)
                run = waiting
            else:
                approved = plans.plan_approve(actor=request.user, plan=plan, version=version)
                run = runs.run_kickoff(actor=request.user, crew=plan.crew, inputs=plan.inputs, plan=approved)
    except EDIT_ERRORS as exc:
        return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
    return redirect_after_post(request, run_url(run))


@require_GET
@domain_errors
def plan_diff(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """What changed between versions ``?from=`` and ``?to=`` (default: the last edit)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id)
    to = to_int(request.GET.get("to")) or plan.version
    start = to_int(request.GET.get("from"))
    start = max(to - 1, 1) if start is None else start
    context = editor_context(request, plan, diff_from=start, diff_to=to)
    if start not in context["version_numbers"] or to not in context["version_numbers"]:
        context["diff_error"] = _("Choose two versions this plan has (1 to %(n)s).") % {"n": plan.version}
    else:
        diff = diff_versions(plans.version_steps(plan, start), plans.version_steps(plan, to),
                         [s.task.pk for s in context["sections"]])
        names = {s.task.pk: s.task.name for s in context["sections"]}
        context["diff"] = diff
        context["diff_tasks"] = [(names.get(t.task_id, _("A deleted task")), t) for t in diff.tasks]
    if request.htmx:
        return render(request, f"{TEMPLATE}#plan-diff", context)
    return render(request, TEMPLATE, context)


@require_POST
@domain_errors
def plan_version_restore(request: HtmxHttpRequest, plan_id: int, number: int) -> HttpResponse:
    """Restore version ``number``: its steps become the newest version (nothing is lost)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    try:
        if posted_version(request) != plan.version:
            raise Conflict(_("This plan changed elsewhere (now version %(now)s): reload it before restoring.")
                           % {"now": plan.version}, code="stale_version")
        plan = plans.plan_restore(actor=request.user, plan=plan, number=number)
    except EDIT_ERRORS as exc:
        return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
    return editor_saved(request, plan, _("Version %(old)s restored as version %(n)s.") % {"old": number, "n": plan.version})



urlpatterns = [
    path("crews/<int:crew_id>/kickoff/", crew_kickoff, name="crew-kickoff"),
    path("plans/<int:plan_id>/", plan_detail, name="plan-detail"),
    path("plans/<int:plan_id>/approve/", plan_approve, name="plan-approve"),
    path("plans/<int:plan_id>/regenerate/", plan_regenerate, name="plan-regenerate"),
    path("plans/<int:plan_id>/diff/", plan_diff, name="plan-diff"),
    path("plans/<int:plan_id>/versions/<int:number>/restore/", plan_version_restore, name="plan-version-restore"),
    path("plans/<int:plan_id>/tasks/<int:task_id>/steps/", plan_step_create, name="plan-step-create"),
    path("plans/<int:plan_id>/tasks/<int:task_id>/reorder/", plan_task_reorder, name="plan-task-reorder"),
    path("plans/<int:plan_id>/tasks/<int:task_id>/regenerate/", plan_task_regenerate, name="plan-task-regenerate"),
    path("plans/<int:plan_id>/steps/<int:uid>/", plan_step_update, name="plan-step-update"),
    path("plans/<int:plan_id>/steps/<int:uid>/delete/", plan_step_delete, name="plan-step-delete"),
    path("plans/<int:plan_id>/steps/<int:uid>/undo-delete/", plan_step_undelete, name="plan-step-undelete"),
    path("plans/<int:plan_id>/steps/<int:uid>/move/", plan_step_move, name="plan-step-move"),
    path("plans/<int:plan_id>/steps/<int:uid>/pin/", plan_step_pin, name="plan-step-pin"),
]

