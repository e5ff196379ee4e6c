"""Websocket authentication: the session cookie, or an ``Authorization: Bearer`` API token."""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware


@database_sync_to_async
def _user_for_token(raw: str) -> Any:
    from planner_site.tokens import user_for_token

    return user_for_token(raw)


class BearerTokenMiddleware(BaseMiddleware):
    """A valid bearer token's user goes straight to ``inner``; anything else takes ``sessions``.

    The token wins over a session cookie, so a token client skips the session stack and its
    database hop (API clients send no cookie). Without a valid token, the session decides.
    """

    def __init__(self, inner: Any, sessions: Any) -> None:
        super().__init__(inner)
        self.sessions = sessions

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        if auth.lower().startswith("bearer "):
            user = await _user_for_token(auth[7:].strip())
            if user is not None:
                return await super().__call__(dict(scope, user=user), receive, send)
        return await self.sessions(scope, receive, send)


def WebsocketAuthMiddlewareStack(inner: Any) -> Any:  # noqa: N802 - mirrors channels' naming
    return BearerTokenMiddleware(inner, AuthMiddlewareStack(inner))
