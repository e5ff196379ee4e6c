"""Run services end to end: kickoff, snapshots, execution, plans used verbatim, people, limits."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError

from agents.engine.llm import LLMResponse, tool_call_response
from agents.engine.runtime import CancelToken
from agents.models import LLM
from crews import plans, runner, runs, selectors
from crews.engine.planner import SUBMIT_TOOL
from crews.models import (
    FeedbackRequest,
    Plan,
    PlanVersion,
    Run,
    RunEvent,
    RunTask,
    Task,
    ToolApproval,
)
from planner_site.errors import Conflict, Forbidden, NotFound
from tests.crews.run_helpers import (
    Background,
    event_types,
    fake_llm,
    make_agent,
    make_crew,
    plan_in_prompt,
    scripted,
    stop_leftover_runs,  # noqa: F401 - a fixture
    wait_for,
    wait_for_status,
)
from tests.fakes.openai_server import FakeLLMServer, Reply

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")

def demo_events(steps_per_task: list[int]) -> list[str]:
    """A planning crew's events on the demo model: each approved step is a step of its own."""
    step = ["step.started", "llm.started", "llm.completed", "step.completed", "step.observed"]
    tasks = [["task.started", "agent_plan.bound", *step * n, "task.completed"] for n in steps_per_task]
    return [
        "run.queued", "run.started", "run.planning", "crew_plan.started", "llm.started", "llm.completed",
        "crew_plan.completed", "crew_plan.approved", "run.running",
        *(e for t in tasks for e in t),
        "run.succeeded",
    ]  # fmt: skip


def task_requests(gateway: Any, task: Task) -> list[Any]:
    """The requests whose prompt is ``task``'s (its description names it)."""
    marker = f"Do the {task.name} work"
    return [r for r in gateway.requests if any(marker in str(m.get("content")) for m in r.messages
                                               if m.get("role") == "user")]


# Kickoff ---------------------------------------------------------------------------------------


def test_kickoff_names_the_missing_input(builder):
    crew = make_crew(builder)

    with pytest.raises(ValidationError) as caught:
        runs.run_kickoff(actor=builder, crew=crew, inputs={})

    assert list(caught.value.message_dict) == ["inputs.topic"]
    assert not Run.objects.exists()


def test_kickoff_takes_only_an_approved_plan_of_the_same_crew(builder):
    crew = make_crew(builder)
    other = make_crew(builder, name="Other")
    draft = Plan.objects.create(crew=crew, status=Plan.Status.DRAFT, version=1)
    foreign = Plan.objects.create(crew=other, status=Plan.Status.APPROVED, version=1, approved_version=1)

    for plan in (draft, foreign):
        with pytest.raises(ValidationError) as caught:
            runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "x"}, plan=plan)
        assert list(caught.value.message_dict) == ["plan_id"]
    assert not Run.objects.exists()


def test_a_run_keeps_the_crew_as_it_was_at_kickoff(builder, monkeypatch):
    crew = make_crew(builder, tasks=["Research"])
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
    task = crew.tasks.get()
    task.description = "Something else entirely about {topic}"
    task.save()
    agent = crew.agents.get()
    agent.role = "Pirate"
    agent.save()
    gateway = scripted(monkeypatch, default="Final Answer: done")

    runner.execute(run.pk)

    prompt = "\n".join(str(m["content"]) for m in gateway.requests[0].messages)
    assert "Do the Research work about tides" in prompt
    assert "Writer on tides" in prompt
    assert "Something else" not in prompt and "Pirate" not in prompt
    assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED


