"""Engine overhead per LLM call: Plan-and-Act and a ReAct crew, scripted and over real litellm.

Run from the repository root: ``.venv/bin/python bench/engine.py`` (``--quick`` for a smoke run).
bench/README.md says what the figures mean and keeps the last ones measured.

Engine overhead per call = (wall time of a run - time inside the gateway's ``complete()``) / the
run's LLM calls. A wrapper times every ``complete()``. Two kinds of work cross that line and are
moved to the right side: the engine's ``on_delta`` callback (it emits ``llm.delta`` events) runs
inside ``complete()`` but is engine work; litellm's success logging runs in Tasks after
``complete()`` returned but is gateway work (timed through the loop's task factory). Every
scenario makes its calls one after another, so no engine work hides inside a gateway wait.
"""

from __future__ import annotations

import argparse
import asyncio
import collections.abc
import contextlib
import gc
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The fake server is on loopback; a proxy from the environment must not see it, and litellm must
# not fetch its price map from the internet.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from agents.engine.agent import run_agent  # noqa: E402
from agents.engine.calls import RateLimiters, make_caller  # noqa: E402
from agents.engine.events import RecordingSink  # noqa: E402
from agents.engine.llm import (  # noqa: E402
    DeltaCallback,
    Gateway,
    LLMRequest,
    LLMResponse,
    ScriptedGateway,
    tool_call_response,
)
from agents.engine.prompts import PromptBook  # noqa: E402
from agents.engine.runtime import CancelToken, EventEmitter, RunContext, SystemClock, Usage  # noqa: E402
from agents.engine.specs import AgentSpec, LLMSpec, PlanningConfigSpec, TaskSpec, ToolRef  # noqa: E402
from agents.engine.tools import ToolRegistry  # noqa: E402
from crews.engine.kickoff import run_crew  # noqa: E402
from crews.engine.specs import CrewSpec, CrewTaskSpec  # noqa: E402

TARGET_MS = 2.0  # the target: engine overhead per LLM call on the scripted gateway
PLAN_STEPS = 5
CREW_TASKS = 10

# --- what the model says -------------------------------------------------------------------------
# One neutral script, turned into ScriptedGateway items or fake-server replies, so both gateways
# get the same conversation.


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    arguments: dict[str, Any]


Line = Say | Call

LOREM = (
    "Quarterly revenue grew 12% to 4.2M, driven by the enterprise tier; churn fell to 2.1% after "
    "the onboarding rework. Support tickets per account dropped by a third, and the two largest "
    "customers renewed for three years. Risks: one supplier contract ends in March."
)


def final(text: str) -> Say:
    return Say(f"Thought: I now know the final answer\nFinal Answer: {text}")


def observation(number: int) -> Say:
    return Say(
        json.dumps(
            {
                "success": True,
                "learned": f"Step {number} produced the figures the next step needs.",
                "plan_valid": True,
                "refinements": [],
                "needs_replan": False,
                "replan_reason": "",
                "goal_achieved": False,
            }
        )
    )


def plan_and_act_script() -> list[Line]:
    """The plan (a tool call); per step an answer (step 2 calls the calculator first) and an
    observation; the synthesis."""
    steps = [
        {
            "number": n,
            "description": f"Step {n}: work out part {n} of the quarterly summary",
            "tool": "calculator" if n == 2 else None,
            "depends_on": [n - 1] if n > 1 else [],
        }
        for n in range(1, PLAN_STEPS + 1)
    ]
    script: list[Line] = [
        Call(
            "create_plan",
            {"plan": "Summarise the quarter in five steps.", "steps": steps, "ready": True},
        )
    ]
    for n in range(1, PLAN_STEPS + 1):
        if n == 2:
            script.append(Call("calculator", {"expression": "4200000 * 0.12"}))
        # Short step results: the last one is no full answer, so synthesis runs (one more call).
        script.append(final(f"Part {n}: {LOREM[: 60 + 10 * n]}"))
        script.append(observation(n))
    script.append(Say(f"## Quarterly summary\n\n{LOREM}\n\n{LOREM}"))
    return script


