"""What the plan editor's pages and answers share: the editor's context, reading its posted forms
and the services' errors, and the answers after a save or an error.

Every edit posts a small form (a step id, its text, the version the page shows); the view builds
that one task's full step list from the current version and calls ``plans.plan_update``. The
service stays the only writer, and its version check is what catches an edit made elsewhere.

Errors are answered in place, never as a 500:

* htmx requests get **200** with the fragment that shows the message. htmx 2 does not swap 4xx
  responses by default, so an error is a 200 retargeted (``HX-Retarget``/``HX-Reswap``) onto the
  form that caused it; the person's text stays in that form.
* A plain form (no JavaScript) gets the whole page with the message in place and an honest
  status: 422 for bad input, 409 for a stale version or a plan in the wrong state, 429 for too
  many drafts or runs in a minute.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django_htmx.http import reswap, retarget

from agents.views import HtmxHttpRequest, redirect_after_post
from crews import plans, selectors
from crews.diagram import crew_diagram, manager_label
from crews.models import Plan, Run, Task
from crews.plan_view import EditorParts, StepRow, VersionRow
from planner_site.errors import Conflict, DomainError, TooMany

TEMPLATE = "crews/plan_detail.html"
EDITABLE = (Plan.Status.DRAFT, Plan.Status.APPROVED)


# What the editor shows ---------------------------------------------------------------------------


@dataclass
class TaskSection:
    task: Task
    number: int
    steps: list[StepRow]
    regenerating: bool = False
    error: str = ""
    notice: str = ""
    gap: str = ""  # a placeholder step, or no steps at all (``plans.plan_gaps``), if so
    undo: dict[str, Any] | None = None
    urls: dict[str, str] = field(default_factory=dict)  # its forms' targets (EditorParts.task_urls)


# Notes the versions list translates; anything else is shown as the service wrote it.
NOTE_LABELS = {
    "drafted": gettext_lazy("Drafted by the planner"),
    "regenerated": gettext_lazy("A task regenerated"),
    "edited": gettext_lazy("Edited"),
    "edited a step": gettext_lazy("Step edited"),
    "added a step": gettext_lazy("Step added"),
    "deleted a step": gettext_lazy("Step deleted"),
    "undid a delete": gettext_lazy("Delete undone"),
    "moved a step": gettext_lazy("Step moved"),
    "reordered steps": gettext_lazy("Steps reordered"),
    "pinned a step": gettext_lazy("Step pinned"),
    "unpinned a step": gettext_lazy("Step unpinned"),
}
RESTORED = re.compile(r"^restored v(\d+)$")


def note_label(note: str) -> str:
    if match := RESTORED.match(note):
        return _("Restored version %(n)s") % {"n": match.group(1)}
    return str(NOTE_LABELS.get(note, note))


def _sections(plan: Plan, tasks: Sequence[Task], notes: Mapping[int, Mapping[str, Any]] | None = None, *,
              only: int | None = None) -> list[TaskSection]:
    """Every task's section, or with ``only`` that task's (an answer shows one section or card)."""
    steps = plans.version_steps(plan, task_id=only) if plan.version else {}
    busy = set(plan.regenerating_task_ids or [])
    sections = []
    for number, task in enumerate(tasks, start=1):
        if only is not None and task.pk != only:
            continue
        task_steps = steps.get(task.pk, [])
        rows = [StepRow(uid, text, pinned, i, i == 1, i == len(task_steps))
                for i, (uid, text, pinned) in enumerate(task_steps, start=1)]
        section = TaskSection(task, number, rows, regenerating=task.pk in busy)
        for key, value in (notes or {}).get(task.pk, {}).items():
            setattr(section, key, value)
        sections.append(section)
    return sections


def _versions(plan: Plan, *, since: int | None = None) -> list[VersionRow]:
    """The versions list's rows, newest first: all of them, or those after number ``since``."""
    history = selectors.plan_version_history(plan=plan)
    if since is not None:
        history = history.filter(number__gt=since)
    return [VersionRow(v.number, note_label(v.note), v.created_by, v.created_at)
            for v in history]


