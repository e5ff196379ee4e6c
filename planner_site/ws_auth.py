"""Websocket authentication (the session cookie, or an ``Authorization: Bearer`` API token) and
the handshake's origin check (``SameOriginValidator``).

``scope["user"]`` is lazy: it is read from the database the first time it is used, which the run
sockets do in their one database hop at connect, instead of in a hop of its own here (a thread
hop, and without persistent connections a new database connection). Like any user object it
reads the database, so touch it only in synchronous code (``database_sync_to_async``): on the
event loop Django refuses with ``SynchronousOnlyOperation``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import WebsocketDenier
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.functional import SimpleLazyObject
from django.utils.http import is_same_domain


def _token_user(raw: str) -> Any:
    from django.contrib.auth.models import AnonymousUser

    from planner_site.tokens import user_for_token

    return user_for_token(raw) or AnonymousUser()


class LazySessionAuthMiddleware(AuthMiddleware):
    """Channels' ``AuthMiddleware`` (the session's user, else anonymous), read on first use."""

    def populate_scope(self, scope: dict[str, Any]) -> None:
        if "session" not in scope:
            super().populate_scope(scope)  # raises channels' own error
        if "user" not in scope:
            scope["user"] = SimpleLazyObject(lambda: get_user.func(scope))

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        return None


class BearerTokenMiddleware(BaseMiddleware):
    """A valid bearer token's user goes straight to ``inner``; anything else takes ``sessions``.

    The token wins over a session cookie, so a token client skips the session stack. Without a
    valid token, the session decides. API clients send no cookie, so there is no session to fall
    back on: the token alone decides, looked up when the user is first used (anonymous for a bad
    token). With a cookie, it is looked up here, to know whether the session decides.
    """

    def __init__(self, inner: Any, sessions: Any) -> None:
        super().__init__(inner)
        self.sessions = sessions

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            raw = auth[7:].strip()
            if b"cookie" not in headers:
                user = SimpleLazyObject(lambda: _token_user(raw))
                return await super().__call__(dict(scope, user=user), receive, send)
            user = await database_sync_to_async(_token_user)(raw)
            if user.is_authenticated:
                return await super().__call__(dict(scope, user=user), receive, send)
        return await self.sessions(scope, receive, send)


def WebsocketAuthMiddlewareStack(inner: Any) -> Any:  # noqa: N802 - mirrors channels' naming
    sessions = CookieMiddleware(SessionMiddleware(LazySessionAuthMiddleware(inner)))
    return BearerTokenMiddleware(inner, sessions)


# An origin as compared: (scheme, host, port), the port filled in from the scheme.
Origin = tuple[str, str, int]
DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, netloc: str) -> Origin | None:
    """``scheme://netloc`` as an ``Origin``; None for anything but a plain http(s) origin."""
    if scheme not in DEFAULT_PORTS or not netloc:
        return None
    try:
        parsed = urlsplit(f"{scheme}://{netloc}")
        port = parsed.port
    except ValueError:
        return None
    if not parsed.hostname or parsed.path or parsed.username or parsed.password:
        return None
    return scheme, parsed.hostname, port or DEFAULT_PORTS[scheme]


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    value = next((v for n, v in headers if n == name), None)
    return None if value is None else value.decode("latin-1")


def request_origin(scope: dict[str, Any]) -> Origin | None:
    """The handshake's own origin, as Django's CSRF check computes it for a request:
    ``https`` when the connection is TLS (or the proxy says so, per
    ``SECURE_PROXY_SSL_HEADER``), else ``http``; the host and port of the Host header
    (``X-Forwarded-Host`` with ``USE_X_FORWARDED_HOST``), which must be in ``ALLOWED_HOSTS``."""
    headers = list(scope.get("headers") or ())
    secure = scope.get("scheme") in ("wss", "https")
    if settings.SECURE_PROXY_SSL_HEADER:
        name, value = settings.SECURE_PROXY_SSL_HEADER
        proxied = _header(headers, name.removeprefix("HTTP_").replace("_", "-").lower().encode())
        if proxied is not None:
            secure = proxied.split(",", 1)[0].strip() == value
    host = _header(headers, b"x-forwarded-host") if settings.USE_X_FORWARDED_HOST else None
    host = (host or _header(headers, b"host") or "").split(",", 1)[0].strip()
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as Django's HttpRequest.get_host()
    if not domain or not validate_host(domain, allowed):
        return None
    return _origin("https" if secure else "http", host)


def origin_allowed(scope: dict[str, Any], origin: str) -> bool:
    """Whether ``origin`` (an ``Origin`` header) may open a socket here: the same scheme, host
    and port as the handshake itself (``request_origin``), or one of ``CSRF_TRUSTED_ORIGINS``
    (``https://*.example.com`` for any subdomain) — Django's CSRF origin check, with default
    ports made explicit (``http://h`` is ``http://h:80``)."""
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    theirs = _origin(parsed.scheme, parsed.netloc)
    if theirs is None:  # "null" (a sandboxed page, a file), or not http(s)
        return False
    if theirs == request_origin(scope):
        return True
    for trusted in settings.CSRF_TRUSTED_ORIGINS:
        pattern = urlsplit(trusted)
        if "*" in pattern.netloc:
            if pattern.scheme == parsed.scheme and is_same_domain(parsed.netloc, pattern.netloc.lstrip("*")):
                return True
        elif _origin(pattern.scheme, pattern.netloc) == theirs:
            return True
    return False


class SameOriginValidator:
    """Refuses a handshake from another site's page: Django's CSRF origin rule for websockets.

    Channels' ``AllowedHostsOriginValidator`` checks the Origin's host alone, so a page on
    another port or scheme of an allowed host (``http://127.0.0.1:9999``) could open a socket
    with the visitor's session cookie. Here an ``Origin`` header must name this site's scheme,
    host and port exactly (``origin_allowed``).

    A handshake without ``Origin`` is not a browser's (browsers always send it on websockets):
    it is refused when it carries a cookie, which only a browser's ambient authority would
    bring, and served otherwise. API clients (Python's ``websockets``, Node's ``ws``) send no
    Origin and authenticate with a bearer token, a header no browser page can set on a
    websocket; a handshake with neither is closed 4401 by the consumer.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = list(scope.get("headers") or ())
        origin = _header(headers, b"origin")
        if origin is None:
            allowed = not any(name == b"cookie" for name, _value in headers)
        else:
            allowed = origin_allowed(scope, origin)
        if allowed:
            return await self.inner(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
