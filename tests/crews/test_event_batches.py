"""The run's events go to the database in batches (#20): one transaction for the events the
engine emits back to back, still numbered in the order they were emitted, services' events
after them, everything stored before the next paid call; a run ended elsewhere stops."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agents.engine.events import Event
from agents.engine.llm import LLMResponse
from crews import bridge, realtime, runner, runs
from crews import sink as sink_module
from crews.models import Run, RunEvent
from crews.realtime import EventPayload
from crews.sink import RunEventSink
from tests.crews.run_helpers import make_crew, planned_run, scripted


def _event_inserts_per_transaction(queries: CaptureQueriesContext) -> list[int]:
    """How many event rows each transaction of the capture inserted (transactions with none left out)."""
    return [rows for rows, _statements, _seqs in _event_writes_per_transaction(queries)]


def _event_writes_per_transaction(queries: CaptureQueriesContext) -> list[tuple[int, int, int]]:
    """For each transaction of the capture that inserted events: the event rows, the INSERT
    statements that sent them (an ``executemany`` is one, logged as "N times: INSERT …") and the
    UPDATEs of the run's ``last_seq`` (its seq counter)."""
    found, rows, statements, seqs = [], 0, 0, 0
    for query in queries.captured_queries:
        sql = query["sql"]
        many, _, rest = sql.partition(" times: ")
        if sql.startswith("BEGIN"):
            rows = statements = seqs = 0
        elif sql.startswith('INSERT INTO "crews_runevent"') or (many.isdigit() and rest.startswith('INSERT INTO "crews_runevent"')):
            rows += int(many) if many.isdigit() else 1
            statements += 1
        elif sql.startswith('UPDATE "crews_run" SET "last_seq"'):
            seqs += 1
        elif sql.startswith("COMMIT") and rows:
            found.append((rows, statements, seqs))
    return found


@pytest.mark.django_db(transaction=True)
def test_a_planned_run_stores_back_to_back_events_together_in_the_order_they_happened(
    builder: Any, monkeypatch: Any
) -> None:
    seen_before_call: list[list[str]] = []

    def look(request: Any) -> None:
        # What the database holds when each LLM call goes out: everything emitted before it.
        done = threading.Thread(target=lambda: seen_before_call.append(
            list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))))
        done.start()
        done.join()

    run = planned_run(builder, monkeypatch, before_reply=look)

    with CaptureQueriesContext(connection) as queries:
        runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    types = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", flat=True))
    seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # gapless
    # Emit order, the services' own events (run.running, run.succeeded) after the engine's before them.
    assert types.index("crew_plan.approved") < types.index("run.running")
    first_done, second_started = types.index("task.completed"), len(types) - 1 - types[::-1].index("task.started")
    assert first_done < second_started
    assert types[-1] == "run.succeeded" and types.count("task.completed") == 2
    # Stored before each paid call: the call's own llm.started is the newest row it finds.
    assert [seen[-1] for seen in seen_before_call] == ["llm.started"] * 3
    assert "task.completed" in seen_before_call[2]  # the first task's end, before the second's call
    # Batches: fewer transactions than events, and at least one holding several engine events.
    batches = _event_inserts_per_transaction(queries)
    assert sum(batches) == len(types) - 1  # every event but run.queued (kickoff) inside the capture
    assert len(batches) < sum(batches) / 2, batches
    assert max(batches) >= 4, batches
    # A batch's rows go in one INSERT and take their seqs in one UPDATE, however many there are.
    engine_batches = [(statements, seqs) for rows, statements, seqs in _event_writes_per_transaction(queries) if rows > 1]
    assert engine_batches and set(engine_batches) == {(1, 1)}, engine_batches


@pytest.mark.django_db(transaction=True)
def test_a_run_taken_from_its_worker_mid_run_stops_without_another_call(builder: Any, monkeypatch: Any) -> None:
    """The sweep took this worker for dead and another claimed the run: the events this execution
    emits next are refused, and it stops before its next paid call, leaving the run alone."""
    crew = make_crew(builder, tasks=("Research", "Report", "Review"))
    calls: list[str] = []

    def reply(request: Any) -> LLMResponse:
        calls.append("call")
        if len(calls) == 1:
            taken = threading.Thread(target=lambda: Run.objects.filter(pk=run.pk).update(worker_id="other#2"))
            taken.start()
            taken.join()
        return LLMResponse(content="Final Answer: done")

    scripted(monkeypatch, default=reply)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    runner.execute(run.pk)

    run.refresh_from_db()
    assert calls == ["call"]  # no second task's call
    assert run.status == Run.Status.RUNNING and run.worker_id == "other#2"  # the other worker's
    assert not RunEvent.objects.filter(run=run, type="task.completed").exists()


class _Listener:
    """A channel in a run's group, as a socket following the run has: what the run broadcast."""

    def __init__(self, run_id: int) -> None:
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(realtime.run_group(run_id), self.channel)

    def heard(self) -> list[EventPayload]:
        """Every event broadcast so far, in the order the group got them."""

        async def drain() -> list[EventPayload]:
            events = []
            while True:
                try:
                    events.append((await asyncio.wait_for(self.layer.receive(self.channel), 0.2))["event"])
                except TimeoutError:
                    return events

        return async_to_sync(drain)()