def editor_context(request: HtmxHttpRequest, plan: Plan, *, notes: Mapping[int, Mapping[str, Any]] | None = None,
                    task_id: int | None = None, saved_from: int | None = None, **extra: Any) -> dict[str, Any]:
    """What the editor's template shows. An answer that swaps one section or card passes its
    ``task_id`` (only that section is built); one that saved passes ``saved_from``, the version
    the page showed, so the versions list gets only what is new (``versions_oob``)."""
    crew = plan.crew
    can_write = selectors.crew_can_write(user=request.user, crew=crew)
    waiting_run = selectors.plan_waiting_run(plan=plan) if plan.status in EDITABLE else None
    # The editor never shows a task's context (a query and a model per link: 3 of a save's 25 ms).
    tasks = selectors.crew_tasks(crew=crew, with_context=False)
    if not request.htmx:  # a whole page: a delete's Undo made without JavaScript stays on it
        kept = remembered_undo(request, plan)
        notes = {**kept, **{t: {**kept.get(t, {}), **note} for t, note in (notes or {}).items()}}
    sections = _sections(plan, tasks, notes, only=task_id)
    context: dict[str, Any] = {
        "plan": plan,
        "crew": crew,
        "sections": sections,
        "can_edit": can_write and plan.status in EDITABLE,
        "can_write": can_write,
        "generating": plan.status == Plan.Status.GENERATING,
        "waiting_run": waiting_run,
        # Versions are numbered 1, 2, … with no gaps: each save adds the next one.
        "version_numbers": range(plan.version, 0, -1),
        "demo_llm": plan.llm is not None and plan.llm.is_demo,
        "regenerating": bool(plan.regenerating_task_ids),
        "failure_kind": plans.plan_failure_kind(plan),
    }
    if task_id is None:
        context["step_count"] = sum(len(s.steps) for s in sections)
        # The whole editor shows the crew's picture with each task's step count (the order's
        # arrows and the context links: one query for the links the editor does not read).
        context["diagram"] = crew_diagram(tasks, steps={s.task.pk: len(s.steps) for s in sections},
                                          context=selectors.crew_context_links(crew=crew), manager=manager_label(crew))
    # Placeholder steps block Approve (``gaps``); tasks with no steps are planned by their agents
    # when they run (``unplanned``, a warning). Both are flagged at the task and beside Approve
    # (the head comes along with every save, so the whole plan is checked, not only the section
    # shown). Only the plan's own tasks count, not one added to the crew since.
    found = plans.plan_gaps(plan, run=waiting_run) if plan.status in EDITABLE else plans.PlanGaps()
    context["gaps"], context["unplanned"] = found.placeholders, found.unplanned
    for section in sections:
        section.gap = found.placeholders.get(section.task.pk) or found.unplanned.get(section.task.pk, "")
    if saved_from is not None and plan.version == saved_from:
        context["versions_oob"] = ""  # nothing saved: the list on the page is the current one
    elif saved_from and plan.version == saved_from + 1:
        # One save since the page's version: the new row, and the row before it (no longer
        # current), instead of the whole history.
        context["versions_oob"] = "added"
        context["added_versions"] = _versions(plan, since=saved_from - 1)
    else:
        context["versions_oob"] = "all"
        context["versions"] = _versions(plan)
    context.update(extra)
    context["editor_parts"] = editor_parts = EditorParts(
        plan_id=plan.pk, version=plan.version, approved_version=plan.approved_version, csrf_token=get_token(request),
        can_edit=context["can_edit"], focus_uid=context.get("focus_uid"),
    )
    for section in sections:
        section.urls = editor_parts.task_urls(section.task.pk)
    return context


