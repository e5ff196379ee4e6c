"""What bench/engine.py times besides the run: the gateway's ``complete()`` (less the engine's
``on_delta`` callbacks), litellm's logging Tasks between calls, and garbage collection.
"""

from __future__ import annotations

import asyncio
import collections.abc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.engine.llm import (
    DeltaCallback,
    Gateway,
    LLMRequest,
    LLMResponse,
)


class TimedGateway:
    """Times ``complete()`` of the gateway it wraps, minus the engine's ``on_delta`` callbacks."""

    def __init__(self, inner: Gateway) -> None:
        self.inner = inner
        self.seconds = 0.0  # inside the gateway, callbacks excluded
        self.cpu = 0.0  # the same in this thread's CPU time
        self.deltas = 0.0  # in the engine's on_delta callbacks
        self.calls = 0
        self.inside = 0  # complete() calls in progress
        self.spans: list[tuple[float, float]] = []  # (start, end) of every complete()

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        in_callbacks = cpu_in_callbacks = 0.0
        callback = on_delta
        if on_delta is not None:

            async def timed_delta(text: str) -> None:
                nonlocal in_callbacks, cpu_in_callbacks
                started, cpu = time.perf_counter(), time.thread_time()
                await on_delta(text)
                in_callbacks += time.perf_counter() - started
                cpu_in_callbacks += time.thread_time() - cpu

            callback = timed_delta
        self.inside += 1
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return await self.inner.complete(request, on_delta=callback)
        finally:
            end = time.perf_counter()
            self.cpu += time.thread_time() - cpu - cpu_in_callbacks
            self.inside -= 1
            self.seconds += end - start - in_callbacks
            self.deltas += in_callbacks
            self.calls += 1
            self.spans.append((start, end))


class MeteredCoroutine(collections.abc.Coroutine[Any, Any, Any]):
    """A coroutine whose every step is timed: litellm's background tasks, run as Tasks."""

    def __init__(self, coro: Any, meter: BackgroundMeter) -> None:
        self._coro = coro
        self._meter = meter
        self.__qualname__ = self.__name__ = getattr(coro, "__qualname__", "litellm task")

    def _step(self, method: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return method(*args)
        finally:
            self._meter.add(time.perf_counter() - started)

    def send(self, value: Any) -> Any:
        return self._step(self._coro.send, value)

    def throw(self, *args: Any) -> Any:
        return self._step(self._coro.throw, *args)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Any:
        return self._coro.__await__()


class BackgroundMeter:
    """litellm schedules its success logging (cost, usage, payloads) as Tasks that run after
    ``complete()`` has returned, some on a long-lived logging worker Task: gateway work the
    engine's time would otherwise include. Their steps are timed through the loop's task factory
    and counted when no call is in progress. One meter for the process: the worker Task lives on.
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.gateway: TimedGateway | None = None

    def add(self, seconds: float) -> None:
        if self.gateway is not None and self.gateway.inside == 0:
            self.seconds += seconds

    def factory(self, loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        code = getattr(coro, "cr_code", None)
        if code is not None and "litellm" in Path(code.co_filename).parts:
            coro = MeteredCoroutine(coro, self)
        return asyncio.Task(coro, loop=loop, **kw)


class GCMeter:
    """Seconds spent in the garbage collector, whoever made the garbage."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


GC = GCMeter()
