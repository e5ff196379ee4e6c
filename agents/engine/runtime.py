"""What a running agent is given: cancel token, clock, human interface, and the context bundle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from agents.engine.events import Event, EventSink, LLMCallRecord
from agents.engine.specs import ApprovedStep

T = TypeVar("T")


class Cancelled(Exception):
    """The run was stopped: nothing more may be sent to an LLM or a tool."""


class CancelToken:
    """A cancel flag that can also abort an awaited call in flight.

    ``cancel()`` may be called from any thread; waiters on the engine's loop wake at once.
    """

    def __init__(self) -> None:
        self._cancelled = False
        self.reason = ""
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self, reason: str = "cancelled") -> None:
        if self._cancelled:
            return
        self._cancelled = True
        self.reason = reason
        for loop, fut in list(self._waiters):
            loop.call_soon_threadsafe(_resolve, fut)

    def raise_if_cancelled(self) -> None:
        if self._cancelled:
            raise Cancelled(self.reason)

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless cancellation comes first; then abandon it and raise."""
        self.raise_if_cancelled()
        loop = asyncio.get_running_loop()
        work: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        # Resolved by whichever comes first, the call's end or a cancel: one future and one
        # callback, where ``asyncio.wait`` made a waiter and callbacks on both (once per LLM call).
        stop: asyncio.Future[None] = loop.create_future()
        entry = (loop, stop)
        self._waiters.add(entry)
        if self._cancelled:  # cancelled from another thread before the waiter was there to wake
            _resolve(stop)

        def finished(_: asyncio.Future[T]) -> None:
            _resolve(stop)

        work.add_done_callback(finished)
        try:
            await stop
        except BaseException:
            # The awaiting task itself was cancelled (a timeout around it): take the call down
            # with it instead of leaving it running unowned.
            work.cancel()
            raise
        finally:
            self._waiters.discard(entry)
            work.remove_done_callback(finished)
        if work.done():
            return work.result()
        work.cancel()
        # Let the abandoned call unwind; asyncio.wait never raises its outcome, but a cancellation
        # of this task while waiting still propagates.
        await asyncio.wait({work})
        if not work.cancelled():
            work.exception()  # mark a late failure as retrieved: its fate no longer matters
        raise Cancelled(self.reason)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Clock(Protocol):
    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    # The C function itself, not a method calling it: asked per event and per streamed chunk.
    monotonic = staticmethod(time.monotonic)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class FakeClock:
    """A clock tests move by hand; ``sleep`` advances it instantly."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += max(0.0, seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(slots=True)
class ApprovalDecision:
    approve: bool
    note: str = ""


@dataclass(slots=True)
class PlanRevision:
    """What a person approved after a failed step: the task's remaining steps, and what the run
    records of it (the plan and versions involved), carried into ``crew_plan.deviated``."""

    steps: Sequence[ApprovedStep]
    data: dict[str, Any] = field(default_factory=dict)


class HumanInterface(Protocol):
    """How the engine asks a person; the Django side implements it with the database."""

    async def request_feedback(self, *, task_key: str, answer: str) -> str:
        """Return the person's feedback; an empty string accepts the answer."""
        ...

    async def request_approval(self, *, approval_id: str, tool: str, args: dict[str, Any]) -> ApprovalDecision: ...

    async def request_plan_change(
        self, *, task_key: str, reason: str, done_step_ids: Sequence[str], proposed: Sequence[str]
    ) -> PlanRevision:
        """A step of an approved plan failed (``on_step_failure="ask"``): show the person the
        agent's ``proposed`` remaining steps (``done_step_ids``: the steps completed, kept), and
        return the remaining steps they approve."""
        ...


class AutoApprove:
    """Approves every tool call, answer and proposed plan (runs with nobody watching, tests)."""

    def __init__(self) -> None:
        self._proposals = 0  # ids of approved proposals stay unique within the run

    async def request_feedback(self, *, task_key: str, answer: str) -> str:
        return ""

    async def request_approval(self, *, approval_id: str, tool: str, args: dict[str, Any]) -> ApprovalDecision:
        return ApprovalDecision(approve=True)

    async def request_plan_change(
        self, *, task_key: str, reason: str, done_step_ids: Sequence[str], proposed: Sequence[str]
    ) -> PlanRevision:
        self._proposals += 1
        return PlanRevision([
            ApprovedStep(id=f"{task_key}.r{self._proposals}.{i}", text=text)
            for i, text in enumerate(proposed, start=1)
        ])


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    llm_calls: int = 0
    tool_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.llm_calls += other.llm_calls
        self.tool_calls += other.tool_calls


@dataclass(slots=True)
class EventEmitter:
    """Stamps events with the clock and the current task before they reach the sink."""

    sink: EventSink
    clock: Clock
    task_id: str | None = None

    async def __call__(self, type_: str, data: dict[str, Any] | None = None, *, step_id: str | None = None,
                       call: LLMCallRecord | None = None) -> None:
        await self.sink.emit(
            Event(type=type_, data=data or {}, task_id=self.task_id, step_id=step_id, at=self.clock.monotonic(),
                  call=call)
        )

    @property
    def keeps_llm_calls(self) -> bool:
        """Whether the sink wants each LLM call's request and reply (``Event.call``)."""
        return bool(getattr(self.sink, "keeps_llm_calls", False))

    def for_task(self, task_id: str | None) -> EventEmitter:
        return EventEmitter(sink=self.sink, clock=self.clock, task_id=task_id)


class StepKnowledge(Protocol):
    """A task's knowledge sources, searched again before each of its steps (issue #19); the crew
    runtime sets it on the task's context (``crews.engine.knowledge.TaskKnowledge``)."""

    async def for_step(self, ctx: RunContext, *, step_id: str, text: str, context: Sequence[str]) -> tuple[str, ...]:
        """The task's ``context`` as the step should see it (its passages widened for ``text``)."""
        ...


@dataclass
class RunContext:
    """Everything an agent run needs from outside, passed in: no globals.

    ``llm`` is the ``agents.engine.calls.LLMCaller`` (retries, rate limits, budgets, events)
    wrapping the gateway; ``usage`` accumulates across the whole run.
    """

    llm: Any  # agents.engine.calls.LLMCaller (typed loosely to avoid an import cycle)
    emit: EventEmitter
    cancel: CancelToken = field(default_factory=CancelToken)
    clock: Clock = field(default_factory=SystemClock)
    human: HumanInterface = field(default_factory=AutoApprove)
    prompts: Any = None  # agents.engine.prompts.PromptBook; None = the built-in defaults
    tools: Any = None  # agents.engine.tools.ToolRegistry; None = the built-in catalogue
    usage: Usage = field(default_factory=Usage)
    tool_cache: dict[tuple[str, str], str] = field(default_factory=dict)
    # The task's sources, for its steps; one task's, so ``for_task`` leaves it behind.
    knowledge: StepKnowledge | None = None

    def for_task(self, task_id: str | None) -> RunContext:
        """A view of the same run whose events carry ``task_id``; usage and cache are shared."""
        return RunContext(
            llm=self.llm.with_emitter(self.emit.for_task(task_id)) if hasattr(self.llm, "with_emitter") else self.llm,
            emit=self.emit.for_task(task_id),
            cancel=self.cancel,
            clock=self.clock,
            human=self.human,
            prompts=self.prompts,
            tools=self.tools,
            usage=self.usage,
            tool_cache=self.tool_cache,
        )
