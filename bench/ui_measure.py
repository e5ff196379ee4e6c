"""How bench/ui.py times a request: warm-up, rounds of one request per row, CPU and wall time."""

from __future__ import annotations

import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WARMUP = 3


@dataclass
class Row:
    name: str
    times_ms: list[float]
    cpu_ms: list[float]  # this thread's CPU time: what the request costs, whatever the load
    queries: int
    target_ms: float | None
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def p95(self) -> float:
        ordered = sorted(self.times_ms)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    @property
    def worst(self) -> float:
        return max(self.times_ms)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_ms)

    @property
    def verdict(self) -> str:
        """ok: p95 under target. ok on CPU: only this thread's CPU time is (the machine was busy
        with other work, which stretches wall time but not CPU time). missed: both are over."""
        if self.target_ms is None:
            return ""
        if self.p95 < self.target_ms:
            return "ok"
        return "ok on CPU" if self.cpu_median < self.target_ms else "**missed**"


Request = Callable[[], Any]


@dataclass
class Scenario:
    name: str
    request: Request
    target_ms: float | None
    every: int = 1  # measured in every ``every``-th round only (the slow ones)
    note: str = ""


def measure(
    scenarios: list[Scenario], reps: int, profiles: dict[str, pstats.Stats] | None = None
) -> list[Row]:
    """Warm up, then time the scenarios round-robin: one request of each per round, so a swing
    in the machine's load falls on every row (and the baseline) alike. Then one request each
    under ``CaptureQueriesContext`` for the query count, and optionally a few under cProfile."""
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    for scenario in scenarios:
        for _ in range(WARMUP if scenario.every == 1 else 1):
            scenario.request()
    times: dict[str, list[float]] = {s.name: [] for s in scenarios}
    cpu: dict[str, list[float]] = {s.name: [] for s in scenarios}
    for round_ in range(reps):
        for scenario in scenarios:
            if round_ % scenario.every:
                continue
            started, started_cpu = time.perf_counter(), time.thread_time()
            scenario.request()
            times[scenario.name].append((time.perf_counter() - started) * 1000)
            cpu[scenario.name].append((time.thread_time() - started_cpu) * 1000)
    rows = []
    for scenario in scenarios:
        with CaptureQueriesContext(connection) as captured:
            scenario.request()
        queries = len(captured.captured_queries)
        reset_queries()
        if profiles is not None:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(3):
                scenario.request()
            profiler.disable()
            profiles[scenario.name] = pstats.Stats(profiler)
        rows.append(
            Row(
                scenario.name,
                times[scenario.name],
                cpu[scenario.name],
                queries,
                scenario.target_ms,
                scenario.note,
            )
        )
    return rows


def check(response: Any, *, contains: str = "") -> Any:
    assert response.status_code == 200, (response.status_code, response.content[:500])
    if contains:
        body = response.content.decode()
        assert contains in body, contains
    return response
