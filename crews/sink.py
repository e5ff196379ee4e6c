"""A run's events on their way out: the engine's sink (``RunEventSink``: batches stored in order,
then broadcast) and the run's own database hops (``run_hop``), which go after what it emitted.

The rows themselves, their seq and roll-ups are ``crews.bridge``'s (``record_event``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from agents.engine.events import Event
from agents.engine.runtime import Cancelled
from agents.engine.transcript import kept_call
from crews.bridge import (
    NewEvent,
    RunNotWorking,
    _handed_back,
    _HandedBack,
    _task_id,
    payload_of,
    record_batch,
)
from crews.realtime import EventPayload, broadcast

logger = logging.getLogger(__name__)


# Events after which the engine goes on only once they are stored: a paid call or a tool's act.
DURABLE_BEFORE = frozenset({"llm.started", "tool.started"})

# The sink of the run this task executes (set by the runner), for ``run_hop``.
current_sink: ContextVar[RunEventSink | None] = ContextVar("current_sink", default=None)


def run_hop(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``sync_to_async(fn)`` for a run's own database hops: the events the run emitted before
    are stored and sent first, so a service's event (``emit_now``) reaches the page after them,
    as it is numbered after them; the services' events are broadcast from this loop after the
    hop (a nested ``async_to_sync`` from the database thread cost a wake-up of each thread)."""
    hop = sync_to_async(fn)

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        sink = current_sink.get()
        if sink is not None:
            await sink.drain()
        later = _HandedBack()
        bound = _handed_back.set(later)  # the hop's thread runs in a copy of this context: the same list
        try:
            return await hop(*args, **kwargs)
        finally:
            _handed_back.reset(bound)
            later.closed = True
            for run_id, payload in list(later):
                try:
                    await broadcast(run_id, payload)
                except Exception:  # noqa: BLE001 - the event is stored; a socket reconnect replays it
                    logger.warning("could not broadcast event %s of run %s", payload["seq"], run_id, exc_info=True)

    return call


class RunEventSink:
    """Engine events → ``RunEvent`` rows (gapless seq) → the run's channel group.

    Stored in batches (#20): ``emit`` queues the event and returns; the events the engine emits
    back to back (a step's end, the task's end, the next task's start, its first LLM call) go to
    the database in one hop and one transaction, then out to the group in order. A batch is
    queued on the run's database thread when its first event arrives, before the engine moves
    on, so any later database hop of the run (a service storing its own event, a read) runs after
    it: seq order is emit order. ``drain`` waits until everything emitted is stored and sent.
    Before an LLM call or a tool run (``llm.started``, ``tool.started``) ``emit`` drains: what the
    run did so far is stored before it spends money or acts, so a worker killed during the call
    resumes after the work it finished (tests/crews/test_crash.py).

    Streamed LLM deltas are ephemeral: broadcast for the live page, never stored (the completed
    answer is in the ``task.completed`` and ``step.completed`` events), after whatever was emitted
    before them. Each LLM call's request and reply (``Event.call``) is kept as a ``RunLLMCall``
    with its ``llm.completed`` or ``llm.failed`` event, scrubbed of the keys of every LLM the run
    has called so far (the calls carry them: a run reads its LLM rows once, at start).

    Once the run is no longer working under this claim (ended elsewhere: the sweep took this
    worker for dead, say), ``on_gone`` is called and every later ``emit`` raises ``Cancelled``.
    Any other failure to store is raised by the next ``emit`` or ``drain(check=True)``.
    """

    keeps_llm_calls = True

    def __init__(self, run_id: int, *, owner: str | None = None, on_gone: Callable[[], None] | None = None) -> None:
        self.run_id = run_id
        self.owner = owner or None  # the claim's worker id: events only while it owns the run
        self.on_gone = on_gone
        self._store = sync_to_async(self._store_batch)
        self._llm_keys: set[str] = set()
        self._mutex = threading.Lock()  # the open batch is filled here and closed on the database thread
        # The batch queued on the database thread that later events may still join: None once
        # the thread took it, or once a delta went out behind it (what follows must send after it).
        self._open: list[tuple[Event, int | None]] | None = None
        self._tail: asyncio.Task[None] | None = None  # the last batch or delta to send: sends go in order
        self._gone = False
        self._error: BaseException | None = None

    async def emit(self, event: Event) -> None:
        self._raise_if_failed()
        task_id = _task_id(event.task_id)
        if event.type == "llm.delta":
            payload: EventPayload = {
                "seq": None, "type": event.type, "at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                "task_id": task_id, "step_id": event.step_id, "data": event.data,
            }
            if self._tail is None or self._tail.done():
                await broadcast(self.run_id, payload)  # nothing before it still to send
            else:
                with self._mutex:
                    self._open = None  # an event emitted after this delta must not be sent before it
                self._tail = asyncio.ensure_future(self._send_after(self._tail, [payload]))
            return
        with self._mutex:
            batch, joined = self._open, self._open is not None
            if batch is None:
                batch = self._open = []
            batch.append((event, task_id))
        if not joined:
            # Eager: runs until it awaits its hop, so the hop is queued now, ahead of any later one.
            self._tail = asyncio.eager_task_factory(asyncio.get_running_loop(), self._flush(batch, self._tail))
        if event.type in DURABLE_BEFORE:
            await self.drain(check=True)

    async def drain(self, *, check: bool = False) -> None:
        """Wait until every event emitted so far is stored and sent; ``check`` raises a failure
        to store (the run cannot be called a success with events missing)."""
        while self._tail is not None and not self._tail.done():
            await asyncio.shield(self._tail)
        if check:
            self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._gone:
            raise Cancelled("ended elsewhere")
        if self._error is not None:
            raise self._error

    async def _flush(self, batch: list[tuple[Event, int | None]], before: asyncio.Task[None] | None) -> None:
        try:
            payloads = await self._store(batch)
        except RunNotWorking:
            # Ended elsewhere, say by the sweep while this worker stalled: stop working.
            self._gone = True
            if self.on_gone is not None:
                self.on_gone()
            payloads = []
        except Exception as exc:  # noqa: BLE001 - raised to the engine by its next emit
            logger.warning("could not store events of run %s", self.run_id, exc_info=True)
            self._error = exc
            payloads = []
        await self._send_after(before, payloads)

    async def _send_after(self, before: asyncio.Task[None] | None, payloads: list[EventPayload]) -> None:
        if before is not None:
            await asyncio.gather(before, return_exceptions=True)
        for payload in payloads:
            try:
                await broadcast(self.run_id, payload)
            except Exception:  # noqa: BLE001 - stored already; a reconnect replays it
                logger.warning("could not broadcast event %s of run %s", payload["seq"], self.run_id, exc_info=True)

    def _store_batch(self, batch: list[tuple[Event, int | None]]) -> list[EventPayload]:
        """A batch, closed to later events, in one transaction (on the run's database thread)."""
        with self._mutex:
            if self._open is batch:
                self._open = None
        new = [self._new_event(event, task_id) for event, task_id in batch]
        with transaction.atomic():
            return [payload_of(row) for row in record_batch(self.run_id, new, working_only=True, owner=self.owner)]

    def _new_event(self, event: Event, task_id: int | None) -> NewEvent:
        kept = None
        if event.call is not None:  # what the LLM call sent and got back, scrubbed first
            if event.call.api_key is not None:
                self._llm_keys.add(event.call.api_key.get_secret_value())
            kept = kept_call(event.call, secrets=self._llm_keys)
        return NewEvent(event.type, event.data, task_id, event.step_id, kept)