def test_a_run_reads_its_llms_once_at_start_and_the_next_run_sees_an_admins_change(builder, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    own = LLM(name="Own", model="openai/own", supports_tools=True)
    own.set_api_key("sk-first-key-0001")
    own.save()
    crew = make_crew(builder, tasks=["Research"], llm=own)
    gateway = scripted(monkeypatch, default="Final Answer: done")

    def keys_used(run: Run) -> list[tuple[str, str | None]]:
        gateway.requests.clear()
        with CaptureQueriesContext(connection) as queries:
            runner.execute(run.pk)
        assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED
        llm_reads = [q for q in queries if q["sql"].startswith("SELECT") and f'FROM "{LLM._meta.db_table}"' in q["sql"]]
        assert len(llm_reads) == 1  # the default and the agent's LLM together
        return [(r.llm.model, r.llm.api_key.get_secret_value() if r.llm.api_key else None) for r in gateway.requests]

    first = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
    second = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
    assert keys_used(first) == [("openai/own", "sk-first-key-0001")]

    own.model = "openai/renamed"  # what an admin's edit saves
    own.set_api_key("sk-second-key-0002")
    own.save()

    assert keys_used(second) == [("openai/renamed", "sk-second-key-0002")]


def test_the_demo_model_runs_a_planning_crew_with_a_gapless_event_log(demo_crew, builder):
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"})

    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    counts = [len(v) for v in plans.steps_by_task_key(run.plan, run.plan_version).values()]
    assert len(counts) == 2 and all(3 <= n <= 5 for n in counts)
    assert event_types(run) == demo_events(counts)
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and run.last_seq == len(seqs)
    results = list(run.task_results.order_by("order"))
    assert [r.status for r in results] == [RunTask.Status.DONE, RunTask.Status.DONE]
    assert run.output == results[-1].output and "tides" in results[0].output
    assert run.plan is not None and run.plan.status == Plan.Status.APPROVED
    assert run.plan_version == 1


def test_usage_rolls_up_per_run_and_per_task_from_the_llm_events(builder, monkeypatch):
    crew = make_crew(builder, planning=True)
    answers = iter([
        LLMResponse(content='{"plans": [{"task_number": 1, "steps": ["a"]}, {"task_number": 2, "steps": ["b"]}]}',
                    prompt_tokens=100, completion_tokens=20, cost_usd=0.001),
        LLMResponse(content="Final Answer: research", prompt_tokens=50, completion_tokens=7, cost_usd=0.0005),
        LLMResponse(content="Final Answer: report", prompt_tokens=70, completion_tokens=9, cost_usd=0.00025),
    ])
    scripted(monkeypatch, default=lambda request: next(answers))
    LLM.objects.filter(is_default=True).update(supports_tools=False)  # the plan comes as JSON text
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})

    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    completed = [e for e in RunEvent.objects.filter(run=run, type="llm.completed")]
    assert (run.prompt_tokens, run.completion_tokens, run.llm_calls) == (220, 36, 3)
    assert run.prompt_tokens == sum(e.data["prompt_tokens"] for e in completed)
    assert run.cost_usd == Decimal("0.00175") == sum(Decimal(str(e.data["cost_usd"])) for e in completed)
    for result in run.task_results.all():
        mine = [e for e in completed if e.task_id == result.task_id_snapshot]
        assert len(mine) == result.llm_calls == 1  # one approved step, which answers
        assert result.prompt_tokens == mine[0].data["prompt_tokens"]
        assert result.completion_tokens == mine[0].data["completion_tokens"]
        assert result.cost_usd == Decimal(str(mine[0].data["cost_usd"]))


def test_executing_a_run_twice_does_nothing_the_second_time(builder, monkeypatch):
    crew = make_crew(builder, tasks=["Research"])
    gateway = scripted(monkeypatch, default="Final Answer: done")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
    runner.execute(run.pk)
    events = event_types(run)

    runner.execute(run.pk)  # what a worker does with the task enqueued at kickoff

    assert event_types(run) == events
    assert gateway.calls == 1


@pytest.mark.django_db(transaction=True)
def test_events_recorded_at_once_by_two_processes_keep_one_gapless_log(builder):
    from crews.bridge import record_event

    run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "tides"}, enqueue=False)

    def record(kind: str) -> None:  # the web side (a stop) and the worker, each on its connection
        for _ in range(40):
            record_event(run.pk, "llm.completed", {"prompt_tokens": 2, "completion_tokens": 1, "cost_usd": 0.5},
                         task_id=None, step_id=kind)

    workers = [Background(lambda kind=kind: record(kind)) for kind in ("web", "worker")]
    for worker in workers:
        worker.join(timeout=60)

    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 82))  # run.queued, then the 80 recorded here
    run.refresh_from_db()
    assert run.last_seq == 81
    assert (run.prompt_tokens, run.completion_tokens, run.llm_calls, run.cost_usd) == (160, 80, 80, Decimal("40"))


def test_without_returning_the_seq_is_read_back_under_the_same_lock(builder, monkeypatch):
    from django.db import connection

    from crews.bridge import record_event

    if connection.vendor != "sqlite":
        pytest.skip("only SQLite before 3.35 lacks RETURNING")
    run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "tides"}, enqueue=False)
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", False)
    events = [record_event(run.pk, "llm.completed", {"prompt_tokens": 3, "completion_tokens": 2}) for _ in range(2)]

    assert [e.seq for e in events] == [2, 3] and all(e.pk for e in events)
    run.refresh_from_db()
    assert (run.last_seq, run.prompt_tokens, run.completion_tokens, run.llm_calls) == (3, 6, 4, 2)


def test_a_crew_that_plans_can_run_without_a_plan(demo_crew, builder):
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"}, planning=False)

    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.snapshot["crew"]["planning"] is False
    assert not [t for t in event_types(run) if t.startswith("crew_plan.") or t == "run.planning"]
    assert run.plan is None


