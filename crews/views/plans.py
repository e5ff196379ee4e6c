"""Plan pages: the kickoff panel's draft, the visual plan editor, versions and their differences.

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
from django.db import transaction
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.urls import NoReverseMatch, path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from agents import selectors as agent_selectors
from agents.views import HtmxHttpRequest, domain_errors, redirect_after_post
from crews import plans, runs, selectors
from crews.forms_plans import KickoffForm
from crews.models import Crew, Plan, Run, Task
from crews.plan_view import EditorHtml, StepRow
from planner_site.errors import Conflict, DomainError, TooMany

TEMPLATE = "crews/plan_detail.html"
EDITABLE = (Plan.Status.DRAFT, Plan.Status.APPROVED)


# Differences between two versions ------------------------------------------------------------

# One step as a version holds it: (stable id, text, pinned).
StepTuple = tuple[int, str, bool]


@dataclass(frozen=True)
class StepChange:
    """One step in a comparison: ``status`` is "added", "removed" or "kept"; a kept step may
    also have ``changed`` text, a ``moved`` place, or a flipped pin."""

    uid: int
    status: str
    text: str
    old_text: str = ""
    changed: bool = False
    moved: bool = False
    pin_changed: bool = False
    pinned: bool = False
    number: int | None = None  # its place in the newer version (None when removed)

    @property
    def same(self) -> bool:
        return self.status == "kept" and not (self.changed or self.moved or self.pin_changed)


@dataclass
class TaskDiff:
    task_id: int
    steps: list[StepChange]

    @property
    def has_changes(self) -> bool:
        return any(not s.same for s in self.steps)


@dataclass
class PlanDiff:
    tasks: list[TaskDiff]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return any(self.counts.values())


def _longest_increasing(values: Sequence[int]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence of ``values`` (n is small)."""
    if not values:
        return set()
    best = [1] * len(values)
    prev = [-1] * len(values)
    for i in range(len(values)):
        for j in range(i):
            if values[j] < values[i] and best[j] + 1 > best[i]:
                best[i], prev[i] = best[j] + 1, j
    i = max(range(len(values)), key=lambda k: best[k])
    keep = set()
    while i != -1:
        keep.add(i)
        i = prev[i]
    return keep


def _same_text_steps(
    old: Mapping[int, Sequence[StepTuple]],
    new: Mapping[int, Sequence[StepTuple]],
    old_where: Mapping[int, tuple[int, int, str, bool]],
    new_uids: set[int],
) -> dict[int, int]:
    """New step id -> old step id, for a step only in ``new`` whose task had a step with the same
    text that is only in ``old`` (each old step pairs once, in order)."""
    gone: dict[tuple[int, str], list[int]] = {}
    for task_id, steps in old.items():
        for uid, text, _pinned in steps:
            if uid not in new_uids:
                gone.setdefault((task_id, text), []).append(uid)
    was: dict[int, int] = {}
    for task_id, steps in new.items():
        for uid, text, _pinned in steps:
            if uid not in old_where and (same := gone.get((task_id, text))):
                was[uid] = same.pop(0)
    return was


