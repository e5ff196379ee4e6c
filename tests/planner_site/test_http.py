"""planner_site.http: Django's ASGI handler with the middleware chain and view in one hop."""

from __future__ import annotations

import json
from typing import Any

import django.core.handlers.asgi as django_asgi
import django.utils.deprecation as deprecation
import pytest
from asgiref import sync
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler

import planner_site.http as http
from planner_site.http import OneHopASGIHandler
from planner_site.tokens import token_create


class CountingSyncToAsync(sync.SyncToAsync):
    calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        type(self).calls += 1
        return super().__call__(*args, **kwargs)


async def _get(
    handler: ASGIHandler, path: str, headers: list[tuple[bytes, bytes]]
) -> tuple[dict[str, Any], int]:
    CountingSyncToAsync.calls = 0
    response = await HttpCommunicator(handler, "GET", path, headers=headers).get_response(
        timeout=10
    )
    return response, CountingSyncToAsync.calls


@pytest.mark.django_db(transaction=True)
async def test_one_request_hops_to_its_thread_a_few_times_not_once_per_middleware(
    builder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _token, raw = await sync_to_async(token_create)(user=builder, name="hops")
    headers = [(b"authorization", f"Bearer {raw}".encode()), (b"host", b"127.0.0.1")]
    # The hops Django's handler, its middleware mixin and ours take (signals' are not counted).
    for module in (django_asgi, deprecation, http):
        monkeypatch.setattr(module, "sync_to_async", CountingSyncToAsync)

    response, one_hop = await _get(OneHopASGIHandler(), "/api/crews", headers)
    assert response["status"] == 200
    assert json.loads(response["body"])["count"] == 0
    stock_response, stock = await _get(ASGIHandler(), "/api/crews", headers)
    assert stock_response["status"] == 200
    assert one_hop <= 4 < stock  # the chain in one hop, against one or two per middleware


@pytest.mark.django_db(transaction=True)
async def test_errors_and_sign_in_still_go_through_the_chain() -> None:
    handler = OneHopASGIHandler()
    page, _hops = await _get(handler, "/crews/", [(b"host", b"127.0.0.1")])
    assert page["status"] == 302  # the sign-in middleware redirects
    assert dict(page["headers"])[b"Location"].startswith(b"/login/")
    api, _hops = await _get(handler, "/api/crews", [(b"host", b"127.0.0.1")])
    assert api["status"] == 401
    assert b"X-Frame-Options" in dict(api["headers"])  # response middleware ran