def section_in(context: Mapping[str, Any], task_id: int) -> TaskSection:
    for section in context["sections"]:
        if section.task.pk == task_id:
            return section
    raise Http404(_("This task is not part of the plan's crew."))


def step_in(section: TaskSection, uid: int) -> StepRow | None:
    return next((s for s in section.steps if s.uid == uid), None)


def run_url(run: Run) -> str:
    try:
        return reverse("crews:run-detail", args=[run.pk])
    except NoReverseMatch:  # the run pages ship separately; until then the crew page lists runs
        return reverse("crews:crew-detail", args=[run.crew_id]) + "#kickoff"


# Reading the posted forms and the services' errors ---------------------------------------------


def to_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def posted_version(request: HtmxHttpRequest) -> int | None:
    return to_int(request.POST.get("version"))


def error_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    if isinstance(exc, DomainError):
        return exc.detail
    return str(exc)


def error_status(exc: Exception) -> int:
    if isinstance(exc, TooMany):
        return 429
    if isinstance(exc, Conflict):
        return 409
    return 422


def is_stale(exc: Exception) -> bool:
    return isinstance(exc, Conflict) and exc.code == "stale_version"


EDIT_ERRORS = (ValidationError, Conflict, TooMany)


def find_step(plan: Plan, uid: int) -> tuple[int, list[dict[str, Any]], int]:
    """The step's task, that task's steps as ``plan_update`` takes them, and the step's index."""
    for task_id, steps in plans.version_steps(plan).items():
        for index, step in enumerate(steps):
            if step[0] == uid:
                return task_id, [{"id": u, "text": text, "pinned": pinned} for u, text, pinned in steps], index
    raise Conflict(_("This step is no longer in the plan: it changed elsewhere. Reload the plan."),
                   code="stale_version")


def task_rows(plan: Plan, task_id: int) -> list[dict[str, Any]]:
    steps = plans.version_steps(plan, task_id=task_id).get(task_id, [])
    return [{"id": uid, "text": text, "pinned": pinned} for uid, text, pinned in steps]


def save_task(request: HtmxHttpRequest, plan: Plan, task_id: int, rows: list[dict[str, Any]], note: str) -> Plan:
    if plan.status not in EDITABLE:  # the service says so too, in its words; this is earlier
        raise Conflict(_("This plan cannot be edited while it is %(status)s.")
                       % {"status": plan.get_status_display().lower()}, code="plan_state")
    saved = plans.plan_update(actor=request.user, plan=plan, expected_version=posted_version(request),
                              tasks=[{"task_id": task_id, "steps": rows}], note=note)
    saved.crew, saved.llm = plan.crew, plan.llm  # an edit changes neither: no need to read them again
    return saved


def plan_task(plan: Plan, task_id: int) -> Task:
    task = plan.crew.tasks.filter(pk=task_id).first()
    if task is None:
        raise Http404(_("This task is not part of the plan's crew."))
    return task


# Responses -----------------------------------------------------------------------------------


def page(request: HtmxHttpRequest, plan: Plan, *, status: int = 200, **extra: Any) -> HttpResponse:
    return render(request, TEMPLATE, editor_context(request, plan, **extra), status=status)


def task_saved(request: HtmxHttpRequest, plan: Plan, task_id: int, status_text: str, *,
                anchor: str = "", query: str = "", notes: Mapping[int, Mapping[str, Any]] | None = None,
                focus_uid: int | None = None) -> HttpResponse:
    """htmx: the task's section, and out of band the version inputs, head and versions list.
    A plain form: back to the editor at the step (its message says what happened)."""
    if not request.htmx:
        messages.success(request, status_text)
        url = reverse("crews:plan-detail", args=[plan.pk]) + (f"?{query}" if query else "")
        return redirect_after_post(request, url + f"#{anchor or f'plan-task-{task_id}'}")
    context = editor_context(request, plan, task_id=task_id, saved_from=posted_version(request), notes=notes,
                              save_status=status_text, focus_uid=focus_uid)
    context["section"] = section_in(context, task_id)
    return render(request, f"{TEMPLATE}#task-update", context)


