"""Agent and LLM pages: list, detail, create, edit (agents: delete; LLMs: test the connection).

htmx re-renders a form in place on errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from agents import selectors, services
from agents.failures import connect_seconds, failure_view
from agents.forms import WORK_MODE_HELP, WORK_MODES, AgentForm, LLMForm, work_mode_of
from agents.probes import PROBE_CONNECT_SECONDS
from agents.tool_texts import tool_description
from agents.tools import catalogue
from planner_site.errors import Conflict, Forbidden, NotFound
from planner_site.roles import can_build, is_admin


# Typing pattern recommended by django-stubs (its README, "How can I create a HttpRequest
# that's guaranteed to have an authenticated user"), as in django-htmx's example app.
class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def domain_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Pages answer the selectors' and services' domain errors the HTTP way: 404 and 403."""

    @wraps(view)
    def wrapper(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(exc.detail) from exc
        except Forbidden as exc:
            raise PermissionDenied(exc.detail) from exc

    return wrapper


def require_builder(request: HttpRequest) -> None:
    """Viewers get a 403 before seeing a form they could not submit (the services refuse too)."""
    if not can_build(request.user):
        raise PermissionDenied(_("Your role cannot create or change agents and crews."))


def redirect_after_post(request: HtmxHttpRequest, url: str) -> HttpResponse:
    """A plain form follows a redirect; htmx would swap the next page into the form, so it is
    told to load the whole page instead."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def confirm_delete(
    request: HtmxHttpRequest,
    *,
    template: str,
    context: dict[str, Any],
    delete: Callable[[], object],
    done_message: str,
    done_url: str,
) -> HttpResponse:
    """A delete page for something a working run holds (an agent, a crew): GET asks to confirm,
    POST calls ``delete``; the service's Conflict (the run that works) is shown with a 409."""
    error = ""
    if request.method == "POST":
        try:
            delete()
        except Conflict as exc:
            error = exc.detail
        else:
            messages.success(request, done_message)
            return redirect_after_post(request, done_url)
    if request.htmx:
        template += "#delete-confirm"
    return render(request, template, {**context, "error": error}, status=409 if error else 200)


def _form_response(request: HtmxHttpRequest, form: AgentForm, *, agent: Any = None) -> HttpResponse:
    template = "agents/agent_form.html"
    if request.htmx:
        template += "#agent-form"
    return render(request, template, {"form": form, "agent": agent})


@require_GET
@domain_errors
def agent_list(request: HtmxHttpRequest) -> HttpResponse:
    agents = selectors.agent_list(user=request.user)
    return render(
        request,
        "agents/agent_list.html",
        {"agents": agents, "can_create": can_build(request.user)},
    )


def agent_detail_context(request: HtmxHttpRequest, agent: Any) -> dict[str, Any]:
    descriptions = {t["name"]: tool_description(t["name"], t["description"]) for t in catalogue()}
    options = agent.tool_options or {}
    tools = [
        {"name": name, "description": descriptions.get(name, ""), **options.get(name, {})}
        for name in agent.tools
    ]
    try:
        # Asking an agent starts a run, which is the crews app's: its URL, when it is installed.
        ask_url = reverse("crews:agent-ask", args=[agent.pk])
    except NoReverseMatch:
        ask_url = None
    mode = work_mode_of(agent)
    return {
        "agent": agent,
        "tools": tools,
        "work_mode": {"label": dict(WORK_MODES)[mode], "help": WORK_MODE_HELP[mode], "value": mode},
        "config": getattr(agent, "planning_config", None),
        "can_edit": selectors.agent_can_write(user=request.user, agent=agent),
        "ask_url": ask_url,
    }


@require_GET
@domain_errors
def agent_detail(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    agent = selectors.agent_get(user=request.user, agent_id=agent_id)
    return render(request, "agents/agent_detail.html", agent_detail_context(request, agent))


@require_http_methods(["GET", "POST"])
@domain_errors
def agent_create(request: HtmxHttpRequest) -> HttpResponse:
    require_builder(request)
    form = AgentForm(
        request.POST if request.method == "POST" else None,
        llms=selectors.llm_list(),
        tools=catalogue(),
    )
    if request.method == "POST" and form.is_valid():
        try:
            agent = services.agent_create(actor=request.user, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Agent “%(name)s” created.") % {"name": agent.name})
            return redirect_after_post(request, reverse("agents:agent-detail", args=[agent.pk]))
    return _form_response(request, form)


@require_http_methods(["GET", "POST"])
@domain_errors
def agent_update(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    agent = selectors.agent_get(user=request.user, agent_id=agent_id, for_write=True)
    form = AgentForm(
        request.POST if request.method == "POST" else None,
        llms=selectors.llm_list(),
        tools=catalogue(),
        agent=agent,
    )
    if request.method == "POST" and form.is_valid():
        try:
            agent = services.agent_update(actor=request.user, agent=agent, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("Agent “%(name)s” saved.") % {"name": agent.name})
            return redirect_after_post(request, reverse("agents:agent-detail", args=[agent.pk]))
    return _form_response(request, form, agent=agent)


@require_http_methods(["GET", "POST"])
@domain_errors
def agent_delete(request: HtmxHttpRequest, agent_id: int) -> HttpResponse:
    agent = selectors.agent_get(user=request.user, agent_id=agent_id, for_write=True)
    return confirm_delete(
        request,
        template="agents/agent_confirm_delete.html",
        context={"agent": agent},
        delete=lambda: services.agent_delete(actor=request.user, agent=agent),
        done_message=_("Agent “%(name)s” deleted.") % {"name": agent.name},
        done_url=reverse("agents:agent-list"),
    )


# LLMs (admins) ---------------------------------------------------------------------------------


def require_admin(request: HttpRequest) -> None:
    """LLMs, their keys and their tests are the admins' (the services refuse others too)."""
    if not is_admin(request.user):
        raise PermissionDenied(_("Only an admin can change LLMs and prompts."))


def _llm_form_response(request: HtmxHttpRequest, form: LLMForm, *, llm: Any = None) -> HttpResponse:
    template = "agents/llm_form.html"
    if request.htmx:
        template += "#llm-form"
    return render(request, template, {"form": form, "llm": llm})


@require_GET
@domain_errors
def llm_list(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    return render(request, "agents/llm_list.html", {"llms": selectors.llm_list()})


@require_http_methods(["GET", "POST"])
@domain_errors
def llm_create(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    if request.method == "POST" and "apply_preset" in request.POST:
        # "Apply preset" (a button without JavaScript, the select's change with htmx) fills the
        # form in; nothing is saved and nothing is flagged as missing yet.
        return _llm_form_response(request, LLMForm(request.POST).with_preset())
    form = LLMForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            llm = services.llm_create(actor=request.user, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("LLM “%(name)s” added. Test the connection to see what it accepts.") % {"name": llm.name})
            return redirect_after_post(request, reverse("agents:llm-detail", args=[llm.pk]))
    return _llm_form_response(request, form)


@require_GET
@domain_errors
def llm_detail(request: HtmxHttpRequest, llm_id: int) -> HttpResponse:
    require_admin(request)
    llm = selectors.llm_get(llm_id=llm_id)
    return render(request, "agents/llm_detail.html", llm_detail_context(llm))


def llm_detail_context(llm: Any, test: dict[str, Any] | None = None) -> dict[str, Any]:
    forms = [
        {"name": name, "label": label, "accepted": llm.accepts(name)}
        for name, label in (
            ("stream", _("Streaming")),
            ("tools", _("Native tool calls")),
            ("json_schema", _("JSON schema answers (json_schema)")),
            ("json_object", _("JSON answers (json_object)")),
        )
    ]
    caps = llm.capabilities or {}
    failure = None
    if test and not test.get("ok"):
        failure = failure_view(error=test.get("error") or "", kind=test.get("kind"), llm=llm,
                               seconds=min(connect_seconds(llm), PROBE_CONNECT_SECONDS))
        failure["llm_url"] = ""  # this is the LLM's page
    return {
        "llm": llm,
        "forms": forms,
        "test": test,
        "failure": failure,
        "tested_at": parse_datetime(caps["tested_at"]) if caps.get("tested_at") else None,
        "learned_at": parse_datetime(caps["learned_at"]) if caps.get("learned_at") else None,
        "context_source": caps.get("context_source"),
        "params_json": json.dumps(llm.params or {}),
    }


@require_http_methods(["GET", "POST"])
@domain_errors
def llm_update(request: HtmxHttpRequest, llm_id: int) -> HttpResponse:
    require_admin(request)
    llm = selectors.llm_get(llm_id=llm_id)
    form = LLMForm(request.POST if request.method == "POST" else None, instance=llm)
    if request.method == "POST" and form.is_valid():
        try:
            llm = services.llm_update(actor=request.user, llm=llm, **form.service_kwargs())
        except ValidationError as exc:
            form.add_service_errors(exc)
        else:
            messages.success(request, _("LLM “%(name)s” saved.") % {"name": llm.name})
            return redirect_after_post(request, reverse("agents:llm-detail", args=[llm.pk]))
    # The form wrote what was posted onto ``llm``: the page names the LLM as it is stored.
    return _llm_form_response(request, form, llm=selectors.llm_get(llm_id=llm_id) if form.is_bound else llm)


@require_POST
@domain_errors
def llm_test(request: HtmxHttpRequest, llm_id: int) -> HttpResponse:
    """Probe the LLM; htmx swaps in the capabilities table, a plain form gets the whole page."""
    require_admin(request)
    llm = selectors.llm_get(llm_id=llm_id)
    result = services.llm_test(actor=request.user, llm=llm)
    template = "agents/llm_detail.html"
    if request.htmx:
        template += "#llm-test-result"
    return render(request, template, llm_detail_context(llm, test=result))
