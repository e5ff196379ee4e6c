"""Runs: events stored and broadcast per second, emit-to-websocket latency, 20 runs at once.

Run from the repository root: ``.venv/bin/python bench/runs.py`` (``--quick`` for a smoke run).
With ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` set, the event-throughput figures are also
measured on PostgreSQL + Redis (in a throwaway database created next to the one the URL names,
dropped afterwards, with its own channel-layer prefix). Nothing leaves loopback. ``--ab PIECE``
measures (c) on two servers in turns, one with a hand-made piece switched off (bench/without.py).
bench/README.md ("Runs") says what the figures mean and keeps the last ones measured.

(a) Events per second: ``crews.sink.RunEventSink.emit`` (``record_event`` — the gapless seq under
    the run row's lock, the roll-ups — then the channel-layer broadcast, drained by one listener
    per run) for N events on one run, and on 4 runs at once. The harness is the one ``serve`` uses:
    the event loop in the main thread, one worker thread per run calling ``async_to_sync``. The
    baseline is ``record_event`` alone in a plain loop, in the same process.
(b) Latency from emit to a websocket client: the real server (``manage.py serve`` on a free port,
    a throwaway PLANNER_VAR_DIR, SQLite and the in-memory channel layer, as ``make run``), a real
    10-task crew run against a fake OpenAI server (20 ms per answer), 1 or 100 clients on
    ``/ws/api/runs/<id>/`` with a bearer token, 3 rounds. The fake LLM holds the run's first call until every client is connected, so
    the figures cover live events only. Latency = the client's receive time - the event's
    ``at`` (stored with microseconds when the row is written; same machine, same clock).
(c) 20 runs at once: a 2-task crew (planning off) on an LLM whose every reply takes 200 ms, so one
    run is 2 calls, ideally 0.4 s plus overhead. Kicked off together through
    ``POST /api/crews/{id}/kickoff``; the wall time until the last ``run.succeeded`` reached its
    websocket, against the baseline: one such run alone, measured the same way in the same bench,
    after an untimed round of as many runs at once (threads' first connections, compiled queries).
    It also prints the whole machine's busy CPU per run (/proc/stat: ours, the bench's, the rest)
    against what the target leaves: CPUs × 1.3 × the ideal ÷ runs.
    With ``DATABASE_URL`` (PostgreSQL) and ``REDIS_URL`` set, (c) is measured a second time in the
    scale-out topology: ``serve --workers 0`` for HTTP and websockets, and ``--scaleout PxT``
    (default 2x16) ``manage.py db_worker --threads T`` processes, on a throwaway database and Redis
    database 14. Its CPU column adds up every process of ours (PostgreSQL's and Redis's own are not
    in it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from datetime import date

from _common import ROOT, table
from runs_events import EVENT_MIX, child_events, event_rows, run_events_child
from runs_floor import litellm_floor
from runs_rounds import ServerFigures, ab_concurrency, bench_scaleout, bench_server
from runs_server import LLM_DELAY
from without import PIECES

sys.path.insert(0, str(ROOT))

# Loopback only: no proxy may see the fake LLM or the server.
os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"

P99_TARGET_MS = 50.0  # at 100 clients
CONCURRENT_TARGET = 1.3  # 20 runs within 1.3x the time of one run alone


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def reference_loop_ms() -> float:
    """CPU ms of a fixed pure-Python loop, best of 5: how fast this machine runs Python, so that
    figures taken on different machines can be compared."""
    best = float("inf")
    for _ in range(5):
        began = time.process_time()
        kept: dict[int, str] = {}
        for i in range(200_000):
            kept[i % 1000] = str(i)
        best = min(best, time.process_time() - began)
    return best * 1000


# Report -----------------------------------------------------------------------------------------


def concurrency_report(figures: ServerFigures, runs: int) -> None:
    ideal = statistics.median(figures.single)
    many = statistics.median(figures.many)
    ratio = many / ideal
    rows = [
        [
            "one run alone — ideal, the baseline",
            f"{ideal:.2f}",
            f"{min(figures.single):.2f}–{max(figures.single):.2f}",
            f"{statistics.median(figures.waits_single) * 1000:.0f} / {max(figures.waits_single) * 1000:.0f}",
            f"{statistics.median(figures.cpu_single) * 1000:.0f}",
            "1.00",
            "",
            "",
        ],
        [
            f"{runs} runs at once",
            f"{many:.2f}",
            f"{min(figures.many):.2f}–{max(figures.many):.2f}",
            f"{statistics.median(figures.waits_many) * 1000:.0f} / {max(figures.waits_many) * 1000:.0f}",
            f"{statistics.median(figures.cpu_many) * 1000:.0f}",
            f"{ratio:.2f}",
            f"≤ {CONCURRENT_TARGET}" if runs >= 20 else "(20 runs)",
            ("met" if ratio <= CONCURRENT_TARGET else "MISSED") if runs >= 20 else "",
        ],
    ]
    headers = [
        f"(c) 2 LLM calls of {LLM_DELAY * 1000:.0f} ms per run",
        "wall s",
        "range",
        "queue wait ms (med / max)",
        "CPU ms/run",
        "ratio",
        "target",
        "",
    ]
    print(table(rows, headers))
    # Per CPU (#20): what one CPU-second of the server does, and how many runs at once the CPU
    # of one process (one interpreter lock) then holds within the target's time.
    alone, together = statistics.median(figures.cpu_single), statistics.median(figures.cpu_many)
    window = CONCURRENT_TARGET * ideal
    print(
        f"\nPer CPU: {1 / alone:.0f} runs per CPU-second alone, {1 / together:.0f} with {runs} at once; "
        f"within {CONCURRENT_TARGET} × one run's {ideal:.2f} s, one process's CPU holds "
        f"{int(window / together)} runs at once at {together * 1000:.0f} ms each (measured: {runs} at once "
        f"took {ratio:.2f} ×)."
    )
    bad = [o for o in figures.outcomes if o != "run.succeeded"]
    if bad:
        print(f"!! {len(bad)} runs did not succeed: {sorted(set(bad))}; {figures.first_error}")
    if len(figures.workers.split()) > 1:  # scale-out: the web process's share
        web = statistics.median(figures.cpu_web_many) * 1000
        print(
            f"\nOf the CPU per run with {runs} at once, the web process (HTTP, websockets) "
            f"spent {web:.0f} ms and the db_worker processes "
            f"{statistics.median(figures.cpu_many) * 1000 - web:.0f} ms."
        )
    if figures.machine_many:
        machine = statistics.median(figures.machine_many) * 1000
        ours = statistics.median(figures.cpu_many) * 1000
        bench = statistics.median(figures.bench_many) * 1000
        cores = os.cpu_count() or 1
        budget = cores * CONCURRENT_TARGET * ideal / runs * 1000
        print(
            f"\nThe whole machine, per run with {runs} at once: {machine:.0f} ms of CPU busy "
            f"(our processes {ours:.0f}, the bench's clients and fake LLM {bench:.0f}, the rest — "
            f"PostgreSQL, Redis, the system — {max(0.0, machine - ours - bench):.0f}). Within "
            f"{CONCURRENT_TARGET} × the ideal, {cores} CPUs give at most {budget:.0f} ms per run, "
            f"and one process on one GIL {budget / cores:.0f} ms."
        )
    if figures.floor:
        floor_report(figures.floor, ideal, runs)
    print(
        f"\nMedians of {len(figures.single)} rounds. LLM time alone: {2 * LLM_DELAY:.2f} s per run. "
        f"Queue wait = started_at - created_at of each run."
    )


def floor_report(floor: dict[str, float], ideal: float, runs: int) -> None:
    """The parts no run can do without, against what one process (one GIL) may spend per run."""
    budget = CONCURRENT_TARGET * ideal / runs * 1000
    llm, request, socket_ = floor["litellm_call"], floor["request"], floor["socket"]
    stack = 2 * llm + request
    total = stack + socket_
    rows = [
        ["a litellm.acompletion call (not streamed), in a process of its own",
         f"{llm:.1f}", f"{2 * llm:.1f} (2 calls)"],
        ["an API request refused before any database work (401): Daphne, Django's middleware, "
         "django-ninja", f"{request:.1f}", f"{request:.1f} (the kickoff)"],
        ["the stack alone: no work of ours", "", f"{stack:.1f}"],
        ["a websocket: connect, check, replay a finished run's events, close (ours included)",
         f"{socket_:.1f}", f"{socket_:.1f} (its follower)"],
        ["floor per run", "", f"{total:.1f}"],
        [f"budget of one process (one GIL): {CONCURRENT_TARGET} × the ideal ÷ {runs}", "",
         f"{budget:.1f}"],
    ]  # fmt: skip
    print(f"\n{table(rows, [f'(c) floor, CPU ms, {runs} at once', 'each', 'per run'])}")
    left = budget - stack
    if socket_ > left:
        verdict = (
            f"litellm and a bare request take {stack / budget:.2f} × that budget. The "
            f"{max(left, 0.0):.1f} ms left per run must pay for all our own work (the kickoff's "
            "reads and writes, the claim, the events stored and broadcast, the finish) and for the "
            f"socket following the run, which alone takes {socket_:.1f} ms: one process cannot "
            "meet (c) on this machine."
        )
    else:
        verdict = (
            f"That leaves {budget - total:.1f} ms per run for the rest of our work: the kickoff's "
            "reads and writes, the claim, the events stored and broadcast, the finish."
        )
    step = llm * runs
    print(
        f"\n{verdict} Each {LLM_DELAY * 1000:.0f} ms LLM step of {runs} runs at once takes "
        f"{runs} × {llm:.1f} = {step:.0f} ms of litellm's CPU on one GIL "
        f"({step / (LLM_DELAY * 1000):.2f} × the step)."
    )


def ab_report(piece: str, shipped: ServerFigures, without: ServerFigures, runs: int) -> None:
    """``--ab``: (c) as shipped and without ``piece``, measured in turns on two servers."""
    print(f"\n(c) with and without {piece} (bench/without.py), two servers in turns. As shipped:\n")
    concurrency_report(shipped, runs)
    print(f"\nWithout {piece}:\n")
    concurrency_report(without, runs)
    cpu = statistics.median(shipped.cpu_many) / statistics.median(without.cpu_many)
    wall = statistics.median(shipped.many) / statistics.median(without.many)
    alone = statistics.median(shipped.cpu_single) / statistics.median(without.cpu_single)
    print(
        f"\nAs shipped ÷ without {piece}: server CPU per run {cpu:.2f} with {runs} at once "
        f"({alone:.2f} alone), wall time of {runs} at once {wall:.2f}."
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer of everything")
    parser.add_argument("--parts", default="a,b,c", help="which figures: a, b, c (default all)")
    parser.add_argument("--events", type=int, default=None, help="events per run in (a) (1000)")
    parser.add_argument("--runs-at-once", type=int, default=4, help="runs emitting together in (a)")
    parser.add_argument("--serve-args", default="", help="extra arguments for manage.py serve")
    parser.add_argument(
        "--scaleout",
        default="2x16",
        help="(c) again as db_worker processes x threads on PostgreSQL + Redis, when DATABASE_URL "
        "and REDIS_URL are set (default 2x16; 'off' skips it)",
    )
    parser.add_argument(
        "--ab",
        choices=PIECES,
        help="(c) on two servers in turns, as shipped and with this hand-made piece switched off",
    )
    parser.add_argument("--child-events", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--litellm-floor", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.litellm_floor:
        litellm_floor(args.litellm_floor, args.runs_at_once)
        return
    events = args.events or (200 if args.quick else 1000)
    if args.child_events:
        child_events(events, args.runs_at_once)
        return
    parts = {p.strip() for p in args.parts.split(",")}

    load_before = os.getloadavg()
    reference = reference_loop_ms()
    results = []
    if "a" in parts:
        sqlite_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        results.append(run_events_child(events, args.runs_at_once, sqlite_env))
        if os.environ.get("DATABASE_URL", "").startswith("postgres") and os.environ.get(
            "REDIS_URL"
        ):
            results.append(run_events_child(events, args.runs_at_once, dict(os.environ)))
    server: ServerFigures | None = None
    runs = 5 if args.quick else 20
    server_parts = parts - {"c"} if args.ab else parts  # with --ab, (c) is the A/B's own
    if server_parts & {"b", "c"}:
        server = bench_server(
            parts=server_parts,
            clients=[1, 10] if args.quick else [1, 100],
            latency_rounds=1 if args.quick else 3,
            latency_tasks=5 if args.quick else 10,
            runs=runs,
            rounds=1 if args.quick else 3,
            serve_args=args.serve_args.split(),
        )
    ab: tuple[ServerFigures, ServerFigures] | None = None
    if args.ab and "c" in parts:
        ab = ab_concurrency(
            piece=args.ab,
            runs=runs,
            rounds=2 if args.quick else 6,
            serve_args=args.serve_args.split(),
        )
    scaleout: ServerFigures | None = None
    if (
        "c" in parts
        and args.scaleout != "off"
        and os.environ.get("DATABASE_URL", "").startswith("postgres")
        and os.environ.get("REDIS_URL")
    ):
        processes, threads = (int(n) for n in args.scaleout.lower().split("x"))
        scaleout = bench_scaleout(
            runs=runs, rounds=1 if args.quick else 3, processes=processes, threads=threads
        )
    load_after = os.getloadavg()
    reference_after = reference_loop_ms()

    print(
        f"Runs bench — {date.today().isoformat()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after;"
        f" reference loop (200,000 dict stores of str(i), best of 5) {reference:.0f} ms of CPU "
        f"before, {reference_after:.0f} ms after"
    )
    if max(reference, reference_after) > 1.2 * min(reference, reference_after):
        print("!! The machine's speed changed during the bench: compare figures with care.")
    if results:
        print(f"(a) {events} events per run; event mix {', '.join(EVENT_MIX)}.\n")
        rows: list[list[str]] = []
        for result in results:
            rows += event_rows(result)
            expected = (events, events * result["runs"])
            if (
                not result["gapless"]
                or (result["broadcast_one"], result["broadcast_many"]) != expected
            ):
                print(
                    f"!! {result['database']}: gapless={result['gapless']}, broadcast "
                    f"{result['broadcast_one']} / {result['broadcast_many']} (expected {expected})"
                )
        print(table(rows, ["(a) events stored and broadcast", "rate", "vs baseline", "scaling"]))
        print()
    if server is None:
        if ab is not None:
            ab_report(args.ab, *ab, runs)
        return
    command = " ".join(["manage.py serve", *args.serve_args.split()])
    print(f"Server: {command} ({server.workers} workers), SQLite + in-memory layer.\n")
    if server.latency:
        rows = []
        for n, (samples, count) in server.latency.items():
            p99 = percentile(samples, 99)
            target = f"< {P99_TARGET_MS:.0f}" if n >= 100 else ""
            verdict = ("met" if p99 < P99_TARGET_MS else "MISSED") if target else ""
            rows.append(
                [
                    f"(b) emit → websocket, {n} client{'s' if n > 1 else ''} "
                    f"({count} events, {len(samples)} samples)",
                    f"{percentile(samples, 50):.1f}",
                    f"{p99:.1f}",
                    f"{max(samples):.1f}",
                    target,
                    verdict,
                ]
            )
        print(table(rows, ["latency (ms)", "p50", "p99", "max", "p99 target", ""]))
        print()
    if server.single:
        concurrency_report(server, runs)
    if scaleout is not None:
        print(
            f"\nScale-out: manage.py serve --workers 0 and {scaleout.workers} "
            "(db_worker processes × threads), PostgreSQL + Redis.\n"
        )
        concurrency_report(scaleout, runs)
    if ab is not None:
        ab_report(args.ab, *ab, runs)

if __name__ == "__main__":
    main()
