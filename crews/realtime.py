"""Live delivery of run events: the one place that names channel groups and sends to them."""

from __future__ import annotations

import json
from typing import Any, NotRequired, TypedDict

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.core.cache import cache

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
    await layer.group_send(group, message)


# Who follows the deltas ---------------------------------------------------------------------------


def _followers_key(run_id: int) -> str:
    return f"planner:run:{run_id}:delta-followers"


async def follow_deltas(run_id: int) -> None:
    """Count one more socket showing the run's deltas (call once it joined ``deltas_group``).

    The count is in Django's cache (Redis in scale-out), so a worker in another process sees it.
    It expires ``FOLLOWERS_TTL`` after the last follow: a socket that died without
    ``unfollow_deltas`` keeps the run streaming for at most that long, no harm done.
    """
    await sync_to_async(_count)(run_id, 1)


async def unfollow_deltas(run_id: int) -> None:
    """Count one socket fewer (it is closing). A count that expired meanwhile stays gone."""
    await sync_to_async(_count)(run_id, -1)


def _count(run_id: int, delta: int) -> None:
    key = _followers_key(run_id)
    if delta > 0:
        cache.add(key, 0, timeout=FOLLOWERS_TTL)
    try:
        cache.incr(key, delta)
    except ValueError:  # expired (or never there): nobody is counted
        if delta > 0:
            cache.add(key, delta, timeout=FOLLOWERS_TTL)
        return
    if delta > 0:
        cache.touch(key, timeout=FOLLOWERS_TTL)


def deltas_followed(run_id: int) -> bool:
    """Whether any socket shows the run's deltas now: if not, the LLM need not stream them.

    Synchronous and cheap (a local dict, or one Redis GET), from a worker thread or the loop.
    """
    return int(cache.get(_followers_key(run_id)) or 0) > 0