def diff_versions(
    old: Mapping[int, Sequence[StepTuple]],
    new: Mapping[int, Sequence[StepTuple]],
    task_order: Sequence[int],
) -> PlanDiff:
    """Compare two versions step by step, by stable id, then by text (never by position).

    A step is *added* or *removed* when its id is in only one version, unless the other version
    has a step of the same task with the very same text and an id of its own: then the two are
    one step (as after a regeneration that wrote a step again). A kept step is *changed* when its
    text differs, *moved* when it left its task or its place among the steps both versions share
    changed: the fewest moves that explain the new order (the steps off one longest increasing
    run of old places), so deleting step 1 does not make every later step "moved".
    Removed steps are listed where they used to be, after the step that preceded them.
    """
    old_where = {uid: (task_id, i, text, pinned) for task_id, steps in old.items()
                 for i, (uid, text, pinned) in enumerate(steps)}
    new_uids = {uid for steps in new.values() for uid, _text, _pinned in steps}
    # A new id whose text an old id of the same task had, and that old id is gone: the same step.
    was = _same_text_steps(old, new, old_where, new_uids)
    new_uids |= set(was.values())
    order = list(task_order) + [t for t in {*old, *new} if t not in task_order]
    counts = {"added": 0, "removed": 0, "changed": 0, "moved": 0}
    tasks: list[TaskDiff] = []
    for task_id in order:
        new_steps = list(new.get(task_id, []))
        old_steps = list(old.get(task_id, []))
        keys = [was.get(uid, uid) for uid, _t, _p in new_steps]  # each new step's id in ``old``
        shared = [i for i, key in enumerate(keys) if key in old_where and old_where[key][0] == task_id]
        in_order = _longest_increasing([old_where[keys[i]][1] for i in shared])
        stayed = {keys[shared[k]] for k in in_order}
        rows: list[StepChange] = []
        for number, ((uid, text, pinned), key) in enumerate(zip(new_steps, keys, strict=True), start=1):
            before = old_where.get(key)
            if before is None:
                rows.append(StepChange(uid, "added", text, pinned=pinned, number=number))
                counts["added"] += 1
                continue
            moved = before[0] != task_id or key not in stayed
            changed = before[2] != text
            counts["moved"] += moved
            counts["changed"] += changed
            rows.append(StepChange(uid, "kept", text, old_text=before[2] if changed else "", changed=changed,
                                   moved=moved, pin_changed=before[3] != pinned, pinned=pinned, number=number))
        # Removed steps go back where they were: after the nearest earlier step still listed.
        anchor: int | None = None
        inserts: dict[int | None, list[StepChange]] = {}
        listed = set(keys)
        for uid, text, pinned in old_steps:
            if uid in new_uids:
                if uid in listed:
                    anchor = uid
                continue
            inserts.setdefault(anchor, []).append(StepChange(uid, "removed", text, pinned=pinned))
            counts["removed"] += 1
        merged = list(inserts.get(None, []))
        for row, key in zip(rows, keys, strict=True):
            merged.append(row)
            merged.extend(inserts.get(key, []))
        if merged:
            tasks.append(TaskDiff(task_id, merged))
    return PlanDiff(tasks, counts)


# What the editor shows ---------------------------------------------------------------------------


@dataclass
class TaskSection:
    task: Task
    number: int
    steps: list[StepRow]
    regenerating: bool = False
    error: str = ""
    notice: str = ""
    undo: dict[str, Any] | None = None


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


def _versions(plan: Plan, *, since: int | None = None) -> list[dict[str, Any]]:
    """The versions list's rows, newest first: all of them, or those after number ``since``."""
    history = selectors.plan_version_history(plan=plan)
    if since is not None:
        history = history.filter(number__gt=since)
    return [
        {"number": v.number, "label": note_label(v.note), "who": v.created_by, "at": v.created_at}
        for v in history
    ]


def _editor_context(request: HtmxHttpRequest, plan: Plan, *, notes: Mapping[int, Mapping[str, Any]] | None = None,
                    task_id: int | None = None, saved_from: int | None = None, **extra: Any) -> dict[str, Any]:
    """What the editor's template shows. An answer that swaps one section or card passes its
    ``task_id`` (only that section is built); one that saved passes ``saved_from``, the version
    the page showed, so the versions list gets only what is new (``versions_oob``)."""
    crew = plan.crew
    can_write = selectors.crew_can_write(user=request.user, crew=crew)
    waiting_run = selectors.plan_waiting_run(plan=plan) if plan.status in EDITABLE else None
    # The editor never shows a task's context (a query and a model per link: 3 of a save's 25 ms).
    tasks = selectors.crew_tasks(crew=crew, with_context=False)
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
    }
    if task_id is None:
        context["step_count"] = sum(len(s.steps) for s in sections)
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
    context["editor_html"] = EditorHtml(
        plan_id=plan.pk, version=plan.version, approved_version=plan.approved_version, csrf_token=get_token(request),
        can_edit=context["can_edit"], focus_uid=context.get("focus_uid"),
    )
    return context


def _section(context: Mapping[str, Any], task_id: int) -> TaskSection:
    for section in context["sections"]:
        if section.task.pk == task_id:
            return section
    raise Http404(_("This task is not part of the plan's crew."))


def _step(section: TaskSection, uid: int) -> StepRow | None:
    return next((s for s in section.steps if s.uid == uid), None)


def _run_url(run: Run) -> str:
    try:
        return reverse("crews:run-detail", args=[run.pk])
    except NoReverseMatch:  # the run pages ship separately; until then the crew page lists runs
        return reverse("crews:crew-detail", args=[run.crew_id]) + "#kickoff"


# Reading the posted forms and the services' errors ---------------------------------------------


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _posted_version(request: HtmxHttpRequest) -> int | None:
    return _int(request.POST.get("version"))


def _message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    if isinstance(exc, DomainError):
        return exc.detail
    return str(exc)


