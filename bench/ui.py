"""UI server time: the plan editor, the run page and its replay, step edits and moves, the crew page.

Run from the repository root: ``.venv/bin/python bench/ui.py`` (``--reps N``, default 30;
``--profile`` adds cProfile hot spots of every measured request; ``--quick`` for a smoke run;
``--ab reversing`` times the rows a hand-made piece speeds up once more without it).
bench/README.md ("UI") says what the figures mean and keeps the last ones measured.

Everything happens in this process, on a throwaway PLANNER_VAR_DIR with its own SQLite database
(migrated and seeded as ``make run`` does), with ``planner_site.settings`` and DEBUG off. The
data is a crew of 20 tasks with a plan of 20 steps per task (drafted through ``crews.plans``,
then edited a few times, so the history has versions), and a finished run of that crew with
2,000 events stored through ``crews.bridge.record_event``: per task an agent plan, steps with
LLM calls, tool calls and reviews, the task's answer.

Each request goes through Django's test ``Client`` signed in as the seeded admin (the whole
middleware stack, the view, the templates and the database; no socket). After warm-up requests,
the rows are timed round-robin, one request of each per round for N rounds, so a swing in the
machine's load falls on every row alike: median, p95 and max wall time in ms, and the median of
the thread's CPU time (what the request costs, whatever else the machine is doing). One more
request per row runs under ``CaptureQueriesContext`` for its SQL query count. The baseline is
the sign-in page (the same middleware and base template, no data): the ratio column is each
row's median over its median. A target counts as met ("ok") when the p95 is under it, "ok on
CPU" when only the CPU median is (a busy machine), "missed" otherwise; the exit status is 1
when one is missed.

Rows: the crew page; the plan editor; one step edit (the htmx POST that saves a step's text);
a step move (the htmx POST of Move down / Move up); the run page of the finished run (its replay:
the page folded from the 2,000 stored events); and the socket replay, what
``/ws/runs/<id>/?after=0`` sends a client that has none of the events (2,000 out-of-band HTML
fragments, timed in-process around ``crews.run_view.render_event_html``, which the consumer
calls per event). Targets: a page under 150 ms, a step edit (or move) under 50 ms.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import pstats
import random
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

from _common import ROOT
from ui_data import EVENTS, STEPS, TASKS, Data, build, configure
from ui_measure import WARMUP, Row, Scenario, check, measure
from ui_without import PIECES, without_rows

PAGE_TARGET_MS = 150.0
EDIT_TARGET_MS = 50.0


def rows_for(
    data: Data, reps: int, profiles: dict[str, pstats.Stats] | None, pieces: list[str] | None = None
) -> list[Row]:
    from django.test import Client
    from django.urls import reverse
    from django.utils import translation

    from crews.bridge import payload_of
    from crews.models import Plan, Run, RunEvent
    from crews.run_view import RunView, render_event_html

    client = Client(HTTP_HOST="localhost")
    client.force_login(data.owner)
    htmx = {"HTTP_HX_REQUEST": "true"}
    plan_url = reverse("crews:plan-detail", args=[data.plan_id])
    edit_url = reverse("crews:plan-step-update", args=[data.plan_id, data.step_uid])
    move_url = reverse("crews:plan-step-move", args=[data.plan_id, data.step_uid])
    run_url = reverse("crews:run-detail", args=[data.run_id])
    crew_url = reverse("crews:crew-detail", args=[data.crew_id])

    def version() -> int:
        return Plan.objects.values_list("version", flat=True).get(pk=data.plan_id)

    edits = iter(range(10**9))

    def step_edit() -> None:
        check(
            client.post(
                edit_url,
                {
                    "text": f"Survey the rock pools at low tide, take {next(edits)}",
                    "version": version(),
                },
                **htmx,
            ),
            contains="Saved: version",
        )

    moves = iter(range(10**9))

    def step_move() -> None:
        direction = "down" if next(moves) % 2 == 0 else "up"
        check(
            client.post(move_url, {"direction": direction, "version": version()}, **htmx),
            contains="Step moved",
        )

    run = Run.objects.get(pk=data.run_id)
    stored = [payload_of(e) for e in RunEvent.objects.filter(run_id=run.pk).order_by("seq")]

    def socket_replay() -> None:
        # What RunEventsHtmlConsumer does for a client connecting with ?after=0: the view as the
        # page showed it (no events), then every stored event folded in and sent as fragments.
        view = RunView.build(Run.objects.select_related("crew", "agent").get(pk=run.pk), upto=0)
        events = [payload_of(e) for e in RunEvent.objects.filter(run_id=run.pk).order_by("seq")]
        with translation.override("en"):
            for event in events:
                render_event_html(view, dict(event), can_write=True)

    assert len(stored) == EVENTS
    versions_before = version()
    scenarios = [
        Scenario(
            "baseline: sign-in page (GET /login/)", lambda: check(client.get("/login/")), None
        ),
        Scenario(f"crew page ({TASKS} tasks)", lambda: check(client.get(crew_url)), PAGE_TARGET_MS),
        Scenario(
            f"plan editor ({TASKS} tasks x {STEPS} steps)",
            lambda: check(client.get(plan_url)),
            PAGE_TARGET_MS,
        ),
        Scenario("step edit (htmx POST, saves a version)", step_edit, EDIT_TARGET_MS),
        Scenario("step move (htmx POST, saves a version)", step_move, EDIT_TARGET_MS),
        Scenario(
            f"run page, finished ({EVENTS:,} events replayed)",
            lambda: check(client.get(run_url)),
            PAGE_TARGET_MS,
        ),
        Scenario(
            f"socket replay from after=0 ({EVENTS:,} fragments)",
            socket_replay,
            None,
            every=3,
            note="in-process: the consumer's work",
        ),
    ]
    shipped = list(scenarios)
    for piece in pieces or []:  # the same requests without a hand-made piece, in the same rounds
        scenarios += without_rows(piece, shipped, data)
    rows = measure(scenarios, reps, profiles)
    rows[2].note = f"the plan had {versions_before} to {version()} versions meanwhile"
    return rows


# Reporting ---------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    base = rows[0].median
    lines = [
        "| request | n | median ms | p95 ms | max ms | CPU median ms | SQL queries | x baseline | target | |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        target = f"< {row.target_ms:.0f} ms" if row.target_ms else "—"
        name = row.name + (f" ({row.note})" if row.note else "")
        lines.append(
            f"| {name} | {len(row.times_ms)} | {row.median:.1f} | {row.p95:.1f} | {row.worst:.1f} "
            f"| {row.cpu_median:.1f} | {row.queries} | {row.median / base:.1f} | {target} "
            f"| {row.verdict} |"
        )
    return "\n".join(lines)


def hot_spots(name: str, stats: pstats.Stats, limit: int = 18) -> str:
    """The functions with the most own time under ``name``, with file:line, project code marked."""
    out = io.StringIO()
    stats.stream = out  # type: ignore[attr-defined]
    entries = []
    for (filename, line, func), (_cc, calls, own, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        entries.append((own, cumulative, calls, filename, line, func))
    total = sum(e[0] for e in entries) or 1.0
    lines = [f"### {name}: own time (total {total * 1000:.0f} ms over the profiled requests)"]
    for own, cumulative, calls, filename, line, func in sorted(entries, reverse=True)[:limit]:
        where = (
            filename.replace(str(ROOT) + "/", "")
            if filename.startswith(str(ROOT))
            else Path(filename).name
        )
        mark = "*" if filename.startswith(str(ROOT)) and "/.venv/" not in filename else " "
        lines.append(
            f" {mark} {own / total:5.1%}  own {own * 1000:7.1f} ms  cum {cumulative * 1000:7.1f} ms  "
            f"{calls:>7} calls  {where}:{line} {func}"
        )
    project = sorted(
        (e for e in entries if e[3].startswith(str(ROOT)) and "/.venv/" not in e[3]),
        key=lambda e: e[1],
        reverse=True,
    )[:8]
    lines.append("   project code by cumulative time:")
    for _own, cumulative, calls, filename, line, func in project:
        lines.append(
            f"   {cumulative / total:5.1%}  cum {cumulative * 1000:7.1f} ms  {calls:>7} calls  "
            f"{filename.replace(str(ROOT) + '/', '')}:{line} {func}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="timed requests per row (default 30)")
    parser.add_argument("--profile", action="store_true", help="print cProfile hot spots per row")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 requests per row")
    parser.add_argument("--keep", action="store_true", help="keep the throwaway var dir")
    parser.add_argument(
        "--ab",
        default="",
        help="comma-separated pieces (reversing) to also time without, in the same rounds",
    )
    args = parser.parse_args()
    pieces = [p for p in args.ab.split(",") if p]
    if unknown := set(pieces) - set(PIECES):
        parser.error(f"--ab: unknown {sorted(unknown)}; known: {', '.join(PIECES)}")
    reps = 5 if args.quick else args.reps

    var_dir = Path(tempfile.mkdtemp(prefix="planner-bench-ui-"))
    try:
        configure(var_dir)
        from django.conf import settings

        assert not settings.DEBUG
        data = build(random.Random(20261130))
        print(
            f"Data: crew of {TASKS} tasks x {STEPS} steps, a finished run of {EVENTS:,} events "
            f"(built in {data.build_seconds:.1f} s, SQLite in {var_dir}).",
            file=sys.stderr,
        )
        profiles: dict[str, pstats.Stats] | None = {} if args.profile else None
        load_before = os.getloadavg()[0]
        rows = rows_for(data, reps, profiles, pieces)
        load_after = os.getloadavg()[0]
        print(
            f"UI server time, {date.today().isoformat()}, Python {platform.python_version()}, "
            f"Django {__import__('django').get_version()}, {os.cpu_count()} CPUs, SQLite, DEBUG off, "
            f"{reps} timed requests per row after {WARMUP} warm-up; load average "
            f"{load_before:.1f} before, {load_after:.1f} after\n"
        )
        print(table(rows))
        missed = [r for r in rows if r.verdict == "**missed**"]
        if profiles:
            for name, stats in profiles.items():
                print()
                print(hot_spots(name, stats))
        if missed:
            print(
                "\nMissed: "
                + "; ".join(
                    f"{r.name} (CPU {r.cpu_median:.0f} ms, p95 {r.p95:.0f} ms)" for r in missed
                )
            )
        return 1 if missed else 0
    finally:
        if args.keep:
            print(f"kept {var_dir}", file=sys.stderr)
        else:
            shutil.rmtree(var_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