@pytest.mark.django_db(transaction=True)
def test_kickoff_queues_the_run_and_a_worker_executes_it(builder, monkeypatch):
    crew = make_crew(builder, tasks=["Research"])
    scripted(monkeypatch, default="Final Answer: done")

    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})  # immediate backend

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert event_types(run)[:2] == ["run.queued", "run.started"]


# Plans -------------------------------------------------------------------------------------------


def drafted_plan(builder: Any, crew: Any) -> Plan:
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"})
    runner.generate_plan(plan.pk)  # the background task, in the foreground (demo model)
    plan.refresh_from_db()
    assert plan.status == Plan.Status.DRAFT
    return plan


def body_of(plan: Plan) -> dict[int, list[dict[str, Any]]]:
    return {
        task_id: [{"id": s.uid, "text": s.text, "pinned": s.pinned} for s in steps]
        for task_id, steps in plans.current_steps(plan).items()
    }


DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}


def test_a_run_and_its_task_commit_together(builder, settings):
    from django.db import transaction
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = DATABASE_TASKS
    crew = make_crew(builder)

    with transaction.atomic():
        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
        # Written with the run, not after the commit: a process dying in between loses both.
        assert DBTaskResult.objects.get().args_kwargs == {"args": [run.pk], "kwargs": {}}

    class Died(Exception):
        pass

    with pytest.raises(Died), transaction.atomic():
        runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})
        raise Died
    assert Run.objects.count() == DBTaskResult.objects.count() == 1


def test_an_edited_and_approved_plan_is_used_verbatim_without_the_planner(builder, monkeypatch):
    crew = make_crew(builder, planning=True)
    research, report = crew.tasks.order_by("order")
    plan = drafted_plan(builder, crew)
    steps = body_of(plan)
    first, second, third = steps[research.pk]  # the demo model drafts three for this task
    edited_research = [
        {**third},  # moved to the front
        {**first, "text": "Read the brief about tides twice"},  # changed
        {"text": "Ask what a spring tide is"},  # new
    ]  # the second step is gone
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version,
                             tasks=[{"task_id": research.pk, "steps": edited_research}])
    plan = plans.plan_approve(actor=builder, plan=plan)
    gateway = scripted(monkeypatch, default="Final Answer: done")

    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan)
    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert "crew_plan" not in gateway.purposes()
    assert run.plan_version == plan.version == 2
    assert plan_in_prompt(task_requests(gateway, research)[0]) == [
        third["text"], "Read the brief about tides twice", "Ask what a spring tide is",
    ]
    assert second["text"] not in str(task_requests(gateway, research)[0].messages)
    assert plan_in_prompt(task_requests(gateway, report)[0]) == [s["text"] for s in steps[report.pk]]
    assert "crew_plan.started" not in event_types(run)


def test_over_litellm_a_drafted_then_edited_plan_reaches_the_model_as_edited(builder):
    """The same flow as above through real litellm and HTTP: the fake server drafts the plan,
    and the task requests it receives afterwards carry the edited steps."""
    drafted = {1: ["Find the tide tables", "Read about spring tides", "Note the moon's phases"],
               2: ["Outline the report", "Write it"]}

    def planner(request: Any) -> bool:  # the crew planner's call: its plan comes as a tool call
        return (request.body.get("tool_choice") or {}).get("function", {}).get("name") == SUBMIT_TOOL

    def reply(request: Any) -> Reply:
        if planner(request):
            return Reply.tool_call(SUBMIT_TOOL, {"plans": [{"task_number": n, "steps": s} for n, s in drafted.items()]})
        return Reply.text("Thought: I now know the final answer\nFinal Answer: done")

    with FakeLLMServer() as server:
        server.default = reply
        llm = fake_llm(server)
        crew = make_crew(builder, planning=True, llm=llm, planning_llm=llm)
        research, report = crew.tasks.order_by("order")
        plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
        runner.generate_plan(plan.pk)
        plan.refresh_from_db()
        assert plan.status == Plan.Status.DRAFT, plan.error
        drafting = server.request_count
        first, second, third = body_of(plan)[research.pk]
        assert [first["text"], second["text"], third["text"]] == drafted[1]
        plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version, tasks=[
            {"task_id": research.pk, "steps": [
                {**third},  # moved to the front
                {**first, "text": "Read the brief about tides twice"},  # changed
                {"text": "Ask what a spring tide is"},  # new
            ]},  # the second step is gone
        ])
        plan = plans.plan_approve(actor=builder, plan=plan)

        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan)
        runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert drafting == 1
    during_run = server.requests[drafting:]
    assert not any(planner(r) for r in during_run)  # the planner is not called again
    research_requests = [r for r in during_run if "Do the Research work" in r.last_user_text()]
    report_requests = [r for r in during_run if "Do the Report work" in r.last_user_text()]
    assert plan_in_prompt(research_requests[0]) == [
        "Note the moon's phases", "Read the brief about tides twice", "Ask what a spring tide is",
    ]
    assert "Read about spring tides" not in str(research_requests[0].messages)
    assert plan_in_prompt(report_requests[0]) == drafted[2]