def _status(exc: Exception) -> int:
    if isinstance(exc, TooMany):
        return 429
    if isinstance(exc, Conflict):
        return 409
    return 422


def _is_stale(exc: Exception) -> bool:
    return isinstance(exc, Conflict) and exc.code == "stale_version"


EDIT_ERRORS = (ValidationError, Conflict, TooMany)


def _find_step(plan: Plan, uid: int) -> tuple[int, list[dict[str, Any]], int]:
    """The step's task, that task's steps as ``plan_update`` takes them, and the step's index."""
    for task_id, steps in plans.version_steps(plan).items():
        for index, step in enumerate(steps):
            if step[0] == uid:
                return task_id, [{"id": u, "text": text, "pinned": pinned} for u, text, pinned in steps], index
    raise Conflict(_("This step is no longer in the plan: it changed elsewhere. Reload the plan."),
                   code="stale_version")


def _task_rows(plan: Plan, task_id: int) -> list[dict[str, Any]]:
    steps = plans.version_steps(plan, task_id=task_id).get(task_id, [])
    return [{"id": uid, "text": text, "pinned": pinned} for uid, text, pinned in steps]


def _save(request: HtmxHttpRequest, plan: Plan, task_id: int, rows: list[dict[str, Any]], note: str) -> Plan:
    if plan.status not in EDITABLE:  # the service says so too, in its words; this is earlier
        raise Conflict(_("This plan cannot be edited while it is %(status)s.")
                       % {"status": plan.get_status_display().lower()}, code="plan_state")
    saved = plans.plan_update(actor=request.user, plan=plan, expected_version=_posted_version(request),
                              tasks=[{"task_id": task_id, "steps": rows}], note=note)
    saved.crew, saved.llm = plan.crew, plan.llm  # an edit changes neither: no need to read them again
    return saved


def _plan_task(plan: Plan, task_id: int) -> Task:
    task = plan.crew.tasks.filter(pk=task_id).first()
    if task is None:
        raise Http404(_("This task is not part of the plan's crew."))
    return task


# Responses -----------------------------------------------------------------------------------


def _page(request: HtmxHttpRequest, plan: Plan, *, status: int = 200, **extra: Any) -> HttpResponse:
    return render(request, TEMPLATE, _editor_context(request, plan, **extra), status=status)


def _task_saved(request: HtmxHttpRequest, plan: Plan, task_id: int, status_text: str, *,
                anchor: str = "", query: str = "", notes: Mapping[int, Mapping[str, Any]] | None = None,
                focus_uid: int | None = None) -> HttpResponse:
    """htmx: the task's section, and out of band the version inputs, head and versions list.
    A plain form: back to the editor at the step (its message says what happened)."""
    if not request.htmx:
        messages.success(request, status_text)
        url = reverse("crews:plan-detail", args=[plan.pk]) + (f"?{query}" if query else "")
        return redirect_after_post(request, url + f"#{anchor or f'plan-task-{task_id}'}")
    context = _editor_context(request, plan, task_id=task_id, saved_from=_posted_version(request), notes=notes,
                              save_status=status_text, focus_uid=focus_uid)
    context["section"] = _section(context, task_id)
    return render(request, f"{TEMPLATE}#task-update", context)


def _task_error(request: HtmxHttpRequest, plan: Plan, task_id: int, exc: Exception) -> HttpResponse:
    """The task's section with the message at its top (htmx), or the page with it (no JS)."""
    message = _message(exc)
    notes = {task_id: {"error": message}}
    if not request.htmx:
        return _page(request, plan, status=_status(exc), notes=notes)
    context = _editor_context(request, plan, notes=notes, save_status=_("Not saved: %(why)s") % {"why": message},
                              stale=_is_stale(exc))
    context["section"] = _section(context, task_id)
    response = render(request, f"{TEMPLATE}#task-error", context)
    retarget(response, f"#plan-task-{task_id}")
    reswap(response, "outerHTML")
    return response


