"""Knowledge pages: an agent's or a crew's sources (add, watch them index, delete) and "What
this crew remembers" (edit, delete, clear)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from agents.selectors import agent_get
from agents.views import HtmxHttpRequest, domain_errors
from crews.selectors import crew_can_write, crew_get
from knowledge import selectors, services
from knowledge.forms import MemoryForm, SourceForm
from knowledge.models import KnowledgeSource
from planner_site.errors import DomainError
from planner_site.roles import can_build, is_admin

PENDING = {KnowledgeSource.Status.QUEUED, KnowledgeSource.Status.INDEXING}


def _owner(request: HtmxHttpRequest, kind: str, owner_id: int, *, for_write: bool = False) -> Any:
    if kind == "agent":
        return agent_get(user=request.user, agent_id=owner_id, for_write=for_write)
    return crew_get(user=request.user, crew_id=owner_id, for_write=for_write)


def _list_url(kind: str, owner_id: int) -> str:
    return reverse(f"knowledge:source-list-{kind}", args=[owner_id])


def _can_write(request: HtmxHttpRequest, kind: str, owner: Any) -> bool:
    if kind == "crew":
        return crew_can_write(user=request.user, crew=owner)
    return is_admin(request.user) or (owner.owner_id == request.user.pk and can_build(request.user))


@require_http_methods(["GET", "POST"])
@domain_errors
def source_list(request: HtmxHttpRequest, kind: str, owner_id: int) -> HttpResponse:
    """The sources with their indexing status; the rows re-render every second while one is
    queued or indexing (the ``source-rows`` fragment)."""
    owner = _owner(request, kind, owner_id, for_write=request.method == "POST")
    form = SourceForm()
    if request.method == "POST":
        form = SourceForm(request.POST, request.FILES)
        if form.is_valid():
            upload = form.cleaned_data.get("file")
            try:
                if upload is not None:
                    if upload.size > services.settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES:
                        raise services.too_large()
                    services.source_create(actor=request.user, owner=owner, title=form.cleaned_data["title"],
                                           filename=upload.name or "file", data=upload.read())
                else:
                    services.source_create(actor=request.user, owner=owner, title=form.cleaned_data["title"],
                                           data=form.cleaned_data["text"].encode(), kind="text")
            except DomainError as exc:
                form.add_error("file" if exc.field == "file" else None, exc.detail)
            else:
                messages.success(request, _("Added. It is being indexed."))
                return redirect(_list_url(kind, owner_id))
    sources = list(selectors.source_list(owner=owner))
    template = "knowledge/source_list.html"
    if request.htmx and request.GET.get("rows"):
        template += "#source-rows"
    return render(request, template, {
        "owner": owner, "kind": kind, "sources": sources, "form": form,
        "pending": any(s.status in PENDING for s in sources), "can_edit": _can_write(request, kind, owner),
        "list_url": _list_url(kind, owner_id),
    })


@require_POST
@domain_errors
def source_delete(request: HtmxHttpRequest, source_id: int) -> HttpResponse:
    source = selectors.source_get(user=request.user, source_id=source_id, for_write=True)
    kind, owner_id = ("agent", source.agent_id) if source.agent_id else ("crew", source.crew_id)
    services.source_delete(source=source)
    messages.success(request, _("Source deleted."))
    return redirect(_list_url(kind, owner_id))


@require_http_methods(["GET"])
@domain_errors
def memory_list(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = crew_get(user=request.user, crew_id=crew_id)
    memories = list(selectors.memory_list(user=request.user, crew=crew))
    return render(request, "knowledge/memory_list.html", {
        "crew": crew, "memories": memories, "can_edit": crew_can_write(user=request.user, crew=crew),
    })


@require_POST
@domain_errors
def memory_update(request: HtmxHttpRequest, memory_id: int) -> HttpResponse:
    memory = selectors.memory_get(user=request.user, memory_id=memory_id, for_write=True)
    form = MemoryForm(request.POST)
    if form.is_valid():
        services.memory_update(memory=memory, text=form.cleaned_data["text"])
        messages.success(request, _("Memory saved."))
    else:
        messages.error(request, _("A memory cannot be empty; delete it instead."))
    return redirect("knowledge:memory-list", memory.crew_id)


@require_POST
@domain_errors
def memory_delete(request: HtmxHttpRequest, memory_id: int) -> HttpResponse:
    memory = selectors.memory_get(user=request.user, memory_id=memory_id, for_write=True)
    services.memory_delete(memory=memory)
    messages.success(request, _("Memory deleted."))
    return redirect("knowledge:memory-list", memory.crew_id)


@require_POST
@domain_errors
def memories_clear(request: HtmxHttpRequest, crew_id: int) -> HttpResponse:
    crew = crew_get(user=request.user, crew_id=crew_id, for_write=True)
    services.memories_clear(crew=crew, user=request.user, everyone=is_admin(request.user))
    messages.success(request, _("The crew's memory is cleared."))
    return redirect("knowledge:memory-list", crew.pk)