def test_a_resumed_run_does_not_announce_its_plan_twice(builder, monkeypatch):
    from planner_site.worker import run_stop_hooks

    crew = make_crew(builder, planning=True)
    plan = plans.plan_approve(actor=builder, plan=drafted_plan(builder, crew))

    def stop_the_worker(_request: Any) -> str:
        run_stop_hooks()  # the process is shutting down while the first task's call is out
        return "Final Answer: cut short"

    scripted(monkeypatch, [stop_the_worker], default="Final Answer: done")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, plan=plan, enqueue=False)
    runner.execute(run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.INTERRUPTED

    process_not_stopping(monkeypatch)  # the next process: nobody asked it to stop
    runs.run_resume(actor=builder, run=run)
    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    types = event_types(run)
    assert types.count("crew_plan.approved") == 1
    assert types.index("crew_plan.approved") < types.index("run.interrupted")


def test_a_resumed_run_counts_what_it_spent_before_against_its_budget(builder, monkeypatch):
    from planner_site.worker import run_stop_hooks

    crew = make_crew(builder, tasks=["Research", "Report", "Summary"], budget_max_tokens=1000)
    spent = LLMResponse(content="Final Answer: done", prompt_tokens=500, completion_tokens=100)

    def stop_the_worker(_request: Any) -> LLMResponse:
        run_stop_hooks()  # the process is shutting down while the Report call is out
        return LLMResponse(content="Final Answer: cut short", prompt_tokens=500, completion_tokens=100)

    scripted(monkeypatch, [spent, stop_the_worker], default=spent)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert run.prompt_tokens + run.completion_tokens >= 600  # Research's call at least

    process_not_stopping(monkeypatch)
    runs.run_resume(actor=builder, run=run)
    runner.execute(run.pk)

    # 600 spent before, 600 more for Report: Summary's call would pass 1,000 tokens. Counted
    # from zero again, the resumed run would make it and succeed.
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert event_types(run)[-2:] == ["budget.exceeded", "run.failed"]
    assert not any(t.output == "done" for t in run.task_results.filter(name="Summary"))


def process_not_stopping(monkeypatch: pytest.MonkeyPatch) -> None:
    from planner_site import worker

    monkeypatch.setattr(worker, "_stopping", threading.Event())


def test_a_run_claimed_while_its_process_is_stopping_is_interrupted_before_any_llm_call(builder, monkeypatch):
    from planner_site.worker import run_stop_hooks

    crew = make_crew(builder)
    gateway = scripted(monkeypatch, [], default="Final Answer: done")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    # The process was asked to stop after its worker claimed the task, before the run's own
    # stop hook existed: no hook tells this run, so it must look for itself.
    run_stop_hooks()
    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED
    assert gateway.requests == []  # no LLM request
    assert event_types(run)[-1] == "run.interrupted"


def test_a_stale_version_is_a_conflict_and_saves_nothing(builder):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = drafted_plan(builder, crew)
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=1,
                             tasks=[{"task_id": research.pk, "steps": [{"text": "First edit"}]}])

    with pytest.raises(Conflict) as caught:
        plans.plan_update(actor=builder, plan=plan, expected_version=1,
                          tasks=[{"task_id": research.pk, "steps": [{"text": "Lost edit"}]}])

    assert caught.value.code == "stale_version"
    plan.refresh_from_db()
    assert plan.version == 2 and PlanVersion.objects.filter(plan=plan).count() == 2
    assert [s.text for s in plans.current_steps(plan)[research.pk]] == ["First edit"]


def test_regenerating_a_task_keeps_its_pinned_steps_in_place(builder, monkeypatch):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = drafted_plan(builder, crew)
    old = body_of(plan)[research.pk]
    pinned = {**old[1], "pinned": True}
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version,
                             tasks=[{"task_id": research.pk, "steps": [old[0], pinned, old[2]]}])
    LLM.objects.filter(is_default=True).update(supports_tools=False)
    gateway = scripted(monkeypatch, [
        '{"plans": [{"task_number": 1, "steps": ["Fresh one", "Fresh two", "Fresh three"]}]}',
    ])

    runner.regenerate_plan(plan.pk, research.pk, "shorter please", builder.pk)

    plan.refresh_from_db()
    now = plans.current_steps(plan)[research.pk]
    assert [(s.text, s.pinned) for s in now] == [
        ("Fresh one", False), (pinned["text"], True), ("Fresh two", False), ("Fresh three", False),
    ]
    assert now[1].uid == pinned["id"]
    prompt = gateway.requests[0].messages[0]["content"]
    assert pinned["text"] in prompt and "shorter please" in prompt
    assert gateway.purposes() == ["crew_plan"]