@pytest.mark.django_db(transaction=True)
def test_every_event_of_a_run_reaches_its_group_once_in_seq_order(builder: Any, monkeypatch: Any) -> None:
    """The engine's batches and the services' own events (run.started, run.planning, run.running,
    run.succeeded: broadcast from the run's loop after their hop) go out in the order stored."""
    run = planned_run(builder, monkeypatch)
    listener = _Listener(run.pk)
    nested: list[Any] = []
    monkeypatch.setattr(bridge, "_broadcast_quietly", lambda *args: nested.append(args))

    runner.execute(run.pk)

    stored = list(RunEvent.objects.filter(run=run).exclude(type="run.queued").order_by("seq").values_list("seq", flat=True))
    assert [event["seq"] for event in listener.heard()] == stored
    assert nested == []  # none through a nested async_to_sync from the database thread
    assert {"run.started", "run.planning", "run.running", "run.succeeded"} <= set(
        RunEvent.objects.filter(run=run).values_list("type", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_run_stopped_before_its_claim_says_so_to_its_group(builder: Any, monkeypatch: Any) -> None:
    """The claim is made in the run's thread before its loop: a claim refused because a stop was
    asked still broadcasts its run.cancelled, and the run never starts."""
    run = planned_run(builder, monkeypatch)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    listener = _Listener(run.pk)

    runner.execute(run.pk)

    assert [event["type"] for event in listener.heard()] == ["run.cancelled"]
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED and runner._active == {}


async def _working_run(builder: Any) -> Run:
    crew = await sync_to_async(make_crew)(builder)
    run = await sync_to_async(runs.run_kickoff)(actor=builder, crew=crew, inputs={"topic": "t"}, enqueue=False)
    await sync_to_async(Run.objects.filter(pk=run.pk).update)(status=Run.Status.RUNNING)
    return run


@pytest.mark.django_db(transaction=True)
async def test_a_streamed_delta_is_sent_before_an_event_emitted_after_it(builder: Any, monkeypatch: Any) -> None:
    """Tasks at once: task B's event queued (the database thread busy), task A's last delta, then
    A's llm.completed: the page must not get A's text after A's call ended."""
    run = await _working_run(builder)
    sent: list[str] = []

    async def fake_broadcast(run_id: int, payload: Any) -> None:
        sent.append(payload["type"])

    monkeypatch.setattr(sink_module, "broadcast", fake_broadcast)
    gate = threading.Event()
    busy = asyncio.ensure_future(sync_to_async(gate.wait)())  # the run's database thread is busy a moment
    await asyncio.sleep(0.05)
    sink = RunEventSink(run.pk)
    await sink.emit(Event(type="step.completed", task_id="B"))   # task B's event: a batch queued
    await sink.emit(Event(type="llm.delta", data={"text": "x"}, task_id="A"))  # task A's last delta
    await sink.emit(Event(type="llm.completed", data={}, task_id="A"))  # task A's call ends
    gate.set()
    await busy
    await sink.drain()
    assert sent == ["step.completed", "llm.delta", "llm.completed"]


@pytest.mark.django_db(transaction=True)
def test_a_batch_adds_up_its_calls_usage_and_rolls_up_its_tasks_in_emit_order(builder: Any) -> None:
    """``record_batch``: one seq UPDATE for the batch, yet the same rows and totals as one
    ``record_event`` after another would leave."""
    from decimal import Decimal

    from crews.bridge import NewEvent, record_batch
    from crews.models import RunLLMCall, RunTask

    crew = make_crew(builder)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runs.run_claim(run_id=run.pk, worker_id="me#1")
    task = run.snapshot["tasks"][0]["id"]
    call = {"messages": [{"role": "user", "content": "hi"}], "tools": [], "response_format": "", "reply": "ok", "error": ""}
    usage = [{"model": "openai/m", "purpose": "react", "prompt_tokens": p, "completion_tokens": c, "cost_usd": cost}
             for p, c, cost in ((10, 5, 0.25), (20, 7, 0.5))]
    batch = [
        NewEvent("task.started", {}, task),
        NewEvent("llm.completed", usage[0], task, "s1", call),
        NewEvent("llm.completed", usage[1], task, "s2", {**call, "reply": "ok again"}),
        NewEvent("task.completed", {"output": "Done"}, task),
        NewEvent("step.started", {"n": 1}, None, "s3"),
    ]
    before = Run.objects.get(pk=run.pk).last_seq
    with transaction.atomic():
        rows = record_batch(run.pk, batch, working_only=True, owner="me#1")

    assert [r.seq for r in rows] == list(range(before + 1, before + 6))
    stored = list(RunEvent.objects.filter(run=run, seq__gt=before).order_by("seq").values_list("seq", "type", "step_id"))
    assert stored == [(before + 1, "task.started", ""), (before + 2, "llm.completed", "s1"),
                      (before + 3, "llm.completed", "s2"), (before + 4, "task.completed", ""), (before + 5, "step.started", "s3")]
    kept = list(RunLLMCall.objects.filter(run=run).order_by("seq").values_list("seq", "reply"))
    assert kept == [(before + 2, "ok"), (before + 3, "ok again")]
    totals = Run.objects.values_list("last_seq", "prompt_tokens", "completion_tokens", "cost_usd", "llm_calls").get(pk=run.pk)
    assert totals == (before + 5, 30, 12, Decimal("0.75"), 2)
    row = RunTask.objects.get(run=run, task_id_snapshot=task)
    assert (row.status, row.output, row.prompt_tokens, row.completion_tokens, row.llm_calls) == (RunTask.Status.DONE, "Done", 30, 12, 2)
    # Once the run is no longer this claim's, a batch stores nothing, not even its first events.
    with pytest.raises(bridge.RunNotWorking), transaction.atomic():
        record_batch(run.pk, batch[:2], working_only=True, owner="other#2")
    assert Run.objects.get(pk=run.pk).last_seq == before + 5 and RunLLMCall.objects.filter(run=run).count() == 2
