"""bench/engine.py's tables: the scripted and the litellm figures, the verdict on the target."""

from __future__ import annotations

import resource
import statistics
import sys
from collections.abc import Sequence

from _common import table
from engine_runs import Result

TARGET_MS = 2.0  # the target: engine overhead per LLM call on the scripted gateway


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def maxrss_mib() -> float:
    # ru_maxrss is in KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


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
    return table(rows, headers)


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
    return table(rows, headers, text_columns=2)


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


NOTES = """\
engine/call = (run wall time - time in gateway.complete() - litellm's logging Tasks) / calls, per
run; median and p95 over the runs. x bare call = engine/call median / one bare scripted complete().
engine CPU = the same in this thread's CPU time, which waiting for a CPU on a busy machine does not
inflate. gap p95 = 95th percentile of the engine time between two calls. cold = the first run in
this process. llm.delta = the engine's streaming callbacks (part of engine/call). GC = collector
time in anyone's code (part of whichever column it fell in). peak KiB = tracemalloc peak during
one more run."""
