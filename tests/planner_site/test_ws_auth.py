"""Websocket authentication: a valid bearer token names the user, else the session cookie does."""

from __future__ import annotations

from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.core.exceptions import SynchronousOnlyOperation
from django.test import Client

from planner_site.tokens import token_create
from planner_site.ws_auth import WebsocketAuthMiddlewareStack

pytestmark = pytest.mark.django_db(transaction=True)


def cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def scope_seen(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def username(user: Any) -> str | None:
        return user.username if user.is_authenticated else None

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        # A user may be lazy (a token without a cookie): read it off the event loop, as consumers do.
        seen.update(scope, username=await database_sync_to_async(username)(scope["user"]))

    scope = {"type": "websocket", "path": "/ws/api/runs/1/", "headers": headers}
    await WebsocketAuthMiddlewareStack(inner)(scope, None, None)
    return seen


async def test_a_valid_token_wins_over_a_session_and_skips_the_session_stack(builder, other_builder):
    _token, raw = await database_sync_to_async(token_create)(user=builder)
    session = await database_sync_to_async(cookie)(other_builder)

    seen = await scope_seen([session, (b"authorization", f"Bearer {raw}".encode())])

    assert seen["username"] == builder.username
    assert "session" not in seen  # no session lookup for a token client


@pytest.mark.parametrize("token", [None, b"Bearer cp_nope", b"Bearer "])
async def test_without_a_valid_token_the_session_decides(other_builder, token):
    headers = [await database_sync_to_async(cookie)(other_builder)]
    if token is not None:
        headers.append((b"authorization", token))

    assert (await scope_seen(headers))["username"] == other_builder.username
    assert (await scope_seen(headers[1:]))["username"] is None


async def test_a_token_without_a_cookie_is_looked_up_only_when_the_user_is_read(builder):
    _token, raw = await database_sync_to_async(token_create)(user=builder)
    scopes: list[dict[str, Any]] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        scopes.append(scope)

    scope = {"type": "websocket", "headers": [(b"authorization", f"Bearer {raw}".encode())]}
    await WebsocketAuthMiddlewareStack(inner)(scope, None, None)
    user = scopes[0]["user"]

    with pytest.raises(SynchronousOnlyOperation):  # not on the event loop: in a database hop
        _ = user.is_authenticated
    assert await database_sync_to_async(lambda: user.pk)() == builder.pk
    assert "session" not in scopes[0]
