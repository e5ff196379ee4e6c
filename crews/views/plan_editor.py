"""The plan editor's step edits: edit, add, delete and undo, move, pin, reorder after a drag and
drop, and regenerate one task. Each saves through ``plans.plan_update`` (or the service for its
action) and answers with the task's section or the step's card (``crews.views.plan_context``).
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from agents.views import HtmxHttpRequest, domain_errors
from crews import plans, selectors
from crews.models import Plan, Task
from crews.plan_view import StepRow
from crews.views.plan_context import (
    EDIT_ERRORS,
    EDITABLE,
    TEMPLATE,
    editor_context,
    editor_saved,
    error_message,
    error_status,
    find_step,
    is_stale,
    plan_task,
    posted_version,
    remember_undo,
    save_task,
    section_in,
    step_in,
    task_error,
    task_rows,
    task_saved,
    to_int,
    undo_notes,
)
from planner_site.errors import Conflict


@require_http_methods(["GET", "POST"])
@domain_errors
def plan_step_update(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """GET: the step's edit form (htmx) or the editor with it open. POST: save its text."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    if request.method == "GET":
        context = editor_context(request, plan, editing=uid)
        for section in context["sections"]:
            if step := step_in(section, uid):
                context.update(section=section, step=step, edit_text=step.text)
                if request.htmx:
                    return render(request, f"{TEMPLATE}#step-form", context)
                return render(request, TEMPLATE, context)
        raise Http404(_("This step is no longer in the plan."))
    text = request.POST.get("text", "")
    try:
        task_id, rows, index = find_step(plan, uid)
        if text.strip() == rows[index]["text"]:
            status_text = _("No changes.")
        else:
            rows[index]["text"] = text
            plan = save_task(request, plan, task_id, rows, "edited a step")
            status_text = _("Saved: version %(n)s.") % {"n": plan.version}
    except EDIT_ERRORS as exc:
        return _step_form_error(request, plan, uid, text, exc)
    if not request.htmx:
        return task_saved(request, plan, task_id, status_text, anchor=f"step-{uid}")
    # Only this step's card is swapped, so another step opened meanwhile stays open.
    context = editor_context(request, plan, task_id=task_id, saved_from=posted_version(request),
                              save_status=status_text)
    context["section"] = section = section_in(context, task_id)
    context["step"] = step_in(section, uid)
    return render(request, f"{TEMPLATE}#step-update", context)


def _step_form_error(request: HtmxHttpRequest, plan: Plan, uid: int, text: str, exc: Exception) -> HttpResponse:
    """The step's form again with the person's text kept and the message under it."""
    message = error_message(exc)
    context = editor_context(request, plan, editing=uid, edit_text=text, edit_error=message, stale=is_stale(exc),
                              save_status=_("Not saved: %(why)s") % {"why": message})
    for section in context["sections"]:
        if step := step_in(section, uid):
            context.update(section=section, step=step)
            break
    else:  # deleted elsewhere: the form still needs a home on the page to keep the text
        context.update(section=None, step=StepRow(uid, text, False, 0, False, False))
    if not request.htmx:
        return render(request, TEMPLATE, context, status=error_status(exc))
    response = render(request, f"{TEMPLATE}#step-form-error", context)
    retarget(response, f"#step-{uid}")
    reswap(response, "outerHTML")
    return response