def crew_script() -> list[Line]:
    """Per task: one calculator call, then a final answer that later tasks get as context."""
    script: list[Line] = []
    for n in range(1, CREW_TASKS + 1):
        script.append(Call("calculator", {"expression": f"{n} * 1200 * 0.15"}))
        script.append(final(f"Task {n} result: {n * 180}. {LOREM}"))
    return script


def as_scripted(script: Sequence[Line]) -> list[LLMResponse | str]:
    return [
        tool_call_response(line.name, line.arguments, call_id=f"call_{i}")
        if isinstance(line, Call)
        else line.text
        for i, line in enumerate(script)
    ]


SCRIPTS: dict[str, Callable[[], list[Line]]] = {
    "plan_and_act": plan_and_act_script,
    "crew": crew_script,
}


def as_replies(script: Sequence[Line]) -> list[Any]:
    from tests.fakes.openai_server import Reply

    return [
        Reply.tool_call(line.name, line.arguments, call_id=f"call_{i}")
        if isinstance(line, Call)
        else Reply.text(line.text)
        for i, line in enumerate(script)
    ]


# --- what runs ----------------------------------------------------------------------------------


def plan_and_act_agent(llm: LLMSpec) -> tuple[AgentSpec, TaskSpec]:
    agent = AgentSpec(
        key="analyst",
        name="Analyst",
        role="Financial analyst",
        goal="Explain the quarter's numbers",
        backstory="You have read every board pack since 2019.",
        llm=llm,
        tools=(ToolRef(name="calculator"),),
        # Medium effort: every step is observed by an LLM call, replans only on failure.
        planning_config=PlanningConfigSpec(reasoning_effort="medium", max_attempts=1),
    )
    task = TaskSpec(
        key="t1",
        description="Write the quarterly summary for the board from the finance export.",
        expected_output="A one-page summary with revenue, churn, support load and risks.",
    )
    return agent, task


def react_crew(llm: LLMSpec) -> CrewSpec:
    roles = ("Researcher", "Analyst", "Writer")
    agents = tuple(
        AgentSpec(
            key=f"a{i}",
            name=role,
            role=role,
            goal=f"Do the {role.lower()}'s part of the quarterly report",
            backstory="You are careful with numbers and cite them.",
            llm=llm,
            tools=(ToolRef(name="calculator"),),
        )
        for i, role in enumerate(roles)
    )
    tasks = tuple(
        CrewTaskSpec(
            key=f"t{n}",
            number=n,
            name=f"Section {n}",
            description=f"Write section {n} of the quarterly report; compute its figures with the calculator.",
            expected_output="A paragraph with the computed figures.",
            agent_key=agents[(n - 1) % len(agents)].key,
        )
        for n in range(1, CREW_TASKS + 1)
    )
    return CrewSpec(key="report", name="Quarterly report", agents=agents, tasks=tasks)


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


