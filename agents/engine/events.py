"""Typed events the engine emits, and the sink Protocol they go through.

Event types are the dotted names of API.md ("run.started", "step.completed", ...). The Django
side turns each one into a ``RunEvent`` row and a channel-layer message; tests record them.
A sink that sets ``keeps_llm_calls`` also gets, on each ``llm.completed`` and ``llm.failed``, what
that call sent and got back (``LLMCallRecord``), so a person can read it later (ENGINE.md §2b).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import SecretStr


@dataclass(slots=True, frozen=True)
class LLMCallRecord:
    """One LLM call's request and reply as they went over the wire, not yet scrubbed of secrets
    (``agents.engine.transcript.kept_call`` does that, where it is kept)."""

    messages: list[dict[str, Any]]
    tools: list[str] = field(default_factory=list)  # the names of the tool schemas sent
    response_format: str = ""  # the name of the JSON schema asked for, if any
    reply: dict[str, Any] | None = None  # {content, tool_calls: [{id, name, arguments}], finish_reason}
    error: str = ""
    api_key: SecretStr | None = field(default=None, repr=False)  # the LLM's, to scrub it out


@dataclass(slots=True, frozen=True)
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    step_id: str | None = None
    at: float = 0.0  # seconds, from the clock the engine was given
    # Only for a sink that keeps LLM calls: never part of ``data``, so never stored with the event
    # nor broadcast.
    call: LLMCallRecord | None = field(default=None, repr=False, compare=False)


def task_ref(key: str) -> int | str:
    """A task as an event's ``data.task_id`` names it: the integer API.md's ids are where the key
    is one (a crew run's task keys are the tasks' ids as text), else the key itself."""
    return int(key) if key.isascii() and key.isdigit() else key


class EventSink(Protocol):
    """Where events go. A sink may also set ``keeps_llm_calls = True`` to receive ``Event.call``:
    building the record costs the engine nothing when no sink keeps it."""

    async def emit(self, event: Event) -> None: ...


class RecordingSink:
    """Keeps every event in memory: the sink tests assert against (with its LLM calls, if asked)."""

    def __init__(self, *, keeps_llm_calls: bool = False) -> None:
        self.events: list[Event] = []
        self.keeps_llm_calls = keeps_llm_calls

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
