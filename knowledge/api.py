"""REST operations of the knowledge app: an agent's or a crew's knowledge sources, a crew's memories."""

# No ``from __future__ import annotations``: ninja reads the operations' annotations.
import json
from collections.abc import Callable
from typing import Any

import pydantic
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext as _
from ninja import Router
from ninja.errors import HttpError
from ninja.responses import Status

from agents.selectors import agent_get
from crews.selectors import crew_get
from knowledge import selectors, services
from knowledge.schemas import MemoryOut, MemoryPatch, SourceOut, SourceTextIn
from planner_site.body_checks import loads_checked
from planner_site.roles import is_admin
from planner_site.schemas import errors

router = Router(tags=["knowledge"])

_UPLOAD_BODY = {"requestBody": {"content": {
    "application/json": {"schema": SourceTextIn.model_json_schema()},
    "multipart/form-data": {"schema": {
        "type": "object",
        "properties": {
            "file": {"type": "string", "format": "binary",
                     "description": "Plain text (.txt), Markdown (.md), PDF, CSV or JSON."},
            "title": {"type": "string", "maxLength": 200},
        },
        "required": ["file"],
    }},
}, "required": True}}
_UPLOAD_HELP = (
    "Multipart with `file` (and an optional `title`), or JSON `{title, text}` for pasted text. The "
    "source is indexed in the background: follow `status` (queued, indexing, indexed or failed with "
    "`error`). Limits: PLANNER_KNOWLEDGE_MAX_FILE_BYTES a file (413), PLANNER_KNOWLEDGE_MAX_SOURCES "
    "sources each and PLANNER_KNOWLEDGE_MAX_CHUNKS chunks a source (422)."
)


def _refuse_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _create(request: HttpRequest, owner: Any) -> Any:
    if request.content_type == "multipart/form-data" or request.FILES:
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": _("Upload a file, or send JSON with title and text.")})
        if upload.size > settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES:  # refused before it is read
            return _too_large_answer(services.too_large())
        title = (request.POST.get("title") or "").strip()
        try:
            source = services.source_create(
                actor=request.user, owner=owner, title=title, filename=upload.name or "file", data=upload.read()
            )
        except services.TooLarge as exc:
            return _too_large_answer(exc)
        return Status(201, source)
    try:
        body = request.body.decode(json.detect_encoding(request.body))
        data = loads_checked(body, parse_constant=_refuse_constant)
    except ValueError as exc:  # answered as the API answers a body that is not JSON (422)
        raise HttpError(400, "Cannot parse request body") from exc
    try:
        given = SourceTextIn.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "body"
        raise ValidationError({field: first["msg"]}) from None
    try:
        source = services.source_create(
            actor=request.user, owner=owner, title=given.title, data=given.text.encode(), kind="text"
        )
    except services.TooLarge as exc:
        return _too_large_answer(exc)
    return Status(201, source)


def _too_large_answer(exc: Any) -> Any:
    return Status(413, {"detail": exc.detail, "code": exc.code, "errors": [{"field": "file", "message": exc.detail}]})


def _owner_operations(path: str, name: str, owner_get: Callable[..., Any], *, list_summary: str, create_summary: str) -> None:
    """The two source operations of an owner kind (``crews`` or ``agents``): list and add.

    ``owner_get(user=, id=, for_write=)`` finds the owner the way its app's selector does (404
    when the user may not see it); the operation ids stay ``knowledge_api_<name>_sources`` and
    ``knowledge_api_<name>_source_create``, as when each was a function of its own, and so do the
    URL names (``<name>_sources``, ``<name>_source_create``): named after the inner functions, both
    owner kinds' would share one name and ``reverse`` would find only one of them.
    """

    @router.get(f"/{path}/{{id}}/knowledge", response={200: list[SourceOut], **errors(404, 422)},
                summary=list_summary, operation_id=f"knowledge_api_{name}_sources", url_name=f"{name}_sources")
    def sources(request: HttpRequest, id: int) -> Any:
        return list(selectors.source_list(owner=owner_get(user=request.user, id=id, for_write=False)))

    @router.post(f"/{path}/{{id}}/knowledge", response={201: SourceOut, **errors(404, 413, 422)},
                 summary=create_summary, description=_UPLOAD_HELP, openapi_extra=_UPLOAD_BODY,
                 operation_id=f"knowledge_api_{name}_source_create", url_name=f"{name}_source_create")
    def source_create(request: HttpRequest, id: int) -> Any:
        return _create(request, owner_get(user=request.user, id=id, for_write=True))


_owner_operations(
    "crews", "crew", lambda *, user, id, for_write: crew_get(user=user, crew_id=id, for_write=for_write),
    list_summary="A crew's knowledge sources (all its agents read them)",
    create_summary="Add a knowledge source to a crew",
)
_owner_operations(
    "agents", "agent", lambda *, user, id, for_write: agent_get(user=user, agent_id=id, for_write=for_write),
    list_summary="An agent's own knowledge sources (only it reads them)",
    create_summary="Add a knowledge source to an agent",
)


@router.get("/knowledge/{id}", response={200: SourceOut, **errors(404, 422)}, summary="A knowledge source")
def source_detail(request: HttpRequest, id: int) -> Any:
    return selectors.source_get(user=request.user, source_id=id)


@router.delete("/knowledge/{id}", response={204: None, **errors(404, 422)},
               summary="Delete a knowledge source and its index")
def source_delete(request: HttpRequest, id: int) -> Any:
    source = selectors.source_get(user=request.user, source_id=id, for_write=True)
    services.source_delete(source=source)
    return Status(204, None)


@router.get("/crews/{id}/memories", response={200: list[MemoryOut], **errors(404, 422)},
            summary="What the crew remembers from your runs")
def crew_memories(request: HttpRequest, id: int) -> Any:
    crew = crew_get(user=request.user, crew_id=id)
    return list(selectors.memory_list(user=request.user, crew=crew))


@router.delete("/crews/{id}/memories", response={204: None, **errors(404, 422)},
               summary="Forget everything the crew remembers from your runs")
def crew_memories_clear(request: HttpRequest, id: int) -> Any:
    crew = crew_get(user=request.user, crew_id=id, for_write=True)
    services.memories_clear(crew=crew, user=request.user, everyone=is_admin(request.user))
    return Status(204, None)


@router.patch("/memories/{id}", response={200: MemoryOut, **errors(404, 422)}, summary="Correct a memory")
def memory_update(request: HttpRequest, id: int, payload: MemoryPatch) -> Any:
    memory = selectors.memory_get(user=request.user, memory_id=id, for_write=True)
    return services.memory_update(memory=memory, text=payload.text)


@router.delete("/memories/{id}", response={204: None, **errors(404, 422)}, summary="Forget a memory")
def memory_delete(request: HttpRequest, id: int) -> Any:
    memory = selectors.memory_get(user=request.user, memory_id=id, for_write=True)
    services.memory_delete(memory=memory)
    return Status(204, None)
