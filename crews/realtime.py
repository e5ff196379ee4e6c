"""Live delivery of run events: the one place that names channel groups and sends to them."""

from __future__ import annotations

import json
import logging
from typing import Any, NotRequired, TypedDict

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.cache import cache

logger = logging.getLogger(__name__)

FOLLOWERS_TTL = 6 * 60 * 60  # seconds a follower count lives after its last follow


def run_group(run_id: int) -> str:
    """Every stored event of the run."""
    return f"run.{run_id}"


def deltas_group(run_id: int) -> str:
    """The run's ephemeral events (streamed LLM deltas), for the sockets that show them.

    A delta comes per streamed chunk; sockets that drop them do not join, so they never even
    dispatch one.
    """
    return f"run.{run_id}.deltas"


class EventPayload(TypedDict):
    seq: int | None  # None for ephemeral events (streamed LLM deltas), which are never stored
    type: str
    at: str
    task_id: int | None
    step_id: str | None
    data: dict[str, Any]


class RunEventMessage(TypedDict):
    type: str  # always "run.event": consumers handle it in run_event()
    event: EventPayload
    # The event as API.md's JSON, encoded once here rather than once per socket.
    text: NotRequired[str]


async def broadcast(run_id: int, event: EventPayload) -> None:
    """Send an event to the sockets following the run: stored ones to all, ephemeral ones to
    those in ``deltas_group``."""
    layer = get_channel_layer()
    if layer is None:
        return
    message: RunEventMessage = {"type": "run.event", "event": event, "text": json.dumps(event)}
    group = run_group(run_id) if event["seq"] is not None else deltas_group(run_id)
    # Built here for this one send: the in-process layer may pass it on without a copy.
    send = getattr(layer, "group_send_shared", layer.group_send)
    await send(group, message)


# Who follows the deltas ---------------------------------------------------------------------------


def _followers_key(run_id: int) -> str:
    return f"planner:run:{run_id}:delta-followers"


async def follow_deltas(run_id: int) -> bool:
    """Count one more socket showing the run's deltas (call once it joined ``deltas_group``).

    The count is in Django's cache (Redis in scale-out), so a worker in another process sees it.
    It expires ``FOLLOWERS_TTL`` after the last follow: a socket that died without
    ``unfollow_deltas`` keeps the run sending deltas for at most that long, no harm done.

    Returns whether the socket was counted: if the cache failed it was not, and the socket must
    not ``unfollow_deltas`` (it would uncount another one). The failure is logged, not raised: a
    socket that cannot be counted still shows the deltas other sockets make the run send.
    """
    return await _count_off_loop(run_id, 1)


async def unfollow_deltas(run_id: int) -> None:
    """Count one socket fewer (it is closing). A count that expired meanwhile stays gone.

    A cache failure is logged, not raised: the socket is closing anyway, and the count expires.
    """
    await _count_off_loop(run_id, -1)


async def _count_off_loop(run_id: int, delta: int) -> bool:
    # Not thread-sensitive: a slow cache then holds a thread of its own, not the one thread every
    # sync_to_async(thread_sensitive=True) call in the process (database work included) waits for.
    try:
        await sync_to_async(_count, thread_sensitive=False)(run_id, delta)
    except Exception:
        logger.warning("Could not count a delta follower of run %s (%+d)", run_id, delta, exc_info=True)
        return False
    return True


def _count(run_id: int, delta: int) -> None:
    key = _followers_key(run_id)
    if delta > 0:
        # Django's RedisCache.incr checks the key exists, then INCRs: a key that expires between
        # the two is made again by INCR, without a TTL. So add one with the TTL first, and set
        # the TTL again after the incr.
        cache.add(key, 0, timeout=FOLLOWERS_TTL)
        try:
            cache.incr(key, delta)
        except ValueError:  # expired between the add and the incr
            cache.add(key, delta, timeout=FOLLOWERS_TTL)
            return
        cache.touch(key, timeout=FOLLOWERS_TTL)
        return
    try:
        count = cache.incr(key, delta)
    except ValueError:  # expired (or never there): nobody is counted
        return
    if count <= 0:
        # Nobody left (or the key expired inside incr and came back negative, without a TTL):
        # drop it rather than keep a key per run ever followed. A follow that lands between the
        # incr and this delete is lost; its run then streams again on the next follow.
        cache.delete(key)


def deltas_followed(run_id: int) -> bool:
    """Whether any socket shows the run's deltas now: if not, the run need not send them.

    Synchronous: one Redis GET in scale-out, so call it from a worker thread (as the runner
    does), not from the event loop, where a slow Redis would stall every socket.
    """
    return int(cache.get(_followers_key(run_id)) or 0) > 0
