"""Websocket authentication: the session cookie, or an ``Authorization: Bearer`` API token.

``scope["user"]`` is lazy: it is read from the database the first time it is used, which the run
sockets do in their one database hop at connect, instead of in a hop of its own here (a thread
hop, and without persistent connections a new database connection). Like any user object it
reads the database, so touch it only in synchronous code (``database_sync_to_async``): on the
event loop Django refuses with ``SynchronousOnlyOperation``.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from channels.security.websocket import AllowedHostsOriginValidator
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.utils.functional import SimpleLazyObject


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


class CookieOriginValidator:
    """Channels' ``AllowedHostsOriginValidator``, for handshakes that carry cookies.

    The origin check stops another site's page from opening a socket with the visitor's session
    cookie. A handshake without cookies has no such ambient authority to borrow: a bearer token
    is a header no browser page can put on a websocket, and a socket with neither is closed
    4401 by the consumer. So API clients, which send no ``Origin`` (Python's ``websockets``,
    Node's ``ws``), are served as API.md says instead of being refused at the handshake.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.checked = AllowedHostsOriginValidator(inner)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if any(name == b"cookie" for name, _value in scope.get("headers") or ()):
            return await self.checked(scope, receive, send)
        return await self.inner(scope, receive, send)
