"""The REST API root: authentication, the error format of API.md, health, and each app's router."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import connection
from django.db.models import prefetch_related_objects
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.parser import Parser
from ninja.security import APIKeyCookie, HttpBearer

from planner_site.body_checks import BodyRefused, loads_checked
from planner_site.errors import Conflict, DomainError, Forbidden, NotFound, TooMany
from planner_site.openapi import PlannerAPI


class SessionAuth(APIKeyCookie):
    """The browser's session cookie, with Django's CSRF check on unsafe methods."""

    param_name = "sessionid"

    def __call__(self, request: HttpRequest) -> Any:
        # Not signed in is a 401, whatever the CSRF token says: check CSRF only for a session.
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return user
        return None


class BearerAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        from planner_site.tokens import user_for_token

        user = user_for_token(token)
        if user is not None:
            if not user.is_superuser:
                # Each role check reads the user's groups (planner_site.roles), up to three times
                # in a request that changes something: once here instead, as a prefetch. This user object lives for this request only, so a changed
                # role holds from the next one.
                prefetch_related_objects([user], "groups")
            request.user = user  # selectors and services read request.user
        return user


class JSONParser(Parser):
    """Bodies are strict JSON: Python's NaN and Infinity extensions are refused, and so is what no
    field may hold (``planner_site.body_checks``): a NUL character (SQLite would keep it,
    PostgreSQL fails on it: refused on both), a lone surrogate, a number beyond a float's range
    (``1e400``, a 422 naming its field), nesting deeper than its limit. Integers stay strict:
    ``3.0`` is refused for an integer field, as ``"3"`` and ``true`` are."""

    def parse_body(self, request: HttpRequest) -> Any:
        def refuse(constant: str) -> None:
            raise ValueError(f"{constant} is not JSON")

        body = request.body
        # Decoded as json.loads would (UTF-8, -16 or -32), so an escaped NUL is seen in any of them.
        text = body.decode(json.detect_encoding(body)) if isinstance(body, bytes) else body
        return loads_checked(text, parse_constant=refuse)


api = PlannerAPI(
    title="Crew Planner API",
    version="1",
    description="Build crews of AI agents, draft and edit their plans, run them and follow the events.",
    auth=[BearerAuth(), SessionAuth(csrf=True)],
    urls_namespace="api",
    docs_url="/docs",
    parser=JSONParser(),
)


def error_response(
    request: HttpRequest, status: int, detail: str, code: str, errors: list[dict[str, str]] | None = None
) -> HttpResponse:
    return api.create_response(
        request, {"detail": detail, "code": code, "errors": errors or []}, status=status
    )


def _loc_to_field(loc: list[Any] | tuple[Any, ...]) -> str:
    # ninja locations look like ("body", "payload", "name"): keep the part a client knows.
    parts = [str(p) for p in loc if p not in ("body", "payload", "query", "path", "header")]
    return ".".join(parts) or "body"


@api.exception_handler(NinjaValidationError)
def on_ninja_validation(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors = [{"field": _loc_to_field(e.get("loc", ())), "message": e.get("msg", "invalid")} for e in exc.errors]
    first = errors[0] if errors else {"field": "body", "message": "invalid"}
    return error_response(request, 422, f"{first['field']}: {first['message']}", "invalid", errors)


@api.exception_handler(DjangoValidationError)
def on_django_validation(request: HttpRequest, exc: DjangoValidationError) -> HttpResponse:
    errors: list[dict[str, str]] = []
    if hasattr(exc, "error_dict"):
        for field, field_errors in exc.message_dict.items():
            name = "body" if field == "__all__" else field
            errors.extend({"field": name, "message": m} for m in field_errors)
    else:
        errors.extend({"field": "body", "message": m} for m in exc.messages)
    first = errors[0]
    detail = first["message"] if first["field"] == "body" else f"{first['field']}: {first['message']}"
    return error_response(request, 422, detail, "invalid", errors)


_DOMAIN_STATUS = ((NotFound, 404), (Forbidden, 403), (Conflict, 409), (TooMany, 429))


@api.exception_handler(DomainError)
def on_domain_error(request: HttpRequest, exc: DomainError) -> HttpResponse:
    status = next((s for cls, s in _DOMAIN_STATUS if isinstance(exc, cls)), 422)
    errors = [{"field": exc.field, "message": exc.detail}] if exc.field else []
    response = error_response(request, status, exc.detail, exc.code, errors)
    if getattr(exc, "retry_after", None):  # a daily budget: refused until the site's next day
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(RequestDataTooBig)
def on_body_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Django's own answer would be its HTML 400 page; a client of the API reads this one.
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    message = _("The request body is larger than %(n)s bytes.") % {"n": limit}
    return error_response(request, 413, message, "too_large", [{"field": "body", "message": message}])


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return error_response(request, 401, _("Sign in, or send an API token as Authorization: Bearer."), "unauthenticated")


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    if exc.status_code == 400 and isinstance(exc.__cause__, BodyRefused):
        field, message = exc.__cause__.field, exc.__cause__.message
        return error_response(request, 422, f"{field}: {message}", "invalid", [{"field": field, "message": message}])
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
        # ninja's "Cannot parse request body": the input is invalid, like any other (API.md).
        message = _("The request body is not valid JSON.")
        return error_response(
            request, 422, message, "invalid_json", [{"field": "body", "message": message}]
        )
    codes = {400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found", 405: "method_not_allowed", 409: "conflict", 422: "invalid", 429: "rate_limited"}
    return error_response(request, exc.status_code, str(exc), codes.get(exc.status_code, "error"))


@api.get("/health", auth=None, tags=["health"], summary="Is the service up?")
def health(request: HttpRequest) -> dict[str, str]:
    from planner_site.models import WorkerBeat

    database = "ok"
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # noqa: BLE001 - health reports, never raises
        database = "error"
    channel_layer = _channel_layer_status()
    worker = "none"
    if warming():
        worker = "warming"  # this process's workers are loading what a run needs
    elif database == "ok":
        recent = timezone.now() - timedelta(seconds=30)
        if WorkerBeat.objects.filter(seen_at__gte=recent).exists():
            worker = "ok"
    status = "ok" if database == "ok" and channel_layer == "ok" else "error"
    return {"status": status, "database": database, "channel_layer": channel_layer, "worker": worker}


def warming() -> bool:
    """This process serves runs (``serve`` with workers) that are still warming up."""
    from planner_site.warmup import is_warm, warming_started

    return warming_started() and not is_warm()


def _channel_layer_status() -> str:
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    if layer is None:
        return "none"

    async def round_trip() -> bool:
        channel = await layer.new_channel()
        marker = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "marker": marker})
        message = await asyncio.wait_for(layer.receive(channel), timeout=2)
        return message.get("marker") == marker

    try:
        return "ok" if async_to_sync(round_trip)() else "error"
    except Exception:  # noqa: BLE001
        return "error"


from agents.api import router as agents_router  # noqa: E402
from crews.api import router as crews_router  # noqa: E402
from crews.api_interop import router as interop_router  # noqa: E402
from crews.api_outputs import router as outputs_router  # noqa: E402
from knowledge.api import router as knowledge_router  # noqa: E402
from planner_site.api_usage import router as usage_router  # noqa: E402

api.add_router("/", agents_router)
api.add_router("/", interop_router)  # before crews: /crews/{id} would take /crews/import
api.add_router("/", crews_router)
api.add_router("/", outputs_router)
api.add_router("/", knowledge_router)
api.add_router("/", usage_router)
