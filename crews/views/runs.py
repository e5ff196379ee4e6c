"""Run pages: the live run view (a replay once finished), its controls, and run history.

Every control is a plain form that works without JavaScript (it redirects back to the run page
with a message); with htmx it swaps just the part it changed. The run page itself is rendered
from a ``RunView`` folded from the run's events in one query; the websocket then streams the
rest as out-of-band fragments of the same partials (``crews.consumers``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import reswap, retarget

from agents import selectors as agent_selectors
from agents.views import HtmxHttpRequest, agent_detail_context, domain_errors, redirect_after_post
from crews import runs, selectors
from crews.forms_runs import RunFilterForm
from crews.models import Crew, FeedbackRequest, Run, ToolApproval
from crews.run_view import (
    RUN_SCOPE,
    RUN_STATUS_TONE,
    RunView,
    dom_key,
    duration_text,
    markdown,
    run_duration,
    run_status_label,
    tokens_text,
)
from planner_site.errors import Conflict, NotFound, TooMany

PAGE_SIZE = 25
DETAIL = "crews/run_detail.html"


def _detail_url(run: Run, anchor: str = "") -> str:
    return reverse("crews:run-detail", args=[run.pk]) + (f"#{anchor}" if anchor else "")


def run_context(request: HtmxHttpRequest, run: Run, **extra: Any) -> dict[str, Any]:
    view = RunView.build(run)
    if view.has_pending_prompts:
        # A person's answer is stored before the agent takes it up (and says so in an event).
        decided = dict(ToolApproval.objects.filter(run=run).exclude(status=ToolApproval.Status.PENDING)
                       .values_list("approval_id", "status"))
        pending = FeedbackRequest.objects.filter(run=run, status=FeedbackRequest.Status.PENDING).exists()
        view.overlay_people(decided=decided, feedback_pending=pending)
    return {
        "run": run,
        "view": view,
        "can_write": selectors.run_can_write(user=request.user, run=run),
        # Tasks edited between the approval of the run's plan and its kickoff: said plainly.
        "plan_changes": selectors.run_plan_changes(run=run),
        # The page shows every event up to last_seq; the socket sends only what comes after.
        "ws_url": f"/ws/runs/{run.pk}/?after={view.last_seq}",
        **extra,
    }


def _error_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return str(getattr(exc, "detail", exc))


def _answer(request: HtmxHttpRequest, run: Run, part: str, *, error: str = "", success: str = "",
            anchor: str = "", **extra: Any) -> HttpResponse:
    """htmx: the changed part of the run page. A plain form: back to the page, with a message."""
    if request.htmx:
        context = run_context(request, run, message=error or success, message_is_error=bool(error))
        view: RunView = context["view"]
        if "task_key" in extra:
            context["task"] = next((t for t in view.all_tasks if t.key == extra["task_key"]), None)
        if "approval_key" in extra:
            found = [(t, a) for t in view.all_tasks for a in t.approvals if a.approval_id == extra["approval_key"]]
            if found:
                context["task"], context["approval"] = found[0]
        missing = (part == "task-prompt" and context.get("task") is None) or (
            part == "approval" and "approval" not in context)
        if missing:  # no such prompt on the page (any more): the message goes to the controls
            response = render(request, f"{DETAIL}#run-controls", context)
            return reswap(retarget(response, "#run-controls"), "outerHTML")
        return render(request, f"{DETAIL}#{part}", context)
    if error:
        messages.error(request, error)
    elif success:
        messages.success(request, success)
    return redirect_after_post(request, _detail_url(run, anchor))


# The run page ------------------------------------------------------------------------------------


@require_GET
@domain_errors
def run_detail(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    return render(request, DETAIL, run_context(request, run))


@require_GET
@domain_errors
def run_output(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """The run's final answer as a Markdown file."""
    run = selectors.run_get(user=request.user, run_id=run_id)
    if not run.output:
        raise Http404(_("This run has no output yet."))
    response = HttpResponse(run.output, content_type="text/markdown; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.md"'
    return response


@require_GET
@domain_errors
@vary_on_headers("HX-Request")  # one URL, two answers (fragment or page): caches must tell them apart
def run_step_result(request: HtmxHttpRequest, run_id: int, seq: int) -> HttpResponse:
    """A step's result or a task's answer: what event number ``seq`` (its ``step.completed``
    or ``task.completed``) carries, as sanitised markdown.

    The run page loads it when its "Result" (or a finished crew run's "Answer") disclosure
    first opens: a long run has hundreds, and rendering them all made the page slow. With htmx
    the answer is the markdown alone; without JavaScript the disclosure's link opens it as a
    page. Stored events never change, so the seq names the text for good.
    """
    run = selectors.run_get(user=request.user, run_id=run_id)
    loaded = selectors.run_loaded_text(run=run, seq=seq)
    if loaded is None:
        raise Http404
    context: dict[str, Any] = {"run": run, "result_html": markdown(loaded.text)}
    if request.htmx:
        return render(request, "crews/run_step_result.html#result", context)
    task_key = str(loaded.task_id) if loaded.task_id is not None else RUN_SCOPE
    if loaded.type == "step.completed":
        anchor = f"step-{task_key}-{dom_key(loaded.step_id or '')}"
    else:
        anchor = f"answer-{task_key}"
    context.update(step_number=loaded.number, task_name=loaded.task_name, back_url=_detail_url(run, anchor))
    return render(request, "crews/run_step_result.html", context)


@require_GET
@domain_errors
@vary_on_headers("HX-Request")  # one URL, two answers (fragment or page): caches must tell them apart
def run_llm_call(request: HtmxHttpRequest, run_id: int, seq: int) -> HttpResponse:
    """What the LLM call that event ``seq`` ended (its ``llm.completed`` or ``llm.failed``) was
    sent and what came back, scrubbed of keys, so a person can check that the approved plan
    reached the model (ENGINE.md §2b).

    The run page loads it when the call's row first opens, as a step's result; without
    JavaScript the row's link opens it as a page. Everything in it is the model's or the
    people's text: escaped by the template, never marked safe.
    """
    run = selectors.run_get(user=request.user, run_id=run_id)
    call = selectors.run_llm_call(run=run, seq=seq)
    context: dict[str, Any] = {"run": run, "call": call,
                               "messages": [_shown_message(m) for m in call.messages] if call else []}
    if request.htmx:
        return render(request, "crews/run_llm_call.html#call", context)
    context["back_url"] = _detail_url(run)
    return render(request, "crews/run_llm_call.html", context)


def _shown_message(message: Any) -> dict[str, Any]:
    """A request message as the page shows it: who said it, its text, the tools it called."""
    if not isinstance(message, dict):
        return {"role": "", "label": "", "name": "", "text": _as_text(message), "tool_calls": []}
    role = str(message.get("role") or "")
    labels = {"system": _("System"), "user": _("User"), "assistant": _("Assistant"), "tool": _("Tool result")}
    calls = [c.get("function") or {} for c in message.get("tool_calls") or () if isinstance(c, dict)]
    return {
        "role": role, "label": labels.get(role, role), "name": str(message.get("name") or ""),
        "text": _as_text(message.get("content")),
        "tool_calls": [{"name": str(c.get("name") or ""), "arguments": str(c.get("arguments") or "")} for c in calls],
    }


def _as_text(content: Any) -> str:
    """A message's content as text: content parts give their text, anything else its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str) else _as_text(p)
                         for p in content)
    return json.dumps(content, ensure_ascii=False, indent=2, default=str)


@require_POST
@domain_errors
def run_stop(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id, for_write=True)
    try:
        stopped = runs.run_cancel(actor=request.user, run=run)
    except Conflict as exc:
        return _answer(request, run, "run-controls", error=exc.detail)
    if stopped.status == Run.Status.CANCELLED:
        return _answer(request, run, "run-controls", success=_("The run is stopped."))
    return _answer(request, run, "run-controls", success=_("Stopping the run…"))


@require_POST
@domain_errors
def run_feedback(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """Send feedback on a task's answer; "Looks good" (or an empty text) accepts it."""
    run = selectors.run_get(user=request.user, run_id=run_id, for_write=True)
    accept = request.POST.get("action") == "accept"
    text = "" if accept else request.POST.get("text", "")
    key = request.POST.get("task", "")
    try:
        runs.run_feedback(actor=request.user, run=run, text=text)
    except (Conflict, ValidationError) as exc:
        return _answer(request, run, "task-prompt", error=_error_text(exc), anchor=f"prompt-{key}",
                       task_key=key)
    done = _("Answer accepted.") if not text.strip() else _("Feedback sent: the agent revises its answer.")
    return _answer(request, run, "task-prompt", success=done, anchor=f"prompt-{key}", task_key=key)


@require_POST
@domain_errors
def run_approval(request: HtmxHttpRequest, run_id: int, approval_id: str) -> HttpResponse:
    """Allow or refuse a tool call the agent wants to make."""
    run = selectors.run_get(user=request.user, run_id=run_id, for_write=True)
    decision = request.POST.get("decision")
    anchor = f"approval-{approval_id}"
    if decision not in ("approve", "deny"):
        return _answer(request, run, "approval", error=_("Choose Approve or Deny."), anchor=anchor,
                       approval_key=approval_id)
    try:
        runs.run_decide_approval(actor=request.user, run=run, approval_id=approval_id,
                                 approve=decision == "approve", note=request.POST.get("note", ""))
    except (Conflict, NotFound) as exc:
        return _answer(request, run, "approval", error=exc.detail, anchor=anchor, approval_key=approval_id)
    done = _("Approved: the agent goes on.") if decision == "approve" else _("Denied: the agent is told not to.")
    return _answer(request, run, "approval", success=done, anchor=anchor, approval_key=approval_id)


@require_POST
@domain_errors
def run_rerun(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """The same inputs and plan again, optionally from a task (earlier outputs are reused)."""
    run = selectors.run_get(user=request.user, run_id=run_id, for_write=True)
    raw = request.POST.get("from_task", "")
    try:
        from_task = int(raw) if raw else None
        new = runs.run_rerun(actor=request.user, run=run, from_task_id=from_task)
    except ValueError:
        return _answer(request, run, "run-controls", error=_("Choose a task of this run."))
    except (ValidationError, Conflict, TooMany) as exc:
        return _answer(request, run, "run-controls", error=_error_text(exc))
    messages.success(request, _("Run #%(id)s started.") % {"id": new.pk})
    return redirect_after_post(request, _detail_url(new))


@require_POST
@domain_errors
def run_resume(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """An interrupted run goes on from its first unfinished task."""
    run = selectors.run_get(user=request.user, run_id=run_id, for_write=True)
    try:
        runs.run_resume(actor=request.user, run=run)
    except Conflict as exc:
        return _answer(request, run, "run-controls", error=exc.detail)
    messages.success(request, _("The run goes on from its first unfinished task."))
    # The whole page again: its socket follows the resumed run from the first new event.
    return redirect_after_post(request, _detail_url(run))


# History -----------------------------------------------------------------------------------------


@dataclass
class RunRow:
    run: Run

    @property
    def subject(self) -> str:
        if self.run.crew is not None:
            return self.run.crew.name
        if self.run.agent is not None:
            return self.run.agent.name
        return "—"

    @property
    def detail(self) -> str:
        return self.run.message if self.run.crew_id is None else ""

    @property
    def starter(self) -> str:
        person = self.run.created_by
        return person.get_full_name() or person.get_username()

    @property
    def status_label(self) -> str:
        return run_status_label(self.run.status)

    @property
    def status_tone(self) -> str:
        return RUN_STATUS_TONE.get(self.run.status, "muted")

    @property
    def duration(self) -> str:
        return duration_text(run_duration(self.run))

    @property
    def tokens(self) -> str:
        return tokens_text(self.run.prompt_tokens + self.run.completion_tokens)


def _history(request: HtmxHttpRequest, crew: Crew | None) -> HttpResponse:
    crew_id = crew.pk if crew else None
    form = RunFilterForm(
        request.GET,
        crews=None if crew else selectors.run_crews(user=request.user),
        starters=selectors.run_starters(user=request.user, crew_id=crew_id),
    )
    filters = {"crew_id": crew_id, **form.filters()}
    runs_qs = selectors.run_list(user=request.user, **filters)
    page = Paginator(runs_qs, PAGE_SIZE).get_page(request.GET.get("page"))
    here = reverse("crews:crew-runs", args=[crew.pk]) if crew else reverse("crews:run-list")
    context = {
        "crew": crew,
        "page": page,
        "rows": [RunRow(r) for r in page],
        "form": form,
        "here": here,
        "filter_query": form.query(),
    }
    template = "crews/run_list.html"
    # Back after hx-push-url may ask htmx for a page it no longer holds: that gets the whole page.
    if request.htmx and not request.htmx.history_restore_request:
        template += "#run-history"
    return render(request, template, context)


@require_GET
@vary_on_headers("HX-Request")
@domain_errors
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    return _history(request, None)


@require_GET
@vary_on_headers("HX-Request")
@domain_errors
def crew_runs(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = selectors.crew_get(user=request.user, crew_id=crew_id)
    return _history(request, crew)


def recent_runs(*, user: Any, crew: Crew, limit: int = 5) -> list[Run]:
    """The ``runs`` of ``crews/_recent_runs.html`` on the crew page."""
    return list(selectors.run_list(user=user, crew_id=crew.pk)[:limit])


@require_POST
@domain_errors
def agent_ask(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    """Ask an agent something directly: a run of that agent alone, watched on its run page.

    A crews page: a run belongs to the crews app, and the agents app knows nothing of runs."""
    agent = agent_selectors.agent_get(user=request.user, agent_id=agent_id, for_write=True)
    message = request.POST.get("message", "")
    try:
        run = runs.run_kickoff_agent(actor=request.user, agent=agent, message=message)
    except (ValidationError, TooMany) as exc:
        error = " ".join(exc.messages) if isinstance(exc, ValidationError) else exc.detail
        context = {**agent_detail_context(request, agent), "ask_error": error, "ask_message": message}
        template = "agents/agent_detail.html"
        if request.htmx:
            template += "#ask-form"
        return render(request, template, context, status=422 if not request.htmx else 200)
    return redirect_after_post(request, reverse("crews:run-detail", args=[run.pk]))


urlpatterns: list[URLPattern] = [
    path("agents/<int:agent_id>/ask/", agent_ask, name="agent-ask"),
    path("runs/", run_list, name="run-list"),
    path("crews/<int:crew_id>/runs/", crew_runs, name="crew-runs"),
    path("runs/<int:run_id>/", run_detail, name="run-detail"),
    path("runs/<int:run_id>/output.md", run_output, name="run-output"),
    path("runs/<int:run_id>/events/<int:seq>/result/", run_step_result, name="run-step-result"),
    path("runs/<int:run_id>/events/<int:seq>/llm-call/", run_llm_call, name="run-llm-call"),
    path("runs/<int:run_id>/stop/", run_stop, name="run-stop"),
    path("runs/<int:run_id>/feedback/", run_feedback, name="run-feedback"),
    path("runs/<int:run_id>/approvals/<str:approval_id>/", run_approval, name="run-approval"),
    path("runs/<int:run_id>/rerun/", run_rerun, name="run-rerun"),
    path("runs/<int:run_id>/resume/", run_resume, name="run-resume"),
]