def _editor_saved(request: HtmxHttpRequest, plan: Plan, status_text: str, *, error: str = "",
                  status: int = 200) -> HttpResponse:
    """Whole-plan actions (restore, approve errors): the editor again, with a message at its top."""
    if not request.htmx:
        if error:
            return _page(request, plan, status=status, action_error=error)
        messages.success(request, status_text)
        return redirect_after_post(request, reverse("crews:plan-detail", args=[plan.pk]))
    context = _editor_context(request, plan, action_error=error, save_status=error or status_text)
    response = render(request, f"{TEMPLATE}#editor-update", context)
    retarget(response, "#plan-editor")
    reswap(response, "outerHTML")
    return response


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
            status = _status(exc)
            if isinstance(exc, ValidationError):
                form.add_service_errors(exc)
            else:
                form.add_error(None, exc.detail)
        else:
            if action == "run":
                return redirect_after_post(request, _run_url(run))
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
    undo_uid, deleted_in = _int(request.GET.get("undo")), _int(request.GET.get("deleted_in"))
    if undo_uid and deleted_in:
        notes = _undo_notes(plan, undo_uid, deleted_in)
    if not request.htmx:
        return render(request, TEMPLATE, _editor_context(request, plan, notes=notes))
    task_id, uid = _int(request.GET.get("task")), _int(request.GET.get("step"))
    if task_id is not None and task_id in (plan.regenerating_task_ids or ()):
        # Polled every second while it regenerates: answered from the plan alone, without the
        # editor's context (its steps, its versions list), which the 204 would throw away.
        return HttpResponse(status=204)  # htmx swaps nothing and asks again in a second
    # A task's section needs only that task's steps.
    context = _editor_context(request, plan, notes=notes, task_id=task_id)
    if task_id is not None:
        context["section"] = section = _section(context, task_id)
        # Done: say so, and bring the new version and the history along.
        # A worker stored the error in English; the app's own messages have a translation.
        error = _(plan.error) if plan.error else ""
        context["save_status"] = error or _("New steps for “%(task)s”.") % {"task": section.task.name}
        section.error = error
        return render(request, f"{TEMPLATE}#task-poll", context)
    if uid is not None:
        for section in context["sections"]:
            if step := _step(section, uid):
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


def _undo_notes(plan: Plan, uid: int, deleted_in: int) -> dict[int, dict[str, Any]]:
    """The "Step deleted — Undo" notice for a step deleted in version ``deleted_in``."""
    if deleted_in < 2 or deleted_in > plan.version:
        return {}
    for task_id, steps in plans.version_steps(plan, deleted_in - 1).items():
        for index, (step_uid, text, _pinned) in enumerate(steps):
            if step_uid == uid:
                undo = {"uid": uid, "deleted_in": deleted_in, "text": text, "number": index + 1}
                return {task_id: {"undo": undo}}
    return {}


