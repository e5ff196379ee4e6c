"""The run's events go to the database in batches (#20): one transaction for the events the
engine emits back to back, still numbered in the order they were emitted, services' events
after them, everything stored before the next paid call; a run ended elsewhere stops."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.engine.events import Event
from agents.engine.llm import LLMResponse
from crews import bridge, runner, runs
from crews import sink as sink_module
from crews.models import Run, RunEvent
from crews.sink import RunEventSink
from tests.crews.run_helpers import make_crew, planned_run, scripted


def _event_inserts_per_transaction(queries: CaptureQueriesContext) -> list[int]:
    """How many event rows each transaction of the capture inserted (transactions with none left out)."""
    counts, current = [], 0
    for query in queries.captured_queries:
        sql = query["sql"]
        if sql.startswith("BEGIN"):
            current = 0
        elif sql.startswith('INSERT INTO "crews_runevent"'):
            current += 1
        elif sql.startswith("COMMIT") and current:
            counts.append(current)
    return counts


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


@pytest.mark.django_db(transaction=True)
def test_every_event_of_a_run_reaches_its_group_once_in_seq_order(builder: Any, monkeypatch: Any) -> None:
    """The engine's batches and the services' own events (run.started, run.planning, run.running,
    run.succeeded: broadcast from the run's loop after their hop) go out in the order stored."""
    import asyncio

    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from crews import realtime

    run = planned_run(builder, monkeypatch)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(realtime.run_group(run.pk), channel)
    nested: list[Any] = []
    monkeypatch.setattr(bridge, "_broadcast_quietly", lambda *args: nested.append(args))

    runner.execute(run.pk)

    async def received() -> list[int]:
        seqs = []
        while True:
            try:
                seqs.append((await asyncio.wait_for(layer.receive(channel), 0.2))["event"]["seq"])
            except TimeoutError:
                return seqs

    stored = list(RunEvent.objects.filter(run=run).exclude(type="run.queued").order_by("seq").values_list("seq", flat=True))
    assert async_to_sync(received)() == stored
    assert nested == []  # none through a nested async_to_sync from the database thread
    assert {"run.started", "run.planning", "run.running", "run.succeeded"} <= set(
        RunEvent.objects.filter(run=run).values_list("type", flat=True))


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
