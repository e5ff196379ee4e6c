"""A run of bench/engine.py measured: the context a worker gives it, its figures, the scenarios."""

from __future__ import annotations

import asyncio
import gc
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from engine_meters import GC, BackgroundMeter, TimedGateway
from engine_scripts import CREW_TASKS, PLAN_STEPS, SCRIPTS, plan_and_act_agent, react_crew

from agents.engine.agent import run_agent
from agents.engine.calls import RateLimiters, make_caller
from agents.engine.events import RecordingSink
from agents.engine.llm import (
    Gateway,
)
from agents.engine.prompts import PromptBook
from agents.engine.runtime import CancelToken, EventEmitter, RunContext, SystemClock, Usage
from agents.engine.specs import LLMSpec
from agents.engine.tools import ToolRegistry
from crews.engine.kickoff import run_crew


@dataclass
class Shared:
    """What a worker process shares between runs: the tool catalogue, prompts, rate limiters."""

    tools: ToolRegistry = field(default_factory=ToolRegistry)
    prompts: PromptBook = field(default_factory=PromptBook)
    clock: SystemClock = field(default_factory=SystemClock)
    limiters: RateLimiters = field(init=False)

    def __post_init__(self) -> None:
        self.limiters = RateLimiters(self.clock)

    def context(self, gateway: Gateway) -> tuple[RunContext, RecordingSink]:
        """A run's context as crews.runner builds it, with a recording sink for the database one."""
        sink = RecordingSink()
        emit = EventEmitter(sink=sink, clock=self.clock)
        usage = Usage()
        cancel = CancelToken()
        caller = make_caller(
            gateway,
            emit,
            cancel=cancel,
            clock=self.clock,
            usage=usage,
            limiters=self.limiters,
        )
        ctx = RunContext(
            llm=caller,
            emit=emit,
            cancel=cancel,
            clock=self.clock,
            prompts=self.prompts,
            tools=self.tools,
            usage=usage,
        )
        return ctx, sink


@dataclass
class RunFigures:
    wall: float
    gateway: float  # inside complete(), the engine's callbacks excluded
    background: float  # litellm's Tasks between calls
    deltas: float  # the engine's on_delta callbacks (llm.delta events)
    gc: float  # garbage collection during the run, in anyone's code
    cpu: float  # this thread's CPU time during the run
    cpu_gateway: float  # of which inside complete()
    calls: int
    events: int
    gaps: list[float]  # engine time before each call, and after the last one

    @property
    def engine(self) -> float:
        return self.wall - self.gateway - self.background

    @property
    def engine_cpu(self) -> float:
        """What the engine costs in CPU: time lost to other processes on the machine left out."""
        return self.cpu - self.cpu_gateway


Work = Callable[[RunContext], Awaitable[Any]]


async def measure_run(
    shared: Shared, gateway: Gateway, work: Work, expect_calls: int, meter: BackgroundMeter
) -> RunFigures:
    timed = TimedGateway(gateway)
    ctx, sink = shared.context(timed)
    meter.gateway = timed
    background, collecting = meter.seconds, GC.seconds
    started, cpu = time.perf_counter(), time.thread_time()
    await work(ctx)
    ended, cpu = time.perf_counter(), time.thread_time() - cpu
    background, collecting = meter.seconds - background, GC.seconds - collecting
    meter.gateway = None
    await asyncio.sleep(0.002)  # litellm's logging of the last call settles outside the window
    if timed.calls != expect_calls:
        raise AssertionError(f"expected {expect_calls} LLM calls, the run made {timed.calls}")
    marks = [started, *(t for span in timed.spans for t in span), ended]
    gaps = [marks[i + 1] - marks[i] for i in range(0, len(marks), 2)]
    return RunFigures(
        ended - started,
        timed.seconds,
        background,
        timed.deltas,
        collecting,
        cpu,
        timed.cpu,
        timed.calls,
        len(sink.events),
        gaps,
    )


async def peak_memory(shared: Shared, gateway: Gateway, work: Work) -> int:
    """tracemalloc's peak during one more run (slowed by tracing, so never timed)."""
    timed = TimedGateway(gateway)
    ctx, _sink = shared.context(timed)
    gc.collect()
    tracemalloc.start()
    try:
        await work(ctx)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


# --- scenarios ----------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    gateway_name: str
    calls: int
    make_gateway: Callable[[], Gateway]  # one per run, ready to answer the run's calls
    work: Work


@dataclass
class Result:
    scenario: Scenario
    runs: list[RunFigures]
    cold: RunFigures
    peak_bytes: int

    def per_call(self, attr: str) -> list[float]:
        return [getattr(r, attr) / r.calls for r in self.runs]


def scenario(
    kind: str, llm: LLMSpec, gateway_name: str, make_gateway: Callable[[], Gateway]
) -> Scenario:
    """``plan_and_act`` (one agent, planning at medium effort) or ``crew`` (ReAct agents)."""
    lines = SCRIPTS[kind]()
    if kind == "plan_and_act":
        agent, task = plan_and_act_agent(llm)

        async def work(ctx: RunContext) -> Any:
            return await run_agent(ctx, agent, task)

        name = f"Plan-and-Act, {PLAN_STEPS} steps"
    else:
        crew = react_crew(llm)

        async def work(ctx: RunContext) -> Any:
            result = await run_crew(ctx, crew)
            if result.failed:
                raise AssertionError(result.error)
            return result

        name = f"ReAct crew, {CREW_TASKS} tasks"
    return Scenario(name, gateway_name, len(lines), make_gateway, work)


async def run_scenario(
    shared: Shared, scenario: Scenario, runs: int, warmup: int, meter: BackgroundMeter
) -> Result:
    async def once() -> RunFigures:
        return await measure_run(
            shared, scenario.make_gateway(), scenario.work, scenario.calls, meter
        )

    cold = await once()
    for _ in range(warmup):
        await once()
    figures = [await once() for _ in range(runs)]
    peak = await peak_memory(shared, scenario.make_gateway(), scenario.work)
    return Result(scenario, figures, cold, peak)
