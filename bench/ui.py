"""UI server time: the plan editor, the run page and its replay, step edits and moves, the crew page.

Run from the repository root: ``.venv/bin/python bench/ui.py`` (``--reps N``, default 30;
``--profile`` adds cProfile hot spots of every measured request; ``--quick`` for a smoke run).
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
the page folded from the 2,000 stored events), viewed again and viewed first (the markdown memo
cleared before each request, as after a restart); and the socket replay, what
``/ws/runs/<id>/?after=0`` sends a client that has none of the events (2,000 out-of-band HTML
fragments, timed in-process around ``crews.run_view.render_event_html``, which the consumer
calls per event). Targets: a page under 150 ms, a step edit (or move) under 50 ms.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASKS = 20
STEPS = 20
EVENTS = 2_000
PAGE_TARGET_MS = 150.0
EDIT_TARGET_MS = 50.0
WARMUP = 3


def configure(var_dir: Path) -> None:
    """The environment ``make run`` gives the server, on a throwaway var dir; then Django."""
    for name in ("DATABASE_URL", "REDIS_URL", "DJANGO_DEBUG"):
        os.environ.pop(name, None)
    os.environ.update(
        PLANNER_VAR_DIR=str(var_dir),
        DJANGO_SETTINGS_MODULE="planner_site.settings",
        DJANGO_DEBUG="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        PLANNER_KICKOFF_RATE_PER_MINUTE="1000",
        PLANNER_LOG_LEVEL="WARNING",
    )
    import django

    django.setup()


# The data ----------------------------------------------------------------------------------------

WORDS = [
    "survey", "collect", "compare", "sources", "tide", "pools", "field", "guides", "species",
    "counts", "low", "tide", "rock", "zones", "photograph", "record", "notes", "summarise",
    "findings", "check", "dates", "cross-reference", "papers", "outline", "draft", "verify",
    "quotes", "list", "open", "questions", "estimate", "costs", "group", "results", "by", "theme",
    "write", "the", "section",
]  # fmt: skip


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def markdown_answer(rng: random.Random, n: int) -> str:
    parts = [f"## Findings {n}\n"]
    for i in range(1, 6):
        parts.append(
            f"**{i}. {sentence(rng, 4)}** {sentence(rng, 30)}\n\n- {sentence(rng, 10)}\n- {sentence(rng, 12)}\n"
        )
    return "\n".join(parts)


@dataclass
class Data:
    owner: Any
    crew_id: int
    plan_id: int
    run_id: int
    step_uid: int  # the step the edit and move rows change (task 10, step 10)
    build_seconds: float


def build(rng: random.Random) -> Data:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction

    from agents.models import Agent
    from crews import plans, runs
    from crews.models import Crew, Plan, Run, Task

    started = time.perf_counter()
    call_command("migrate", verbosity=0, interactive=False)
    call_command("seed", stdout=io.StringIO())
    owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
    researcher = Agent.objects.get(owner=owner, name="Senior Data Researcher")
    analyst = Agent.objects.get(owner=owner, name="Reporting Analyst")

    crew = Crew.objects.create(
        owner=owner,
        name="Bench crew",
        description="Twenty tasks, planned first.",
        planning=True,
        default_inputs={"topic": "tide pools"},
    )
    crew.agents.set([researcher, analyst])
    tasks: list[Task] = []
    for n in range(TASKS):
        task = Task.objects.create(
            crew=crew,
            order=n,
            name=f"Task {n + 1}: {sentence(rng, 3)[:-1]}",
            agent=researcher if n % 2 == 0 else analyst,
            description=f"About {{topic}}: {sentence(rng, 40)}",
            expected_output=sentence(rng, 15),
        )
        if tasks:
            task.context.set([tasks[-1]])
        tasks.append(task)

    # The plan: drafted (version 1), then edited a few times so it has a history.
    plan = plans.plan_draft(actor=owner, crew=crew, inputs={}, enqueue=False)
    drafted = {str(t.pk): [sentence(rng, rng.randint(10, 22)) for _ in range(STEPS)] for t in tasks}
    plans.plan_store_draft(
        plan_id=plan.pk,
        steps=drafted,
        usage={"prompt_tokens": 4200, "completion_tokens": 9000, "cost_usd": 0.021},
        task_ids=[t.pk for t in tasks],
    )
    for k in range(4):
        plan = Plan.objects.get(pk=plan.pk)
        task = tasks[k * 5]
        rows = [
            {"id": s.uid, "text": s.text, "pinned": s.pinned}
            for s in plans.current_steps(plan)[task.pk]
        ]
        rows[k]["text"] = sentence(rng, 14)
        rows[k + 1]["pinned"] = True
        plans.plan_update(
            actor=owner,
            plan=plan,
            expected_version=plan.version,
            tasks=[{"task_id": task.pk, "steps": rows}],
            note="edited a step",
        )
    approved = plans.plan_approve(actor=owner, plan=Plan.objects.get(pk=plan.pk))

    run = runs.run_kickoff(
        actor=owner, crew=crew, inputs={}, plan=approved, enqueue=False
    )  # run.queued
    with transaction.atomic():
        record_events(rng, run.pk, tasks, approved)
    run = Run.objects.get(pk=run.pk)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.SUCCEEDED, started_at=run.created_at, finished_at=run.created_at
    )
    assert run.last_seq == EVENTS, run.last_seq

    step_uid = plans.current_steps(Plan.objects.get(pk=plan.pk))[tasks[TASKS // 2].pk][
        STEPS // 2
    ].uid
    return Data(owner, crew.pk, plan.pk, run.pk, step_uid, time.perf_counter() - started)


def record_events(rng: random.Random, run_id: int, tasks: list[Any], plan: Any) -> None:
    """A finished crew run's events, as the engine emits them, EVENTS in all with run.queued."""
    from crews.bridge import record_event

    count = 1  # run.queued, recorded by run_kickoff

    def emit(type_: str, data: dict[str, Any], **kw: Any) -> None:
        nonlocal count
        record_event(run_id, type_, data, **kw)
        count += 1

    def llm(task_id: int, purpose: str, step_id: str | None = None) -> None:
        emit(
            "llm.started",
            {"model": "openai/gpt-4o-mini", "purpose": purpose},
            task_id=task_id,
            step_id=step_id,
        )
        emit(
            "llm.completed",
            {
                "model": "openai/gpt-4o-mini",
                "purpose": purpose,
                "prompt_tokens": rng.randint(400, 3000),
                "completion_tokens": rng.randint(50, 800),
                "cost_usd": round(rng.uniform(0.0002, 0.004), 6),
                "latency_ms": rng.randint(300, 4000),
            },
            task_id=task_id,
            step_id=step_id,
        )

    emit("run.started", {})
    emit("crew_plan.approved", {"plan_id": plan.pk, "version": plan.approved_version})
    # Per task: started, its plan (4), steps of 11 events, the aggregate call (2), completed:
    # 8 steps make 96 events a task; the last task takes what is left to reach EVENTS exactly.
    per_step = 11
    for index, task in enumerate(tasks):
        t = task.pk
        last = index == len(tasks) - 1
        emit("task.started", {"agent": task.agent.name}, task_id=t)
        emit("agent_plan.started", {"attempt": 1}, task_id=t)
        llm(t, "agent_plan")
        # The last task: agent_plan.completed, its steps, then the four events below.
        steps = 8 if not last else max(1, (EVENTS - count - 5) // per_step)
        step_ids = [f"{t}.s{n}" for n in range(1, steps + 1)]
        emit(
            "agent_plan.completed",
            {
                "attempt": 1,
                "ready": True,
                "plan": "",
                "steps": [
                    {
                        "step_id": sid,
                        "number": n,
                        "description": sentence(rng, 12),
                        "tool": "web_search" if n % 2 else None,
                        "depends_on": [n - 1] if n > 1 else [],
                    }
                    for n, sid in enumerate(step_ids, start=1)
                ],
            },
            task_id=t,
        )
        for n, sid in enumerate(step_ids, start=1):
            emit(
                "step.started",
                {"step_id": sid, "number": n, "description": sentence(rng, 12)},
                task_id=t,
                step_id=sid,
            )
            llm(t, "step", sid)
            emit(
                "tool.started",
                {"name": "web_search", "args": {"query": sentence(rng, 5)}},
                task_id=t,
                step_id=sid,
            )
            emit(
                "tool.completed",
                {"name": "web_search", "output": sentence(rng, 60), "from_cache": False},
                task_id=t,
                step_id=sid,
            )
            llm(t, "step", sid)
            emit(
                "step.completed",
                {
                    "step_id": sid,
                    "number": n,
                    "outcome": "completed",
                    "result": markdown_answer(rng, n)[:600],
                    "error": None,
                },
                task_id=t,
                step_id=sid,
            )
            llm(t, "observe", sid)
            emit(
                "step.observed",
                {
                    "step_id": sid,
                    "number": n,
                    "success": True,
                    "learned": sentence(rng, 15),
                    "plan_valid": True,
                    "needs_replan": False,
                    "replan_reason": None,
                    "goal_achieved": False,
                    "refinements": [],
                    "reviewed": True,
                    "review_failed": False,
                },
                task_id=t,
                step_id=sid,
            )
        if last:  # cached tool calls (and a warning) up to EVENTS less the four events below
            while count < EVENTS - 5:
                emit(
                    "tool.started",
                    {"name": "calculator", "args": {"expression": "2*21"}},
                    task_id=t,
                )
                emit(
                    "tool.completed",
                    {"name": "calculator", "output": "42", "from_cache": True},
                    task_id=t,
                )
            while count < EVENTS - 4:
                emit("agent_plan.warning", {"message": sentence(rng, 8)}, task_id=t)
        llm(t, "aggregate")
        emit("task.completed", {"output": markdown_answer(rng, index)}, task_id=t)
    emit("run.succeeded", {"output": markdown_answer(rng, 0)})


# Measuring ---------------------------------------------------------------------------------------


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


def rows_for(data: Data, reps: int, profiles: dict[str, pstats.Stats] | None) -> list[Row]:
    from django.test import Client
    from django.urls import reverse
    from django.utils import translation

    from crews.bridge import payload_of
    from crews.models import Plan, Run, RunEvent
    from crews.run_view import RunView, _markdown_html, render_event_html

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

    def run_page_first_view() -> None:
        # The first view of the run after a restart: no markdown memoised yet. The warm row
        # above shows the page viewed again (and every live re-render of a task).
        _markdown_html.cache_clear()
        check(client.get(run_url))

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
            f"run page, first view ({EVENTS:,} events, markdown memo cleared)",
            run_page_first_view,
            PAGE_TARGET_MS,
            note="as after a restart",
        ),
        Scenario(
            f"socket replay from after=0 ({EVENTS:,} fragments)",
            socket_replay,
            None,
            every=3,
            note="in-process: the consumer's work",
        ),
    ]
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
    args = parser.parse_args()
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
        rows = rows_for(data, reps, profiles)
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
