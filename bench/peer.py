"""Side by side with CrewAI: CPU per LLM call on four workloads, and the full app's CPU per run.

    make bench-peer            # makes var/bench-peer-venv (CrewAI 1.15.30, Python 3.12) once, runs this
    .venv/bin/python bench/peer.py [--rounds 5] [--quick] [--app-runs 2] [--no-app]

Three clients in processes of their own, in turns, against ONE fake OpenAI server in a fourth
process (bench/peer_replies.py: it answers each framework's planner, observer and tasks by what
the request asks for): CrewAI (bench/peer_crewai.py, in its own venv), our engine on the direct
path and on litellm's (bench/peer_ours.py). Workloads: W1 a planned crew of 2 tasks, W2 the same
without planning, W3 one agent's Plan-and-Act on one task (5 steps, each observed: 12 calls),
W4 a planned crew of 10 tasks; each unstreamed and streamed. A figure is the client process's
CPU time (every thread) from kickoff to its end, over the LLM calls the fake server counted for
it: the server's own CPU is in its process, never in the figure (printed beside, per call).

The full app (bench/peer_app.py): ``manage.py serve`` on a throwaway folder, a planned 2-task crew
made through the API, kicked off over HTTP and followed on its JSON socket to the end, without
and with deltas; the server's CPU per run against CrewAI's whole in-process W1 kickoff, measured
in the same rounds. bench/README.md ("Side by side with CrewAI") keeps the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any, TextIO

from _common import PYTHON, ROOT, table
from runs_server import cpu_seconds

WORKLOADS = {
    "W1": "crew planning, 2 tasks",
    "W2": "crew, 2 tasks, no planning",
    "W3": "one agent's Plan-and-Act",
    "W4": "crew planning, 10 tasks",
}
SIDES = ("crewai", "direct", "litellm")
TARGET = 0.2  # ours / CrewAI per call
APP_TARGET = 0.5  # the app's server CPU per run / CrewAI's W1 kickoff
PEER_PYTHON = ROOT / "var" / "bench-peer-venv" / "bin" / "python"
LOG = ROOT / "var" / "bench-peer.log"  # what the clients print (CrewAI's console, warnings)


class Child:
    """A process spoken to in JSON lines: one question on stdin, one answer on stdout."""

    def __init__(self, argv: list[str], log: TextIO) -> None:
        env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True
        )
        self.hello = self.read()

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.process.args} stopped (its output is in {LOG})")
        return line.strip()

    def ask(self, line: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Fake(Child):
    """The fake OpenAI server's process: its base URL, and its request counts on demand."""

    @property
    def base_url(self) -> str:
        return self.hello

    def counts(self) -> tuple[int, int]:
        total, streamed = self.ask("count").split()
        return int(total), int(streamed)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def measure(rounds: int, warmup: int, app_runs: int, with_app: bool) -> dict[str, Any]:
    """Every kickoff of every client, in turns; the app's runs in the same rounds."""
    LOG.parent.mkdir(exist_ok=True)
    per_call: dict[tuple[str, bool, str], list[float]] = defaultdict(list)
    kickoff_cpu: dict[tuple[str, bool, str], list[float]] = defaultdict(list)
    calls: dict[tuple[str, bool, str], set[int]] = defaultdict(set)
    fake_cpu: list[float] = []
    app_figures: dict[bool, list[Any]] = {False: [], True: []}
    with LOG.open("w") as log, contextlib.ExitStack() as stack:

        def child(kind: type[Child], *argv: str) -> Child:
            started = kind(list(argv), log)
            stack.callback(started.close)
            return started

        fake = child(Fake, PYTHON, str(ROOT / "bench" / "peer.py"), "--serve-fake")
        assert isinstance(fake, Fake)
        clients = {
            "crewai": child(Child, str(PEER_PYTHON), str(ROOT / "bench" / "peer_crewai.py")),
            "direct": child(Child, PYTHON, str(ROOT / "bench" / "peer_ours.py"), "direct"),
            "litellm": child(Child, PYTHON, str(ROOT / "bench" / "peer_ours.py"), "litellm"),
        }
        versions = json.loads(clients["crewai"].hello)
        app = None
        if with_app:
            from peer_app import running_app

            app = stack.enter_context(running_app(fake.base_url))
        for n in range(warmup + rounds):
            timed = n >= warmup
            order = SIDES[n % 3 :] + SIDES[: n % 3]  # who goes first changes every round
            print(f"round {n + 1} of {warmup + rounds}{'' if timed else ' (warm-up)'}", file=sys.stderr, flush=True)
            for workload in WORKLOADS:
                for stream in (False, True):
                    for side in order:
                        command = {"workload": workload, "stream": stream, "base_url": fake.base_url}
                        (before, _), server_before = fake.counts(), cpu_seconds(fake.process.pid)
                        answer = json.loads(clients[side].ask(json.dumps(command)))
                        (after, _), server_after = fake.counts(), cpu_seconds(fake.process.pid)
                        if not answer["ok"]:
                            raise RuntimeError(f"{side} {workload} failed:\n{answer['error']}")
                        if timed:
                            key = (workload, stream, side)
                            per_call[key].append(answer["cpu"] / (after - before))
                            kickoff_cpu[key].append(answer["cpu"])
                            calls[key].add(after - before)
                            fake_cpu.append((server_after - server_before) / (after - before))
            if app is not None:
                for deltas in (False, True):
                    for _ in range(app_runs):
                        figures = asyncio.run(app.run(deltas=deltas, count_calls=fake.counts))
                        if timed:
                            app_figures[deltas].append(figures)
    return {"per_call": per_call, "kickoff": kickoff_cpu, "calls": calls, "fake_cpu": fake_cpu,
            "app": app_figures, "crewai": versions}  # fmt: skip