@require_http_methods(["GET", "POST"])
@domain_errors
def plan_step_update(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """GET: the step's edit form (htmx) or the editor with it open. POST: save its text."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    if request.method == "GET":
        context = _editor_context(request, plan, editing=uid)
        for section in context["sections"]:
            if step := _step(section, uid):
                context.update(section=section, step=step, edit_text=step.text)
                if request.htmx:
                    return render(request, f"{TEMPLATE}#step-form", context)
                return render(request, TEMPLATE, context)
        raise Http404(_("This step is no longer in the plan."))
    text = request.POST.get("text", "")
    try:
        task_id, rows, index = _find_step(plan, uid)
        if text.strip() == rows[index]["text"]:
            status_text = _("No changes.")
        else:
            rows[index]["text"] = text
            plan = _save(request, plan, task_id, rows, "edited a step")
            status_text = _("Saved: version %(n)s.") % {"n": plan.version}
    except EDIT_ERRORS as exc:
        return _step_form_error(request, plan, uid, text, exc)
    if not request.htmx:
        return _task_saved(request, plan, task_id, status_text, anchor=f"step-{uid}")
    # Only this step's card is swapped, so another step opened meanwhile stays open.
    context = _editor_context(request, plan, task_id=task_id, saved_from=_posted_version(request),
                              save_status=status_text)
    context["section"] = section = _section(context, task_id)
    context["step"] = _step(section, uid)
    return render(request, f"{TEMPLATE}#step-update", context)


def _step_form_error(request: HtmxHttpRequest, plan: Plan, uid: int, text: str, exc: Exception) -> HttpResponse:
    """The step's form again with the person's text kept and the message under it."""
    message = _message(exc)
    context = _editor_context(request, plan, editing=uid, edit_text=text, edit_error=message, stale=_is_stale(exc),
                              save_status=_("Not saved: %(why)s") % {"why": message})
    for section in context["sections"]:
        if step := _step(section, uid):
            context.update(section=section, step=step)
            break
    else:  # deleted elsewhere: the form still needs a home on the page to keep the text
        context.update(section=None, step=StepRow(uid, text, False, 0, False, False))
    if not request.htmx:
        return render(request, TEMPLATE, context, status=_status(exc))
    response = render(request, f"{TEMPLATE}#step-form-error", context)
    retarget(response, f"#step-{uid}")
    reswap(response, "outerHTML")
    return response


@require_http_methods(["GET", "POST"])
@domain_errors
def plan_step_create(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """A new step at the end of a task, or after step ``?after=``. GET: its empty form."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = _plan_task(plan, task_id)
    after = _int(request.POST.get("after") if request.method == "POST" else request.GET.get("after"))
    if request.method == "GET":
        context = _editor_context(request, plan, add_task=task.pk, add_after=after)
        context["section"] = _section(context, task.pk)
        if after is not None:
            context["step"] = _step(context["section"], after)
            if context["step"] is None:
                raise Http404(_("This step is no longer in the plan."))
        if request.htmx:
            return render(request, f"{TEMPLATE}#step-new", context)
        return render(request, TEMPLATE, context)
    text = request.POST.get("text", "")
    try:
        rows = _task_rows(plan, task.pk)
        before = {row["id"] for row in rows}
        position = len(rows)
        if after is not None:
            position = next((i + 1 for i, row in enumerate(rows) if row["id"] == after), -1)
            if position < 0:
                raise Conflict(_("The step you were adding after is gone: the plan changed elsewhere. Reload it."),
                               code="stale_version")
        rows.insert(position, {"text": text})
        plan = _save(request, plan, task.pk, rows, "added a step")
    except EDIT_ERRORS as exc:
        return _add_form_error(request, plan, task, after, text, exc)
    new_uid = next((row["id"] for row in _task_rows(plan, task.pk) if row["id"] not in before), None)
    return _task_saved(request, plan, task.pk, _("Step added: version %(n)s.") % {"n": plan.version},
                       anchor=f"step-{new_uid}" if new_uid else "", focus_uid=new_uid)


def _add_form_error(request: HtmxHttpRequest, plan: Plan, task: Task, after: int | None, text: str,
                    exc: Exception) -> HttpResponse:
    message = _message(exc)
    context = _editor_context(request, plan, add_task=task.pk, add_after=after, add_text=text, add_error=message,
                              stale=_is_stale(exc), save_status=_("Not saved: %(why)s") % {"why": message})
    context["section"] = section = _section(context, task.pk)
    context["step"] = _step(section, after) if after is not None else None
    if not request.htmx:
        return render(request, TEMPLATE, context, status=_status(exc))
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
        task_id, rows, index = _find_step(plan, uid)
        removed = rows.pop(index)
        plan = _save(request, plan, task_id, rows, "deleted a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
        return _task_error(request, plan, task_id, exc)
    undo = {"uid": uid, "deleted_in": plan.version, "text": removed["text"], "number": index + 1}
    return _task_saved(request, plan, task_id, _("Step %(n)s deleted.") % {"n": index + 1},
                       query=f"undo={uid}&deleted_in={plan.version}", notes={task_id: {"undo": undo}})


@require_POST
@domain_errors
def plan_step_undelete(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Undo a delete. Right after it, the previous version is restored, so the step comes back
    with its own id; after other edits, its text goes back in its old place as a new step."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    deleted_in = _int(request.POST.get("deleted_in")) or 0
    notes = _undo_notes(plan, uid, deleted_in)
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
            expected_version=_posted_version(request),
        )
    except EDIT_ERRORS as exc:
        return _task_error(request, plan, task_id, exc)
    back = next((row["id"] for i, row in enumerate(_task_rows(plan, task_id)) if i == index), uid)
    return _task_saved(request, plan, task_id, _("Step %(n)s is back.") % {"n": index + 1},
                       anchor=f"step-{back}", focus_uid=back)


@require_POST
@domain_errors
def plan_step_move(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Move up or down by one: the keyboard's (and a plain form's) way to reorder."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task_id = None
    try:
        task_id, rows, index = _find_step(plan, uid)
        offset = {"up": -1, "down": 1}.get(request.POST.get("direction", ""))
        if offset is None:
            raise ValidationError({"direction": _("Choose up or down.")})
        target = index + offset
        if not 0 <= target < len(rows):
            raise ValidationError({"direction": _("This step is already first.") if offset < 0
                                   else _("This step is already last.")})
        rows.insert(target, rows.pop(index))
        plan = _save(request, plan, task_id, rows, "moved a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
        return _task_error(request, plan, task_id, exc)
    text = _("Step moved up: now step %(n)s of %(total)s.") if offset < 0 else _(
        "Step moved down: now step %(n)s of %(total)s.")
    return _task_saved(request, plan, task_id, text % {"n": target + 1, "total": len(rows)}, anchor=f"step-{uid}")


@require_POST
@domain_errors
def plan_step_pin(request: HtmxHttpRequest, plan_id: int, uid: int) -> HttpResponse:
    """Pin (``pinned=1``) or unpin a step: regenerating its task keeps pinned steps as they are."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    pinned = request.POST.get("pinned") == "1"
    task_id = None
    try:
        task_id, rows, index = _find_step(plan, uid)
        rows[index]["pinned"] = pinned
        plan = _save(request, plan, task_id, rows, "pinned a step" if pinned else "unpinned a step")
    except EDIT_ERRORS as exc:
        if task_id is None:
            return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
        return _task_error(request, plan, task_id, exc)
    text = _("Step %(n)s pinned.") if pinned else _("Step %(n)s unpinned.")
    return _task_saved(request, plan, task_id, text % {"n": index + 1}, anchor=f"step-{uid}")


@require_POST
@domain_errors
def plan_task_reorder(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """The order after a drag and drop: every step id of the task, each once (``order``)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = _plan_task(plan, task_id)
    order = [_int(value) for value in request.POST.getlist("order")]
    try:
        rows = _task_rows(plan, task.pk)
        by_id = {row["id"]: row for row in rows}
        if sorted(by_id) != sorted(u for u in order if u is not None) or len(order) != len(rows):
            raise Conflict(_("The steps of this task changed elsewhere: reload the plan."), code="stale_version")
        if order == [row["id"] for row in rows]:
            return _task_saved(request, plan, task.pk, _("No changes."))
        plan = _save(request, plan, task.pk, [by_id[uid] for uid in order if uid is not None], "reordered steps")
    except EDIT_ERRORS as exc:
        return _task_error(request, plan, task.pk, exc)
    return _task_saved(request, plan, task.pk, _("New order saved: version %(n)s.") % {"n": plan.version})


@require_POST
@domain_errors
def plan_task_regenerate(request: HtmxHttpRequest, plan_id: int, task_id: int) -> HttpResponse:
    """Redraft one task's unpinned steps in the background, with an optional note."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    task = _plan_task(plan, task_id)
    try:
        plans.plan_regenerate(actor=request.user, plan=plan, task=task, feedback=request.POST.get("feedback", ""))
    except EDIT_ERRORS as exc:
        return _task_error(request, plan, task.pk, exc)
    plan = selectors.plan_get(user=request.user, plan_id=plan_id)
    return _task_saved(request, plan, task.pk, _("Regenerating the unpinned steps of “%(task)s”…") % {"task": task.name})


@require_POST
@domain_errors
def plan_regenerate(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """Draft a fresh plan with the same inputs (also Try again after a failure) and open it."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    try:
        fresh = plans.plan_draft(actor=request.user, crew=plan.crew, inputs=plan.inputs)
    except (ValidationError, TooMany) as exc:
        return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
    return redirect_after_post(request, reverse("crews:plan-detail", args=[fresh.pk]))


@require_POST
@domain_errors
def plan_approve(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """Approve & run: approve the version on screen and start the crew with it. When a run
    drafted this plan and waits for it, Approve & continue lets that run go on instead."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id, for_write=True)
    waiting = selectors.plan_waiting_run(plan=plan)
    version = _posted_version(request)
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
        return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
    return redirect_after_post(request, _run_url(run))


@require_GET
@domain_errors
def plan_diff(request: HtmxHttpRequest, plan_id: int) -> HttpResponse:
    """What changed between versions ``?from=`` and ``?to=`` (default: the last edit)."""
    plan = selectors.plan_get(user=request.user, plan_id=plan_id)
    to = _int(request.GET.get("to")) or plan.version
    start = _int(request.GET.get("from"))
    start = max(to - 1, 1) if start is None else start
    context = _editor_context(request, plan, diff_from=start, diff_to=to)
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
        if _posted_version(request) != plan.version:
            raise Conflict(_("This plan changed elsewhere (now version %(now)s): reload it before restoring.")
                           % {"now": plan.version}, code="stale_version")
        plan = plans.plan_restore(actor=request.user, plan=plan, number=number)
    except EDIT_ERRORS as exc:
        return _editor_saved(request, plan, "", error=_message(exc), status=_status(exc))
    return _editor_saved(request, plan, _("Version %(old)s restored as version %(n)s.") % {"old": number, "n": plan.version})


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
