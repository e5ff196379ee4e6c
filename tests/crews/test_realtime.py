"""Who follows a run's deltas: a per-run count in Django's cache, shared by the processes."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.cache import cache
from django.test import override_settings

from crews import realtime
from crews.realtime import (
    FOLLOWERS_TTL,
    _followers_key,
    deltas_followed,
    follow_deltas,
    unfollow_deltas,
)

LOCAL_CACHE = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture(autouse=True)
def empty_cache():
    cache.clear()
    yield
    cache.clear()


async def test_a_run_is_followed_while_at_least_one_socket_follows_it():
    assert not deltas_followed(7)

    await follow_deltas(7)
    await follow_deltas(7)
    assert deltas_followed(7) and not deltas_followed(8)

    await unfollow_deltas(7)
    assert deltas_followed(7)
    await unfollow_deltas(7)
    assert not deltas_followed(7)


async def test_an_unfollow_without_a_follow_leaves_the_count_gone():
    await unfollow_deltas(7)  # e.g. the count expired while the socket was open

    assert not deltas_followed(7)
    await follow_deltas(7)
    assert deltas_followed(7)


@override_settings(CACHES=LOCAL_CACHE)  # a clock the test moves: the same rule holds on Redis
async def test_a_leaked_follow_expires_hours_after_the_last_follow(monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr("django.core.cache.backends.locmem.time.time", lambda: now[0])
    assert 60 * 60 <= FOLLOWERS_TTL <= 24 * 60 * 60

    await follow_deltas(7)  # and the socket dies without unfollowing
    now[0] += FOLLOWERS_TTL - 10
    await follow_deltas(7)  # a second socket: the count lives on from here
    now[0] += FOLLOWERS_TTL - 10
    assert deltas_followed(7)

    now[0] += 20
    assert not deltas_followed(7)


def test_deltas_followed_is_callable_from_a_worker_thread():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(deltas_followed, 7).result() is False


async def test_the_last_unfollow_removes_the_runs_count():
    await follow_deltas(7)
    await unfollow_deltas(7)

    assert not cache.has_key(_followers_key(7))  # a key per run ever followed would pile up


class ExpiringInsideIncr:
    """The cache, except that the count expires inside ``incr``, between Django's RedisCache
    check that the key exists and its INCR, which then makes the key again without a TTL."""

    def __getattr__(self, name: str) -> Any:
        return getattr(cache, name)

    def incr(self, key: str, delta: int = 1) -> int:
        if not cache.has_key(key):
            raise ValueError(key)
        cache.set(key, delta, timeout=None)
        return delta


async def test_a_count_that_expires_inside_an_unfollow_does_not_go_negative(monkeypatch):
    await follow_deltas(7)
    monkeypatch.setattr(realtime, "cache", ExpiringInsideIncr())
    await unfollow_deltas(7)
    monkeypatch.undo()

    assert not cache.has_key(_followers_key(7))  # not -1 for good, offsetting the next follow
    await follow_deltas(7)
    assert deltas_followed(7)


async def test_a_cache_error_is_logged_not_raised(monkeypatch, caplog):
    class BrokenCache:
        def __getattr__(self, name: str) -> Any:
            raise ConnectionError("the cache is down")

    monkeypatch.setattr(realtime, "cache", BrokenCache())

    assert await follow_deltas(7) is False  # not counted: the socket must not uncount it
    await unfollow_deltas(7)
    assert [r.levelname for r in caplog.records] == ["WARNING", "WARNING"]


async def test_the_count_is_kept_off_the_shared_sync_thread(monkeypatch):
    shared = await sync_to_async(threading.get_ident)()
    seen = set()

    class Recording:
        def __getattr__(self, name: str) -> Any:
            seen.add(threading.get_ident())
            return getattr(cache, name)

    monkeypatch.setattr(realtime, "cache", Recording())
    await follow_deltas(7)
    await unfollow_deltas(7)

    assert seen and shared not in seen  # a slow Redis holds up no database work
