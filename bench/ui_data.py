"""bench/ui.py's data: a throwaway Django set up as ``make run`` serves it, a crew of 20 tasks
with a plan of 20 steps per task and some history, and a finished run of that crew with 2,000 events.
"""

from __future__ import annotations

import io
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASKS = 20
STEPS = 20
EVENTS = 2_000


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