def task_error(request: HtmxHttpRequest, plan: Plan, task_id: int, exc: Exception) -> HttpResponse:
    """The task's section with the message at its top (htmx), or the page with it (no JS)."""
    message = error_message(exc)
    notes = {task_id: {"error": message}}
    if not request.htmx:
        return page(request, plan, status=error_status(exc), notes=notes)
    context = editor_context(request, plan, notes=notes, save_status=_("Not saved: %(why)s") % {"why": message},
                              stale=is_stale(exc))
    context["section"] = section_in(context, task_id)
    response = render(request, f"{TEMPLATE}#task-error", context)
    retarget(response, f"#plan-task-{task_id}")
    reswap(response, "outerHTML")
    return response


def editor_saved(request: HtmxHttpRequest, plan: Plan, status_text: str, *, error: str = "",
                  status: int = 200) -> HttpResponse:
    """Whole-plan actions (restore, approve errors): the editor again, with a message at its top."""
    if not request.htmx:
        if error:
            return page(request, plan, status=status, action_error=error)
        messages.success(request, status_text)
        return redirect_after_post(request, reverse("crews:plan-detail", args=[plan.pk]))
    context = editor_context(request, plan, action_error=error, save_status=error or status_text)
    response = render(request, f"{TEMPLATE}#editor-update", context)
    retarget(response, "#plan-editor")
    reswap(response, "outerHTML")
    return response



def undo_notes(plan: Plan, uid: int, deleted_in: int) -> dict[int, dict[str, Any]]:
    """The "Step deleted — Undo" notice for a step deleted in version ``deleted_in``."""
    if deleted_in < 2 or deleted_in > plan.version:
        return {}
    for task_id, steps in plans.version_steps(plan, deleted_in - 1).items():
        for index, (step_uid, text, _pinned) in enumerate(steps):
            if step_uid == uid:
                undo = {"uid": uid, "deleted_in": deleted_in, "text": text, "number": index + 1}
                return {task_id: {"undo": undo}}
    return {}


# A step deleted without JavaScript keeps its Undo in the session, for the pages that follow (a
# step's edit form opened meanwhile, Cancel, a reload) until it is undone or another change is
# saved: the note shows only while the plan is still at the version the delete made. Chosen over
# carrying ?undo= along every link and form of the editor (each card's Edit and Add after, the
# edit and add forms, Cancel): one place, nothing for a new link to forget, and the version check
# drops it whoever saved the next change. With htmx the note stays in the page by itself.
UNDO_SESSION_KEY = "plan_undo"


def remember_undo(request: HtmxHttpRequest, plan: Plan, uid: int) -> None:
    """Keep the Undo of step ``uid``, just deleted (the plan is at the version the delete made)."""
    request.session[UNDO_SESSION_KEY] = {"plan": plan.pk, "uid": uid, "deleted_in": plan.version,
                                         "status": plan.status}


def remembered_undo(request: HtmxHttpRequest, plan: Plan) -> dict[int, dict[str, Any]]:
    """The Undo note kept by ``remember_undo`` for this plan, while nothing else was saved since."""
    kept = request.session.get(UNDO_SESSION_KEY)
    if not isinstance(kept, dict) or kept.get("plan") != plan.pk:
        return {}
    uid, deleted_in = to_int(kept.get("uid")), to_int(kept.get("deleted_in"))
    # Undone, another change saved since, or the plan approved (or rejected) meanwhile: approving
    # keeps the version, and the note's Undo would make the approved plan a draft again.
    if uid is None or deleted_in != plan.version or kept.get("status") != plan.status:
        del request.session[UNDO_SESSION_KEY]
        return {}
    return undo_notes(plan, uid, deleted_in)
