"""Live delivery of run events: the one place that names channel groups and sends to them."""

from __future__ import annotations

from typing import Any, TypedDict

from channels.layers import get_channel_layer


def run_group(run_id: int) -> str:
    return f"run.{run_id}"


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


async def broadcast(run_id: int, event: EventPayload) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message: RunEventMessage = {"type": "run.event", "event": event}
    await layer.group_send(run_group(run_id), message)
