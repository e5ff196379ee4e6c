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
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Any

import _common  # noqa: F401 - puts the repository on sys.path

# The fake server is on loopback; a proxy from the environment must not see it, and litellm must
# not fetch its price map from the internet.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from engine_meters import GC, BackgroundMeter  # noqa: E402
from engine_report import NOTES, http_table, maxrss_mib, scripted_table, verdict  # noqa: E402
from engine_runs import Shared, run_scenario, scenario  # noqa: E402
from engine_scripts import (  # noqa: E402
    LOREM,
    SCRIPTS,
    as_scripted,
    fake_llm_server_process,
    serve_fake_llm,
)

from agents.engine.llm import LLMRequest, ScriptedGateway  # noqa: E402
from agents.engine.prompts import PromptBook  # noqa: E402
from agents.engine.specs import LLMSpec  # noqa: E402

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


# --- main ---------------------------------------------------------------------------------------


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
    from agents.engine.wire import WireGateway

    direct = WireGateway()
    # Installed only now: a task factory written in Python costs the scripted runs a little.
    meter = BackgroundMeter()
    asyncio.get_running_loop().set_task_factory(meter.factory)
    over_http = []
    pairs: list[tuple[str, bool, Any, Any]] = []  # the two paths for the same calls, in turns
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
                how = "streamed" if stream else "not streamed"
                count = stream_runs if stream else http_runs
                by_path = {}
                for path, gateway in (("litellm", live), ("direct", direct)):
                    s = scenario(kind, http_llm, f"{path}+HTTP, {how}", lambda gateway=gateway: gateway)
                    by_path[path] = await run_scenario(shared, s, count, warmup, meter)
                    over_http.append(by_path[path])
                pairs.append((kind, stream, by_path["litellm"], by_path["direct"]))
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
    print("Over HTTP to the fake OpenAI server (its own process, zero latency), litellm's path and")
    print("the direct one (agents.engine.wire), each scenario on both:")
    print(http_table(over_http))
    print()
    print("Direct path against litellm's, same calls, same run (CPU of this process per call, median):")
    for _kind, stream, via_litellm, via_direct in pairs:
        a = statistics.median(r.cpu / r.calls for r in via_litellm.runs) * 1000
        b = statistics.median(r.cpu / r.calls for r in via_direct.runs) * 1000
        how = "streamed" if stream else "not streamed"
        print(f"  {via_litellm.scenario.name:<28} {how:<13} litellm {a:6.2f} ms  direct {b:6.2f} ms  = {b / a:.2f}x")
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