def report(figures: dict[str, Any], rounds: int, load_before: tuple[float, ...]) -> None:
    per_call, calls = figures["per_call"], figures["calls"]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load_after = os.getloadavg()
    print(
        f"Side by side with CrewAI {figures['crewai']['version']} (Python {figures['crewai']['python']}) — "
        f"{now}; ours on Python {platform.python_version()}; {os.cpu_count()} CPUs; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after ({rounds} timed rounds, clients in turns)\n"
    )
    print("CPU ms per LLM call (the client process, every thread, median of the rounds); the fake")
    print(f"server's own CPU ({median(figures['fake_cpu']) * 1000:.2f} ms per call) is in its own process, "
          "not in these figures.\n")  # fmt: skip
    rows, worst = [], 0.0
    for workload, title in WORKLOADS.items():
        for stream in (False, True):
            def ms(side: str, workload: str = workload, stream: bool = stream) -> float:
                return median(per_call[(workload, stream, side)]) * 1000

            def n(side: str, workload: str = workload, stream: bool = stream) -> str:
                return "/".join(str(c) for c in sorted(calls[(workload, stream, side)]))

            crewai, direct, litellm = ms("crewai"), ms("direct"), ms("litellm")
            whole = (median(figures["kickoff"][(workload, stream, "direct")])
                     / median(figures["kickoff"][(workload, stream, "crewai")]))  # fmt: skip
            worst = max(worst, direct / crewai)
            rows.append([
                f"{workload} {title}", "streamed" if stream else "unstreamed", f"{n('crewai')} / {n('direct')}",
                f"{crewai:.2f}", f"{direct:.2f}", f"**{direct / crewai:.2f}×**", f"{litellm:.2f}", f"{litellm / crewai:.2f}×",
                f"{whole:.2f}×",
            ])  # fmt: skip
    print(table(rows, ["workload", "mode", "calls CrewAI / ours", "CrewAI ms", "ours direct ms", "direct / CrewAI",
                       "ours litellm ms", "litellm / CrewAI", "direct / CrewAI per kickoff"], text_columns=2))  # fmt: skip
    print("(per kickoff: the whole kickoff's CPU, whatever the number of calls; ours runs an approved crew plan")
    print(" step by step, so a planned crew makes more, smaller calls than CrewAI's)")
    verdict = "met" if worst <= TARGET else "NOT met"
    print(f"\nTarget ours (direct, as shipped) ≤ {TARGET}× CrewAI per call on every row: {verdict} (worst {worst:.2f}×).")
    if not any(figures["app"].values()):
        return
    print("\nFull app, planned 2-task run (HTTP kickoff → worker → events → JSON socket), server CPU per run")
    print("against CrewAI's whole in-process W1 kickoff (planning + 2 tasks), both measured in these rounds:\n")
    rows = []
    app_worst = 0.0
    for deltas in (False, True):
        runs = figures["app"][deltas]
        crewai_w1 = median(figures["kickoff"][("W1", deltas, "crewai")]) * 1000
        server = median([r.cpu for r in runs]) * 1000
        app_worst = max(app_worst, server / crewai_w1)
        rows.append([
            "one viewer following the deltas" if deltas else "nobody follows the deltas",
            str(len(runs)), f"{sum(r.streamed for r in runs)}/{sum(r.calls for r in runs)}",
            f"{median([r.wall for r in runs]) * 1000:.0f}", f"{server:.0f}", f"{crewai_w1:.0f}",
            f"**{server / crewai_w1:.2f}×**",
        ])  # fmt: skip
    print(table(rows, ["app run", "runs", "streamed calls", "wall ms", "server CPU ms", "CrewAI W1 CPU ms",
                       "app / CrewAI"], text_columns=1))  # fmt: skip
    verdict = "met" if app_worst <= APP_TARGET else "NOT met"
    print(f"\nTarget the app's server CPU per run ≤ {APP_TARGET}× CrewAI's W1 kickoff: {verdict} (worst {app_worst:.2f}×).")
    print("CrewAI's W1 is its streamed kickoff on the deltas row, its unstreamed one on the other. The app")
    print("streams every call on the wire either way (agents/engine/calls.py: a cancelled stream stops a local")
    print("server); with nobody following, the deltas go nowhere (no llm.delta events, rows or frames).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (each: every workload, client, mode)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (imports, connections)")
    parser.add_argument("--app-runs", type=int, default=2, help="app runs per mode per round")
    parser.add_argument("--no-app", action="store_true", help="leave the full-app measurement out")
    parser.add_argument("--quick", action="store_true", help="one timed round (smoke test)")
    parser.add_argument("--serve-fake", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_fake:
        from peer_replies import serve

        serve()
        return
    if not PEER_PYTHON.exists():
        sys.exit(f"{PEER_PYTHON} is missing: `make bench-peer` makes CrewAI's venv, then runs this.")
    if args.quick:
        args.rounds, args.app_runs = 1, 1
    load_before = os.getloadavg()
    report(measure(args.rounds, args.warmup, args.app_runs, not args.no_app), args.rounds, load_before)


if __name__ == "__main__":
    main()
