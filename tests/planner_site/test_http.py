"""planner_site.http: Django's ASGI handler with the middleware chain and view in one hop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import django.core.handlers.asgi as django_asgi
import django.utils.deprecation as deprecation
import pytest
from asgiref import sync
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.db import connections
from django.db.backends.signals import connection_created

import planner_site.http as http
from planner_site.http import OneHopASGIHandler, RequestThreads
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


async def until_back(handler: OneHopASGIHandler) -> None:
    """Until every thread the handler lent is back (its request over and the thread idle)."""
    for _ in range(500):
        if not handler.threads.lent:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("a request thread did not come back within 5 s")


async def close_threads(handler: OneHopASGIHandler) -> None:
    """End the handler's kept threads and their connections, once its requests are over."""
    await until_back(handler)
    await sync_to_async(handler.threads.close, thread_sensitive=False)()


@pytest.mark.django_db(transaction=True)
async def test_one_request_hops_to_its_thread_a_few_times_not_once_per_middleware(
    builder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _token, raw = await sync_to_async(token_create)(user=builder, name="hops")
    headers = [(b"authorization", f"Bearer {raw}".encode()), (b"host", b"127.0.0.1")]
    # The hops Django's handler, its middleware mixin and ours take (signals' are not counted).
    for module in (django_asgi, deprecation, http):
        monkeypatch.setattr(module, "sync_to_async", CountingSyncToAsync)

    handler = OneHopASGIHandler()
    try:
        response, one_hop = await _get(handler, "/api/crews", headers)
    finally:
        await close_threads(handler)
    assert response["status"] == 200
    assert json.loads(response["body"])["count"] == 0
    stock_response, stock = await _get(ASGIHandler(), "/api/crews", headers)
    assert stock_response["status"] == 200
    assert one_hop <= 4 < stock  # the chain in one hop, against one or two per middleware


@pytest.mark.django_db(transaction=True)
async def test_errors_and_sign_in_still_go_through_the_chain() -> None:
    handler = OneHopASGIHandler()
    try:
        page, _hops = await _get(handler, "/crews/", [(b"host", b"127.0.0.1")])
        api, _hops = await _get(handler, "/api/crews", [(b"host", b"127.0.0.1")])
    finally:
        await close_threads(handler)
    assert page["status"] == 302  # the sign-in middleware redirects
    assert dict(page["headers"])[b"Location"].startswith(b"/login/")
    assert api["status"] == 401
    assert b"X-Frame-Options" in dict(api["headers"])  # response middleware ran


@pytest.mark.django_db(transaction=True)
async def test_requests_reuse_a_kept_thread_and_its_database_connection(builder: Any) -> None:
    await check_requests_reuse_connections(builder)  # also on PostgreSQL: tests/scaleout


async def check_requests_reuse_connections(builder: Any) -> None:
    _token, raw = await sync_to_async(token_create)(user=builder, name="reuse")
    headers = [(b"authorization", f"Bearer {raw}".encode()), (b"host", b"127.0.0.1")]
    opened: list[str] = []

    def count(sender: Any, connection: Any, **_: Any) -> None:
        opened.append(threading.current_thread().name)

    handler = OneHopASGIHandler(threads=RequestThreads(keep=2))
    connection_created.connect(count)
    try:
        for _ in range(12):
            communicator = HttpCommunicator(handler, "GET", "/api/crews", headers=headers)
            response = await communicator.get_response(timeout=10)
            assert response["status"] == 200
            await communicator.wait(timeout=10)  # the request is over: its thread goes back
            await until_back(handler)
    finally:
        connection_created.disconnect(count)
        # Kept connections closed before the test database goes (PostgreSQL refuses to drop it).
        await close_threads(handler)
        await sync_to_async(connections.close_all)()  # the thread token_create ran in
    # One request after another borrow the same kept thread, which keeps its connection.
    # Django's own handler starts a thread, and so opens a connection, for each of the 12.
    assert len(opened) == 1
    assert opened[0].startswith("request-")


@pytest.mark.django_db(transaction=True)
def test_threads_beyond_those_kept_close_their_connections_and_end() -> None:
    threads = RequestThreads(keep=2)
    lent = [threads.borrow() for _ in range(5)]

    def touch() -> Any:
        wrapper = connections["default"]  # this thread's own, not the proxy
        wrapper.ensure_connection()
        return wrapper

    wrappers = [executor.submit(touch).result(timeout=10) for executor in lent]
    for executor in lent[:2]:  # back first, so these are the two kept
        threads.give_back(executor)
        executor.submit(lambda: None).result(timeout=10)  # after the give-back, in its thread
    assert threads.idle == 2 and threads.lent == 3
    for executor in lent[2:]:
        threads.give_back(executor)
        executor.shutdown(wait=True)  # waits for the give-back, which ends the thread
    assert threads.lent == 0
    assert threads.idle == 2
    assert [w.connection is not None for w in wrappers] == [True, True, False, False, False]
    for executor in lent[:2]:  # the kept ones still run work, with their connection
        assert executor.submit(touch).result(timeout=10) is wrappers[lent.index(executor)]
        executor.submit(connections.close_all).result(timeout=10)
        executor.shutdown(wait=True)


def test_a_thread_still_busy_with_an_abandoned_request_is_not_lent_again() -> None:
    threads = RequestThreads(keep=2)
    busy = threads.borrow()
    release = threading.Event()
    busy.submit(release.wait, 10)  # a view still running after its client went away
    threads.give_back(busy)
    other = threads.borrow()
    assert other is not busy  # the next request does not queue behind the abandoned view
    threads.give_back(other)
    other.submit(lambda: None).result(timeout=10)
    assert threads.idle == 1
    release.set()
    busy.submit(lambda: None).result(timeout=10)
    assert threads.idle == 2
    assert threads.borrow() is busy  # idle again: lent like any other
    for executor in (busy, other):
        executor.shutdown(wait=True)