def test_a_regeneration_that_fails_unexpectedly_frees_the_task_and_changes_nothing(builder, monkeypatch):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = plans.plan_regenerate(actor=builder, plan=drafted_plan(builder, crew), task=research, feedback="")
    before = [(s.text, s.pinned) for s in plans.current_steps(plan)[research.pk]]
    scripted(monkeypatch, [RuntimeError("a bug in the planner")])

    runner.regenerate_plan(plan.pk, research.pk, "", builder.pk)

    plan.refresh_from_db()
    assert plan.regenerating_task_ids == []  # free to try again
    assert "internal error" in plan.error
    assert [(s.text, s.pinned) for s in plans.current_steps(plan)[research.pk]] == before


def test_a_regenerated_task_keeps_at_most_the_steps_an_edit_may_save(builder, monkeypatch):
    crew = make_crew(builder)
    research = crew.tasks.order_by("order").first()
    plan = drafted_plan(builder, crew)
    steps = [{"text": f"Kept {n}", "pinned": True} for n in range(5)]
    plan = plans.plan_update(actor=builder, plan=plan, expected_version=plan.version,
                             tasks=[{"task_id": research.pk, "steps": steps}])
    LLM.objects.filter(is_default=True).update(supports_tools=False)
    fresh = [f"Fresh {n}" for n in range(60)]
    scripted(monkeypatch, [json.dumps({"plans": [{"task_number": 1, "steps": fresh}]})])

    runner.regenerate_plan(plan.pk, research.pk, "", builder.pk)

    plan.refresh_from_db()
    now = plans.current_steps(plan)[research.pk]
    assert len(now) == plans.MAX_STEPS_PER_TASK
    assert [s.text for s in now if s.pinned] == [f"Kept {n}" for n in range(5)]
    # ... so the whole task, sent back as it is, can still be saved.
    again = [{"id": s.uid, "text": s.text, "pinned": s.pinned} for s in now]
    plans.plan_update(actor=builder, plan=plan, expected_version=plan.version,
                      tasks=[{"task_id": research.pk, "steps": again}])


def test_drafting_a_plan_twice_adds_no_version(builder):
    crew = make_crew(builder)
    plan = drafted_plan(builder, crew)
    plan = plans.plan_approve(actor=builder, plan=plan)

    runner.generate_plan(plan.pk)  # a second delivery of the background task

    plan.refresh_from_db()
    assert (plan.status, plan.version, plan.approved_version) == (Plan.Status.APPROVED, 1, 1)


# People ------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_review_plan_waits_for_approval_then_runs_the_approved_plan(builder, monkeypatch):
    crew = make_crew(builder, planning=True, review_plan=True)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))

    waiting = wait_for_status(run, Run.Status.AWAITING_APPROVAL)
    assert waiting.planning_plan is not None and waiting.planning_plan.status == Plan.Status.DRAFT
    assert "task.started" not in event_types(run)
    runs.run_approve_plan(actor=builder, run=waiting, edit={
        "tasks": [{"task_id": crew.tasks.order_by("order")[0].pk, "steps": [{"text": "Only this"}]}],
    })
    worker.join()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    types = event_types(run)
    assert types.index("run.awaiting_approval") < types.index("crew_plan.approved") < types.index("task.started")
    assert run.plan_version == 2


@pytest.mark.django_db(transaction=True)
def test_a_run_interrupted_while_its_plan_awaits_review_resumes_with_that_plan(builder, monkeypatch):
    from planner_site.worker import run_stop_hooks

    crew = make_crew(builder, planning=True, review_plan=True)
    research = crew.tasks.order_by("order")[0]
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))
    waiting = wait_for_status(run, Run.Status.AWAITING_APPROVAL)
    run_stop_hooks()  # the process stops while the plan waits for its review
    worker.join()
    assert Run.objects.get(pk=run.pk).status == Run.Status.INTERRUPTED
    drafted = waiting.planning_plan
    # Meanwhile the person edits the draft in the editor.
    plans.plan_update(actor=builder, plan=drafted, expected_version=1,
                      tasks=[{"task_id": research.pk, "steps": [{"text": "Edited while stopped"}]}])

    process_not_stopping(monkeypatch)
    # The tests' immediate task backend executes the resumed run inside run_resume.
    worker = Background(lambda: runs.run_resume(actor=builder, run=run))
    waiting = wait_for_status(run, Run.Status.AWAITING_APPROVAL)
    assert waiting.planning_plan_id == drafted.pk  # the same plan, not a second draft
    runs.run_approve_plan(actor=builder, run=waiting)
    worker.join()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.plan_id, run.plan_version) == (drafted.pk, 2)  # the edit made meanwhile
    assert Plan.objects.filter(crew=crew).count() == 1
    assert event_types(run).count("crew_plan.completed") == 1