def serve_fake_llm(kind: str) -> None:
    """``--serve-fake-llm KIND``: the fake OpenAI server in a process of its own, as a real endpoint
    is, so its threads never take the GIL from the engine. It answers the scenario's script in
    order, over and over, prints its base URL, and stops when its stdin closes.
    """
    from tests.fakes.openai_server import FakeLLMServer

    replies = as_replies(SCRIPTS[kind]())
    numbers = itertools.count()
    with FakeLLMServer() as server:
        server.default = lambda _request: replies[next(numbers) % len(replies)]
        print(server.base_url, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def fake_llm_server_process(kind: str) -> Iterator[str]:
    """Start the fake server for the ``kind`` script in a child process; yield its base URL."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-fake-llm", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake LLM server did not start (it said {base_url!r})")
        yield base_url
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- baselines ----------------------------------------------------------------------------------


def realistic_request(llm: LLMSpec) -> LLMRequest:
    book = PromptBook()
    system = book.render(
        "react_system_no_tools", role="Analyst", goal="Explain the numbers", backstory="Careful."
    )
    user = book.render(
        "react_user",
        description="Write section 3 of the report.",
        expected_output="A paragraph.",
        context=LOREM * 3,
    )
    return LLMRequest(
        llm=llm,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        purpose="react",
    )


async def per_op(op: Callable[[], Awaitable[Any]], *, batches: int = 50, size: int = 200) -> float:
    """Median seconds per ``op`` over ``batches`` timed batches of ``size`` calls."""
    for _ in range(size):
        await op()
    means = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(size):
            await op()
        means.append((time.perf_counter() - started) / size)
    return statistics.median(means)


async def baselines(llm: LLMSpec) -> dict[str, float]:
    gateway = ScriptedGateway(default="Thought: I now know the final answer\nFinal Answer: ok")
    request = realistic_request(llm)

    async def bare_call() -> None:
        gateway.requests.clear()  # keep the recorded list from growing through the loop
        await gateway.complete(request)

    async def loop_turn() -> None:
        await asyncio.sleep(0)

    return {
        "scripted complete()": await per_op(bare_call),
        "event-loop turn": await per_op(loop_turn),
    }


# --- report -------------------------------------------------------------------------------------


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def maxrss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int = 2) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i < text_columns else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 2)) if i < text_columns else ("-" * (w + 1) + ":")
            for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def median_ms(values: Sequence[float]) -> str:
    return ms(statistics.median(values))


def scripted_table(results: Sequence[Result], bare: float) -> str:
    headers = [
        "scenario",
        "calls",
        "runs",
        "engine/call median ms",
        "engine/call p95 ms",
        "x bare call",
        "engine CPU/call median ms",
        "engine CPU/call p95 ms",
        "gap p95 ms",
        "cold engine/call ms",
        "events/run",
        "peak KiB",
    ]
    rows = []
    for r in results:
        engine, cpu = r.per_call("engine"), r.per_call("engine_cpu")
        rows.append(
            [
                r.scenario.name,
                str(r.scenario.calls),
                str(len(r.runs)),
                median_ms(engine),
                ms(p95(engine)),
                f"{statistics.median(engine) / bare:.0f}",
                median_ms(cpu),
                ms(p95(cpu)),
                ms(p95([g for run in r.runs for g in run.gaps])),
                ms(r.cold.engine / r.cold.calls),
                str(r.runs[0].events),
                f"{r.peak_bytes / 1024:.0f}",
            ]
        )
    return table(headers, rows, text_columns=1)


def http_table(results: Sequence[Result]) -> str:
    headers = [
        "scenario",
        "gateway",
        "calls",
        "runs",
        "total/call ms",
        "in complete()/call ms",
        "litellm tasks/call ms",
        "engine/call median ms",
        "engine/call p95 ms",
        "engine share",
        "llm.delta/call ms",
        "GC/call ms",
        "events/run",
        "peak KiB",
    ]
    rows = []
    for r in results:
        engine = r.per_call("engine")
        share = statistics.median(e / w for e, w in zip(engine, r.per_call("wall"), strict=True))
        rows.append(
            [
                r.scenario.name,
                r.scenario.gateway_name,
                str(r.scenario.calls),
                str(len(r.runs)),
                median_ms(r.per_call("wall")),
                median_ms(r.per_call("gateway")),
                median_ms(r.per_call("background")),
                median_ms(engine),
                ms(p95(engine)),
                f"{share:.1%}",
                median_ms(r.per_call("deltas")),
                median_ms(r.per_call("gc")),
                str(r.runs[0].events),
                f"{r.peak_bytes / 1024:.0f}",
            ]
        )
    return table(headers, rows)


def verdict(results: Sequence[Result]) -> list[str]:
    lines = []
    for r in results:
        wall, cpu = p95(r.per_call("engine")) * 1000, p95(r.per_call("engine_cpu")) * 1000
        ok = "meets" if wall < TARGET_MS else "MISSES"
        lines.append(
            f"{r.scenario.name}, scripted: p95 {wall:.3f} ms per call {ok} the {TARGET_MS:g} ms "
            f"target (CPU p95 {cpu:.3f} ms)"
        )
    return lines


# --- main ---------------------------------------------------------------------------------------


NOTES = """\
engine/call = (run wall time - time in gateway.complete() - litellm's logging Tasks) / calls, per
run; median and p95 over the runs. x bare call = engine/call median / one bare scripted complete().
engine CPU = the same in this thread's CPU time, which waiting for a CPU on a busy machine does not
inflate. gap p95 = 95th percentile of the engine time between two calls. cold = the first run in
this process. llm.delta = the engine's streaming callbacks (part of engine/call). GC = collector
time in anyone's code (part of whichever column it fell in). peak KiB = tracemalloc peak during
one more run."""


async def main(runs: int, http_runs: int, stream_runs: int, warmup: int) -> None:
    load_before = os.getloadavg()[0]
    gc.callbacks.append(GC)
    shared = Shared()
    scripted_llm = LLMSpec(key="scripted", model="openai/gpt-4o-mini", max_retries=0)
    base = await baselines(scripted_llm)
    scripted = []
    for kind, lines in SCRIPTS.items():
        script = as_scripted(lines())
        s = scenario(kind, scripted_llm, "scripted", lambda script=script: ScriptedGateway(script))
        scripted.append(await run_scenario(shared, s, runs, warmup, BackgroundMeter()))
    rss_scripted = maxrss_mib()

    from agents.engine.gateway import LiteLLMGateway, _litellm

    started = time.perf_counter()
    _litellm()
    litellm_import = time.perf_counter() - started
    live = LiteLLMGateway()
    # Installed only now: a task factory written in Python costs the scripted runs a little.
    meter = BackgroundMeter()
    asyncio.get_running_loop().set_task_factory(meter.factory)
    over_http = []
    for kind in SCRIPTS:
        with fake_llm_server_process(kind) as base_url:
            for stream in (True, False):
                http_llm = LLMSpec(
                    key="fake",
                    model="openai/fake-model",
                    api_base=base_url,
                    stream=stream,
                    api_key="fake-key-for-the-bench",
                    max_retries=0,
                    timeout=10.0,
                )
                name = "litellm+HTTP, streamed" if stream else "litellm+HTTP, not streamed"
                s = scenario(kind, http_llm, name, lambda: live)
                count = stream_runs if stream else http_runs
                over_http.append(await run_scenario(shared, s, count, warmup, meter))
    rss_all = maxrss_mib()

    print(
        f"Engine overhead per LLM call — {date.today().isoformat()}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; load average {load_before:.2f} "
        f"before, {os.getloadavg()[0]:.2f} after"
    )
    print("Sink: RecordingSink (keeps every event, as the database sink does). Clock: SystemClock.")
    print("Scripted LLM streams (the LLMSpec default): one llm.delta per answer.\n")
    print("Baselines, measured in this run:")
    for label, seconds in base.items():
        print(f"  {label:<20} {seconds * 1e6:8.2f} µs")
    print(f"  litellm import       {litellm_import * 1000:8.0f} ms (once per worker process)\n")
    print("Scripted gateway (ScriptedGateway):")
    print(scripted_table(scripted, base["scripted complete()"]))
    print()
    print("Real litellm over HTTP to the fake OpenAI server (its own process, zero latency):")
    print(http_table(over_http))
    print()
    print(NOTES)
    print(
        f"max RSS: {rss_scripted:.0f} MiB after the scripted runs, {rss_all:.0f} MiB with litellm\n"
    )
    for line in verdict(scripted):
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="timed runs per scripted scenario")
    parser.add_argument(
        "--http-runs", type=int, default=30, help="timed runs, litellm not streamed"
    )
    parser.add_argument("--stream-runs", type=int, default=10, help="timed runs, litellm streamed")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs after the cold one")
    parser.add_argument("--quick", action="store_true", help="a few runs only (smoke test)")
    parser.add_argument("--serve-fake-llm", choices=sorted(SCRIPTS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake_llm:
        serve_fake_llm(args.serve_fake_llm)
        sys.exit(0)
    if args.quick:
        args.runs, args.http_runs, args.stream_runs, args.warmup = 5, 3, 3, 1
    asyncio.run(main(args.runs, args.http_runs, args.stream_runs, args.warmup))
