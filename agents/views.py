"""Agent pages: list, detail, create, edit, delete. htmx re-renders a form in place on errors."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from agents import selectors, services
from agents.forms import AgentForm
from agents.tools import catalogue
from planner_site.errors import Forbidden, NotFound
from planner_site.roles import can_build


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
    descriptions = {tool["name"]: tool["description"] for tool in catalogue()}
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
    return {
        "agent": agent,
        "tools": tools,
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
    if request.method == "POST":
        services.agent_delete(actor=request.user, agent=agent)
        messages.success(request, _("Agent “%(name)s” deleted.") % {"name": agent.name})
        return redirect_after_post(request, reverse("agents:agent-list"))
    template = "agents/agent_confirm_delete.html"
    if request.htmx:
        template += "#delete-confirm"
    return render(request, template, {"agent": agent})