@pytest.mark.django_db(transaction=True)
def test_human_input_waits_for_feedback_and_an_empty_answer_accepts(builder, monkeypatch):
    crew = make_crew(builder, tasks=["Research"], task_fields={"Research": {"human_input": True}})
    gateway = scripted(monkeypatch, default="Final Answer: the tides report")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))

    waiting = wait_for_status(run, Run.Status.AWAITING_INPUT)
    assert FeedbackRequest.objects.get(run=run).answer == "the tides report"
    runs.run_feedback(actor=builder, run=waiting, text="")
    worker.join()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.output == "the tides report"
    assert gateway.calls == 1  # accepted as it was: no second pass
    received = RunEvent.objects.get(run=run, type="feedback.received")
    assert received.data == {"text": ""}


@pytest.mark.django_db(transaction=True)
def test_a_denied_tool_call_reaches_the_agent_as_its_observation(builder, monkeypatch):
    agent = make_agent(builder, tools=["calculator"], tool_options={"calculator": {"needs_approval": True}})
    crew = make_crew(builder, tasks=["Research"], agent=agent)
    gateway = scripted(monkeypatch, [
        tool_call_response("calculator", {"expression": "6 * 7"}),
        "Final Answer: I did it by hand",
    ])
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    worker = Background(lambda: runner.execute(run.pk))

    approval = wait_for(lambda: ToolApproval.objects.filter(run=run, status="pending").first(), what="an approval")
    assert (approval.tool, approval.args) == ("calculator", {"expression": "6 * 7"})
    assert Run.objects.get(pk=run.pk).status == Run.Status.AWAITING_INPUT
    runs.run_decide_approval(actor=builder, run=run, approval_id=approval.approval_id, approve=False,
                             note="not with that number")
    worker.join()

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.output == "I did it by hand"
    observation = str(gateway.requests[1].messages[-1]["content"])
    assert "denied the use of 'calculator'" in observation and "not with that number" in observation
    assert "tool.started" not in event_types(run)
    assert RunEvent.objects.get(run=run, type="approval.resolved").data["approve"] is False


# Limits and stopping -----------------------------------------------------------------------------


def test_the_token_budget_stops_the_run_as_failed(demo_crew, builder):
    demo_crew.budget_max_tokens = 50
    demo_crew.save()
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"})

    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert "budget" in run.error
    types = event_types(run)
    assert types[-2:] == ["budget.exceeded", "run.failed"]
    assert types.count("llm.started") == 0  # the plan's prompt alone passes it: nothing was sent
    exceeded = RunEvent.objects.get(run=run, type="budget.exceeded").data
    assert exceeded["limit"] == "max_tokens" and exceeded["used"] > 50


def test_the_cost_budget_stops_the_run_before_a_call_that_could_cross_it(demo_crew, builder):
    # The demo model charges nothing, but priced like this its first answer (4096 tokens at most)
    # could cost $4.10 of the $0.01 the crew may spend: it is never asked.
    LLM.objects.filter(is_default=True).update(input_price_per_1k=Decimal("0.01"), output_price_per_1k=Decimal(1))
    demo_crew.budget_max_cost_usd = Decimal("0.01")
    demo_crew.save()
    run = runs.run_kickoff(actor=builder, crew=demo_crew, inputs={"topic": "tides"})

    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("budget exceeded: max_cost_usd used $0.0000 of $0.0100; the next call could cost up to $4.")
    types = event_types(run)
    assert types[-2:] == ["budget.exceeded", "run.failed"] and "llm.started" not in types
    exceeded = RunEvent.objects.get(run=run, type="budget.exceeded").data
    assert (exceeded["limit"], exceeded["used"], exceeded["allowed"]) == ("max_cost_usd", 0, 0.01)
    assert exceeded["next_call_usd"] > 4.096


