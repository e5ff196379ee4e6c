"""Websocket authentication: the session cookie, or an ``Authorization: Bearer`` API token."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.utils.functional import SimpleLazyObject


def _token_user(raw: str) -> Any:
    from django.contrib.auth.models import AnonymousUser

    from planner_site.tokens import user_for_token

    return user_for_token(raw) or AnonymousUser()


class BearerTokenMiddleware(BaseMiddleware):
    """A valid bearer token's user goes straight to ``inner``; anything else takes ``sessions``.

    The token wins over a session cookie, so a token client skips the session stack and its
    database hop. Without a valid token, the session decides.

    API clients send no cookie, so there is no session to fall back on: the token alone decides,
    and ``scope["user"]`` is left lazy (anonymous for a bad token). The consumer resolves it in
    its own first database hop, not in one more hop of its own here. Like any user object it
    reads the database, so touch it only in synchronous code (``database_sync_to_async``): on
    the event loop Django refuses with ``SynchronousOnlyOperation``.
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
    return BearerTokenMiddleware(inner, AuthMiddlewareStack(inner))
