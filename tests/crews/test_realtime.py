"""Who follows a run's deltas: a per-run count in Django's cache, shared by the processes."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import override_settings

from crews.realtime import FOLLOWERS_TTL, deltas_followed, follow_deltas, unfollow_deltas

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
