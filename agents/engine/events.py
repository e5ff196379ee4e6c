"""Typed events the engine emits, and the sink Protocol they go through.

Event types are the dotted names of API.md ("run.started", "step.completed", ...). The Django
side turns each one into a ``RunEvent`` row and a channel-layer message; tests record them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(slots=True, frozen=True)
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    step_id: str | None = None
    at: float = 0.0  # seconds, from the clock the engine was given


class EventSink(Protocol):
    async def emit(self, event: Event) -> None: ...


class RecordingSink:
    """Keeps every event in memory: the sink tests assert against."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def emit(self, event: Event) -> None:
        self.events.append(event)

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def of_type(self, *types: str) -> list[Event]:
        return [e for e in self.events if e.type in types]


class NullSink:
    async def emit(self, event: Event) -> None:
        return None