@pytest.mark.django_db(transaction=True)
def test_stopping_a_run_aborts_the_llm_call_in_flight_and_sends_no_more(builder):
    with FakeLLMServer() as server:
        server.default = Reply.text("Final Answer: too late").after(30)
        crew = make_crew(builder, llm=fake_llm(server))
        run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
        worker = Background(lambda: runner.execute(run.pk))
        wait_for(lambda: server.request_count == 1, timeout=30, what="the first LLM request")

        stopped_at = time.monotonic()
        runs.run_cancel(actor=builder, run=run)
        worker.join(timeout=10)

        assert time.monotonic() - stopped_at < 5  # the server holds its answer for 30 s
        run.refresh_from_db()
        assert run.status == Run.Status.CANCELLED and run.finished_at is not None
        types = event_types(run)
        assert types[-2:] == ["run.cancelling", "run.cancelled"]
        assert types.count("llm.started") == 1 and "llm.completed" not in types
        assert server.request_count == 1
        assert server.requests[0].authorization == "Bearer sk-test-123456"
        # The API reads the task rows: the one cut short is failed, not "running" for ever.
        tasks = list(run.task_results.order_by("order").values_list("status", "error"))
        assert tasks == [("failed", runs.CUT_SHORT), ("waiting", "")]


def in_a_thread(fn: Any) -> Any:
    """Database work from a scripted answer, which runs on the event loop."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


@pytest.mark.django_db(transaction=True)
def test_a_stop_asked_while_the_process_is_stopping_ends_the_run_cancelled(builder, monkeypatch):
    from planner_site.worker import run_stop_hooks

    crew = make_crew(builder)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    def both_stop(_request: Any) -> str:
        run_stop_hooks()  # the process is shutting down ...
        in_a_thread(lambda: runs.run_cancel(actor=builder, run=run))  # ... and the person presses stop
        return "Final Answer: cut short"

    scripted(monkeypatch, [both_stop], default="Final Answer: done")
    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED  # not interrupted: that would make it resumable
    types = event_types(run)
    assert types[-1] == "run.cancelled", types
    assert "run.interrupted" not in types


@pytest.mark.django_db(transaction=True)
def test_a_run_ends_once_even_if_its_worker_finishes_after_the_sweep(builder, monkeypatch):
    crew = make_crew(builder, tasks=["Research"])
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    def stalled(_request: Any) -> str:
        # The worker stalled past the stale limit: the sweep took it for dead.
        assert in_a_thread(lambda: runs.run_mark_stale_interrupted(stale_after=0)) == [run.pk]
        return "Final Answer: done after all"

    scripted(monkeypatch, [stalled])
    runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.INTERRUPTED  # resumable; the answer is not lost work
    types = event_types(run)
    assert types[-1] == "run.interrupted" and "run.succeeded" not in types


ANSWER_PIECES = ["Final Answer: ", *(f"wave{i} " for i in range(30)), "the tide turns"]


def _deltas_of_a_run(builder: Any, server: FakeLLMServer, *, followed: bool) -> list[dict[str, Any]]:
    """Execute a one-task run against ``server``; the deltas its group got (a follower or not)."""
    import asyncio

    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from crews import realtime

    server.default = Reply.text("".join(ANSWER_PIECES), chunks=ANSWER_PIECES)
    crew = make_crew(builder, tasks=["Research"], llm=fake_llm(server))
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(realtime.deltas_group(run.pk), channel)
    if followed:
        async_to_sync(realtime.follow_deltas)(run.pk)
    try:
        runner.execute(run.pk)
    finally:
        if followed:
            async_to_sync(realtime.unfollow_deltas)(run.pk)

    async def drain() -> list[dict[str, Any]]:
        got = []
        while True:
            try:
                got.append((await asyncio.wait_for(layer.receive(channel), 0.2))["event"])
            except TimeoutError:
                return got

    assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED
    assert RunTask.objects.get(run=run).output == "".join(ANSWER_PIECES)[len("Final Answer: "):]  # whole either way
    return async_to_sync(drain)()


@pytest.mark.django_db(transaction=True)
def test_an_llm_call_nobody_follows_still_streams_but_sends_no_deltas(builder):
    with FakeLLMServer() as server:
        deltas = _deltas_of_a_run(builder, server, followed=False)

        assert [r.stream for r in server.requests] == [True]  # so that a stop can close it
        assert deltas == []


@pytest.mark.django_db(transaction=True)
def test_an_llm_call_someone_follows_streams_its_deltas(builder):
    with FakeLLMServer() as server:
        deltas = _deltas_of_a_run(builder, server, followed=True)

        assert [r.stream for r in server.requests] == [True]
        assert {d["type"] for d in deltas} == {"llm.delta"}
        # 32 chunks arrive in a burst: coalesced into a few events (64 characters or 50 ms each),
        # which add up to the answer (issue #20).
        assert 3 <= len(deltas) < len(ANSWER_PIECES) // 2
        assert "".join(d["data"]["text"] for d in deltas) == "".join(ANSWER_PIECES)


# Who may see what --------------------------------------------------------------------------------


def test_another_builder_can_neither_read_nor_stop_a_run(builder, other_builder, viewer, monkeypatch):
    crew = make_crew(builder)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"})

    for action in (lambda: selectors.run_get(user=other_builder, run_id=run.pk),
                   lambda: selectors.run_get(user=other_builder, run_id=run.pk, for_write=True),
                   lambda: selectors.run_get(user=viewer, run_id=run.pk)):
        with pytest.raises(NotFound):
            action()
    assert list(selectors.run_list(user=other_builder)) == []
    assert list(selectors.run_list(user=builder)) == [run]
    crew.shared = True
    crew.save()
    assert selectors.run_get(user=viewer, run_id=run.pk) == run  # a shared crew's runs are readable
    with pytest.raises(Forbidden):
        selectors.run_get(user=viewer, run_id=run.pk, for_write=True)
    with pytest.raises(NotFound):
        selectors.run_get(user=other_builder, run_id=run.pk, for_write=True)
    assert selectors.run_get(user=builder, run_id=run.pk, for_write=True) == run


def test_an_agents_own_runs_follow_the_agents_visibility(builder, other_builder, admin_user):
    agent = make_agent(builder, name="Solo")
    run = runs.run_kickoff_agent(actor=builder, agent=agent, message="Plan a day in Lisbon")

    assert list(selectors.run_list(user=builder)) == [run]
    assert list(selectors.run_list(user=admin_user)) == [run]
    assert list(selectors.run_list(user=other_builder)) == []
    assert selectors.run_get(user=admin_user, run_id=run.pk, for_write=True) == run


def test_plans_follow_their_crews_visibility(builder, other_builder, viewer):
    crew = make_crew(builder)
    plan = drafted_plan(builder, crew)
    research = crew.tasks.order_by("order").first()
    plans.plan_update(actor=builder, plan=plan, expected_version=1,
                      tasks=[{"task_id": research.pk, "steps": [{"text": "Only step"}]}])

    assert selectors.plan_get(user=builder, plan_id=plan.pk, for_write=True) == plan
    for user in (other_builder, viewer):
        with pytest.raises(NotFound):
            selectors.plan_get(user=user, plan_id=plan.pk)
    crew.shared = True
    crew.save()
    assert selectors.plan_get(user=viewer, plan_id=plan.pk) == plan
    with pytest.raises(Forbidden):
        selectors.plan_get(user=viewer, plan_id=plan.pk, for_write=True)
    with pytest.raises(NotFound):
        selectors.plan_get(user=other_builder, plan_id=plan.pk, for_write=True)
    versions = list(selectors.plan_versions(plan=plan))
    assert [v.number for v in versions] == [2, 1]
    assert [s.text for s in versions[0].steps.all() if s.task_id == research.pk] == ["Only step"]


@pytest.mark.django_db(transaction=True)
def test_the_watch_outlives_a_cache_that_fails_and_still_delivers_a_stop(builder, monkeypatch):
    """Who follows the deltas lives in the cache (Redis in scale-out): when it cannot be asked,
    the run streams to be safe and its watch keeps beating and still hears a stop request."""
    def unreachable(run_id: int) -> bool:
        raise ConnectionError("redis is down")

    monkeypatch.setattr(runner.realtime, "deltas_followed", unreachable)
    monkeypatch.setattr(runner, "WATCH_SECONDS", 0.02)
    run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "tides"}, enqueue=False)
    # Working, under this watch's claim; then a stop is asked from another process.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, worker_id="me#1", cancel_requested=True)
    token, followers = CancelToken(), runner.DeltaFollowers(run.pk)

    async def watch() -> None:
        await asyncio.wait_for(runner._watch(run.pk, "me#1", token, followers), timeout=10)

    async_to_sync(watch)()

    assert token.cancelled
    assert followers()  # fails open: the answer streams as it did before the gate


@pytest.mark.django_db(transaction=True)
def test_the_watch_tries_again_after_a_poll_that_fails(builder, monkeypatch):
    polls: list[bool] = []
    real_poll = runner._poll

    def flaky_poll(run_id: int, owner: str, followers: Any, *, beat: bool) -> bool:
        polls.append(beat)
        if len(polls) == 1:
            raise RuntimeError("database is locked")
        return real_poll(run_id, owner, followers, beat=beat)

    monkeypatch.setattr(runner, "_poll", flaky_poll)
    monkeypatch.setattr(runner, "WATCH_SECONDS", 0.02)
    run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "tides"}, enqueue=False)
    # Working, under this watch's claim; then a stop is asked from another process.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, worker_id="me#1", cancel_requested=True)
    token = CancelToken()

    async def watch() -> None:
        await asyncio.wait_for(runner._watch(run.pk, "me#1", token, runner.DeltaFollowers(run.pk)), timeout=10)

    async_to_sync(watch)()

    assert token.cancelled and len(polls) == 2