@require_http_methods(["GET", "POST"])
@domain_errors
def plan_step_create(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """A new step at the end of a task, or after step ``?after=``. GET: its empty form."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = plan_task(plan, task_id)
    after = to_int(request.POST.get("after") if request.method == "POST" else request.GET.get("after"))
    if request.method == "GET":
        context = editor_context(request, plan, add_task=task.pk, add_after=after)
        context["section"] = section_in(context, task.pk)
        if after is not None:
            context["step"] = step_in(context["section"], after)
            if context["step"] is None:
                raise Http404(_("This step is no longer in the plan."))
        if request.htmx:
            return render(request, f"{TEMPLATE}#step-new", context)
        return render(request, TEMPLATE, context)
    text = request.POST.get("text", "")
    try:
        rows = task_rows(plan, task.pk)
        before = {row["id"] for row in rows}
        position = len(rows)
        if after is not None:
            position = next((i + 1 for i, row in enumerate(rows) if row["id"] == after), -1)
            if position < 0:
                raise Conflict(_("The step you were adding after is gone: the plan changed elsewhere. Reload it."),
                               code="stale_version")
        rows.insert(position, {"text": text})
        plan = save_task(request, plan, task.pk, rows, "added a step")
    except EDIT_ERRORS as exc:
        return _add_form_error(request, plan, task, after, text, exc)
    new_uid = next((row["id"] for row in task_rows(plan, task.pk) if row["id"] not in before), None)
    return task_saved(request, plan, task.pk, _("Step added: version %(n)s.") % {"n": plan.version},
                       anchor=f"step-{new_uid}" if new_uid else "", focus_uid=new_uid)


def _add_form_error(request: HtmxHttpRequest, plan: Plan, task: Task, after: int | None, text: str,
                    exc: Exception) -> HttpResponse:
    message = error_message(exc)
    context = editor_context(request, plan, add_task=task.pk, add_after=after, add_text=text, add_error=message,
                              stale=is_stale(exc), save_status=_("Not saved: %(why)s") % {"why": message})
    context["section"] = section = section_in(context, task.pk)
    context["step"] = step_in(section, after) if after is not None else None
    if not request.htmx:
        return render(request, TEMPLATE, context, status=error_status(exc))
    if context["step"] is not None:
        response = render(request, f"{TEMPLATE}#step-new-error", context)
        retarget(response, f"#step-{after}-new")
    else:
        response = render(request, f"{TEMPLATE}#add-form-error", context)
        retarget(response, f"#plan-task-{task.pk}-add")
    reswap(response, "outerHTML")
    return response


@require_POST
@domain_errors
def plan_step_delete(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Delete a step; the answer offers Undo (which brings the same step back)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task_id = None
    try:
        task_id, rows, index = find_step(plan, uid)
        removed = rows.pop(index)
        plan = save_task(request, plan, task_id, rows, "deleted a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
        return task_error(request, plan, task_id, exc)
    undo = {"uid": uid, "deleted_in": plan.version, "text": removed["text"], "number": index + 1}
    if not request.htmx:
        remember_undo(request, plan, uid)  # for the pages that follow, as a step is edited
    return task_saved(request, plan, task_id, _("Step %(n)s deleted.") % {"n": index + 1},
                       query=f"undo={uid}&deleted_in={plan.version}", notes={task_id: {"undo": undo}})


@require_POST
@domain_errors
def plan_step_undelete(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Undo a delete. Right after it, the previous version is restored, so the step comes back
    with its own id; after other edits, its text goes back in its old place as a new step."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    deleted_in = to_int(request.POST.get("deleted_in")) or 0
    notes = undo_notes(plan, uid, deleted_in)
    if not notes:
        raise Http404(_("There is no deleted step to bring back."))
    task_id, note = next(iter(notes.items()))
    index = note["undo"]["number"] - 1
    try:
        if plan.status not in EDITABLE:  # the service says so too, in its words; this is earlier
            raise Conflict(_("This plan cannot be edited while it is %(status)s.")
                           % {"status": plan.get_status_display().lower()}, code="plan_state")
        plan = plans.plan_step_undelete(
            actor=request.user, plan=plan, task_id=task_id, index=index, deleted_in=deleted_in,
            expected_version=posted_version(request),
        )
    except EDIT_ERRORS as exc:
        return task_error(request, plan, task_id, exc)
    back = next((row["id"] for i, row in enumerate(task_rows(plan, task_id)) if i == index), uid)
    return task_saved(request, plan, task_id, _("Step %(n)s is back.") % {"n": index + 1},
                       anchor=f"step-{back}", focus_uid=back)


@require_POST
@domain_errors
def plan_step_move(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Move up or down by one: the keyboard's (and a plain form's) way to reorder."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task_id = None
    try:
        task_id, rows, index = find_step(plan, uid)
        offset = {"up": -1, "down": 1}.get(request.POST.get("direction", ""))
        if offset is None:
            raise ValidationError({"direction": _("Choose up or down.")})
        target = index + offset
        if not 0 <= target < len(rows):
            raise ValidationError({"direction": _("This step is already first.") if offset < 0
                                   else _("This step is already last.")})
        rows.insert(target, rows.pop(index))
        plan = save_task(request, plan, task_id, rows, "moved a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
        return task_error(request, plan, task_id, exc)
    text = _("Step moved up: now step %(n)s of %(total)s.") if offset < 0 else _(
        "Step moved down: now step %(n)s of %(total)s.")
    return task_saved(request, plan, task_id, text % {"n": target + 1, "total": len(rows)}, anchor=f"step-{uid}")


@require_POST
@domain_errors
def plan_step_pin(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Pin (``pinned=1``) or unpin a step: regenerating its task keeps pinned steps as they are."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    pinned = request.POST.get("pinned") == "1"
    task_id = None
    try:
        task_id, rows, index = find_step(plan, uid)
        rows[index]["pinned"] = pinned
        plan = save_task(request, plan, task_id, rows, "pinned a step" if pinned else "unpinned a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return editor_saved(request, plan, "", error=error_message(exc), status=error_status(exc))
        return task_error(request, plan, task_id, exc)
    text = _("Step %(n)s pinned.") if pinned else _("Step %(n)s unpinned.")
    return task_saved(request, plan, task_id, text % {"n": index + 1}, anchor=f"step-{uid}")


@require_POST
@domain_errors
def plan_task_reorder(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """The order after a drag and drop: every step id of the task, each once (``order``)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = plan_task(plan, task_id)
    order = [to_int(value) for value in request.POST.getlist("order")]
    try:
        rows = task_rows(plan, task.pk)
        by_id = {row["id"]: row for row in rows}
        if sorted(by_id) != sorted(u for u in order if u is not None) or len(order) != len(rows):
            raise Conflict(_("The steps of this task changed elsewhere: reload the plan."), code="stale_version")
        if order == [row["id"] for row in rows]:
            return task_saved(request, plan, task.pk, _("No changes."))
        plan = save_task(request, plan, task.pk, [by_id[uid] for uid in order if uid is not None], "reordered steps")
    except EDIT_ERRORS as exc:
        return task_error(request, plan, task.pk, exc)
    return task_saved(request, plan, task.pk, _("New order saved: version %(n)s.") % {"n": plan.version})


@require_POST
@domain_errors
def plan_task_regenerate(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """Redraft one task's unpinned steps in the background, with an optional note."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = plan_task(plan, task_id)
    try:
        plans.plan_regenerate(actor=request.user, plan=plan, task=task, feedback=request.POST.get("feedback", ""))
    except EDIT_ERRORS as exc:
        return task_error(request, plan, task.pk, exc)
    plan = selectors.plan_get(user=request.user, plan_id=plan_id)
    return task_saved(request, plan, task.pk, _("Regenerating the unpinned steps of “%(task)s”…") % {"task": task.name})

