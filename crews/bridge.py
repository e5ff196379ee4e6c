"""The one bridge between the ORM and the engines: snapshots → specs, engine events → RunEvents."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from contextvars import ContextVar
from datetime import datetime
from decimal import Decimal
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import F, Model, Prefetch, prefetch_related_objects
from django.db.models.sql import UpdateQuery
from django.utils import timezone

from agents.bridge import agent_snapshot, agent_spec, llm_lookup
from agents.engine.specs import Budget
from agents.models import Agent
from crews.engine.specs import CrewSpec, CrewTaskSpec
from crews.models import (
    RUN_WORKING,
    Crew,
    Run,
    RunEvent,
    RunLLMCall,
    RunTask,
    Task,
)
from crews.realtime import EventPayload, broadcast

logger = logging.getLogger(__name__)

CREW_SNAPSHOT_FIELDS = (
    "id", "name", "process", "planning", "planning_llm_id", "manager_llm_id", "review_plan",
    "run_without_plan_on_failure", "on_step_failure", "max_rpm", "budget_max_tokens",
)


# Snapshots and specs ---------------------------------------------------------------------------


def crew_snapshot(crew: Crew) -> dict[str, Any]:
    """The crew's definition at kickoff as plain JSON: later edits never change a run.

    Reads the tasks, their agents and context and the crew's agents (with their planning
    settings) through the crew's prefetch cache: a crew from ``selectors.crew_get`` or
    ``selectors.crew_get_for_kickoff`` (the kickoff request's) has them all already, and any
    other is fetched here in four queries.
    """
    cache = getattr(crew, "_prefetched_objects_cache", {})
    if "agents" not in cache or "tasks" not in cache:  # even with nothing to fetch, it costs as much as the rest
        prefetch_related_objects(
            [crew],
            Prefetch("agents", queryset=Agent.objects.select_related("planning_config")),
            Prefetch("tasks", queryset=Task.objects.select_related("agent").prefetch_related("context")),
        )
    tasks = sorted(_related(crew, "tasks"), key=lambda t: (t.order, t.pk))
    agent_rows = {a.pk: a for a in _related(crew, "agents")}
    for task in tasks:
        if task.agent is not None:
            agent_rows.setdefault(task.agent.pk, task.agent)
    data = {field: getattr(crew, field) for field in CREW_SNAPSHOT_FIELDS}
    data["budget_max_cost_usd"] = str(crew.budget_max_cost_usd) if crew.budget_max_cost_usd is not None else None
    return {
        "crew": data,
        "agents": [agent_snapshot(a) for a in agent_rows.values()],
        "tasks": [
            {
                "id": t.pk, "order": t.order, "name": t.name, "description": t.description,
                "expected_output": t.expected_output, "agent_id": t.agent_id,
                "context_ids": sorted(c.pk for c in _related(t, "context")),
                "async_execution": t.async_execution, "human_input": t.human_input,
                "output_schema": t.output_schema, "guardrails": t.guardrails or {},
                "guardrail_max_retries": t.guardrail_max_retries,
            }
            for t in tasks
        ],
    }


def _related(obj: Model, relation: str) -> Any:
    """``obj.<relation>.all()``, straight from the prefetch cache when it holds the rows: the
    related manager that ``all()`` goes through is built anew on every access (a many-to-many
    one costs as much as snapshotting its rows), and every kickoff reads four relations."""
    cached = getattr(obj, "_prefetched_objects_cache", {}).get(relation)
    return cached if cached is not None else getattr(obj, relation).all()


def crew_spec(snapshot: dict[str, Any], *, default_llm: Any, llm_rows: Any = None) -> CrewSpec:
    """The snapshotted crew as the engine runs it; ``llm_rows`` (id → LLM) are read already."""
    llms = llm_lookup(default=default_llm, rows=llm_rows)
    crew = snapshot["crew"]
    cost = crew.get("budget_max_cost_usd")
    return CrewSpec(
        key=f"crew-{crew['id']}",
        name=crew["name"],
        process=crew["process"],
        agents=tuple(agent_spec(a, llms=llms) for a in snapshot["agents"]),
        tasks=tuple(
            CrewTaskSpec(
                key=str(t["id"]), number=i, name=t["name"], description=t["description"],
                expected_output=t["expected_output"],
                agent_key=str(t["agent_id"]) if t["agent_id"] is not None else None,
                context_keys=tuple(str(c) for c in t["context_ids"]),
                async_execution=t["async_execution"], human_input=t["human_input"],
                # Runs snapshotted before issue #18 have neither.
                output_schema=t.get("output_schema"), guardrails=t.get("guardrails") or {},
                guardrail_max_retries=t.get("guardrail_max_retries", 3),
            )
            for i, t in enumerate(snapshot["tasks"], start=1)
        ),
        planning=crew["planning"],
        planning_llm=llms(crew["planning_llm_id"]),
        manager_llm=llms(crew["manager_llm_id"]) if crew["manager_llm_id"] else None,
        budget=Budget(max_tokens=crew["budget_max_tokens"], max_cost_usd=float(cost) if cost else None),
        max_rpm=crew["max_rpm"],
        run_without_plan_on_failure=crew["run_without_plan_on_failure"],
        # Runs snapshotted before the setting existed keep the old behaviour.
        on_step_failure=crew.get("on_step_failure", "continue"),
    )


# Events ------------------------------------------------------------------------------------------


def _task_id(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def payload_of(event: RunEvent | StoredEvent) -> EventPayload:
    return {
        "seq": event.seq, "type": event.type, "at": event.at.isoformat().replace("+00:00", "Z"),
        "task_id": event.task_id, "step_id": event.step_id or None, "data": event.data,
    }


_TASK_STATUS = {
    "task.started": RunTask.Status.RUNNING,
    "task.completed": RunTask.Status.DONE,
    "task.failed": RunTask.Status.FAILED,
    "task.skipped": RunTask.Status.SKIPPED,
}


class RunNotWorking(Exception):
    """The run ended (or was taken for dead) while its worker still emitted events."""


@functools.cache
def _take_seq_sql(vendor: str, usage: bool, returning: bool, working_only: bool = False,
                  owned: bool = False) -> str:
    """The UPDATE behind ``_take_seq`` (built once per database kind and event kind)."""
    quote = connection.ops.quote_name
    column = {f.name: quote(f.column) for f in Run._meta.concrete_fields}
    sets = [f"{column['last_seq']} = {column['last_seq']} + %s"]
    if usage:
        sets += [f"{column[name]} = {column[name]} + %s"
                 for name in ("prompt_tokens", "completion_tokens", "cost_usd", "llm_calls")]
    sql = f"UPDATE {quote(Run._meta.db_table)} SET {', '.join(sets)} WHERE {column['id']} = %s"
    if working_only:
        # The engine's events only while the run works (RUN_WORKING): nothing follows its end.
        states = ", ".join(f"'{state}'" for state in sorted(RUN_WORKING))  # constants, not input
        sql += f" AND {column['status']} IN ({states})"
    if owned:
        sql += f" AND {column['worker_id']} = %s"
    return f"{sql} RETURNING {column['last_seq']}" if returning else sql


def _take_seq(cursor: Any, run_id: int, usage: tuple[int, int, Decimal] | None, *, working_only: bool = False,
              owner: str | None = None, count: int = 1, calls: int = 1) -> int:
    """Add ``count`` to the run's ``last_seq`` (and ``calls`` LLM calls' summed usage to its
    totals); the new ``last_seq``, the last of the ``count`` numbers taken.

    The UPDATE takes the run row's write lock until the caller's transaction ends, so the web
    process (run.cancelling) and the worker never hand out the same number. With RETURNING
    (SQLite >= 3.35, PostgreSQL) it is the only statement.
    """
    # Django has no feature flag for UPDATE … RETURNING; the backends that return columns from
    # an INSERT (SQLite >= 3.35, PostgreSQL) support it on UPDATE too.
    db = cursor.db
    returning = db.features.can_return_columns_from_insert
    owned = working_only and owner is not None
    sql = _take_seq_sql(db.vendor, usage is not None, returning, working_only, owned)
    cursor.execute(sql, [count, *((*usage, calls) if usage else ()), run_id, *([owner] if owned else [])])
    row = cursor.fetchone() if returning else None
    updated = cursor.rowcount
    if working_only and updated == 0 and Run.objects.filter(pk=run_id).exists():
        raise RunNotWorking(f"run {run_id} is not working")
    if not returning:  # the UPDATE holds the row until commit, so this reads our own number
        row = Run.objects.filter(pk=run_id).values_list("last_seq").first()
    if row is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    return int(row[0])


_EVENT_FIELDS = ("run", "seq", "type", "task_id", "step_id", "data", "at")


@functools.cache
def _insert_event_sql(vendor: str, returning: bool) -> str:
    """The INSERT behind ``_insert_event`` (built once per database kind)."""
    quote = connection.ops.quote_name
    meta = RunEvent._meta
    columns = ", ".join(quote(meta.get_field(name).column) for name in _EVENT_FIELDS)
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(_EVENT_FIELDS))})"
    return f"{sql} RETURNING {quote(meta.pk.column)}" if returning else sql


def _insert_event(cursor: Any, event: RunEvent) -> None:
    """``event.save()`` for a new row, in one prepared statement: the ORM's save builds and
    compiles an InsertQuery for every event of every run. Values go through the fields' own
    ``get_db_prep_save``, as save() does (JSON, datetimes)."""
    meta, db = RunEvent._meta, cursor.db
    params = [meta.get_field(name).get_db_prep_save(getattr(event, meta.get_field(name).attname), db)
              for name in _EVENT_FIELDS]
    returning = db.features.can_return_columns_from_insert
    cursor.execute(_insert_event_sql(db.vendor, returning), params)
    event.pk = cursor.fetchone()[0] if returning else db.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)
    event._state.adding = False
    event._state.db = db.alias


def _meaning(run_id: int, type_: str, data: dict[str, Any] | None, task_id: int | None,
             ) -> tuple[dict[str, Any], tuple[int, int, Decimal] | None]:
    """An event's data as stored, and the usage it adds to the run's totals (an LLM call's)."""
    data = data or {}
    if type_ == "crew_plan.deviated":
        # API.md's fields. The engine knows no plan rows: an agent's own change (adapt) departs
        # from the version the run follows; a person's (ask) names its versions itself.
        if "plan_id" not in data:
            plan_id, version = Run.objects.values_list("plan_id", "plan_version").get(pk=run_id)
            data = {**data, "plan_id": plan_id, "version": version, "from_version": version}
        data = {**data, "task_id": task_id}
    if type_ == "llm.completed":
        return data, (int(data.get("prompt_tokens") or 0), int(data.get("completion_tokens") or 0),
                      Decimal(str(data.get("cost_usd") or 0)))
    return data, None


def _llm_call_row(run_id: int, seq: int, data: dict[str, Any], llm_call: dict[str, Any]) -> RunLLMCall:
    return RunLLMCall(run_id=run_id, seq=seq, purpose=str(data.get("purpose") or "")[:50],
                      model=str(data.get("model") or "")[:200], **llm_call)


def _roll_up(cursor: Any, run_id: int, type_: str, data: dict[str, Any], task_id: int | None,
             usage: tuple[int, int, Decimal] | None) -> None:
    """What an event means to its task's row: an LLM call's usage, or the task's new status."""
    if task_id is None:
        return
    if usage is not None:
        _update_task(cursor, "usage", [*usage, 1, run_id, task_id])  # 1: one more LLM call
    elif type_ in _TASK_STATUS:
        texts = [data.get(name, "") for name in _TASK_TEXTS[type_]]
        if type_ == "task.started":
            texts = ["", "", None]  # output, error, output_json
        _update_task(cursor, type_, [_TASK_STATUS[type_], *texts, run_id, task_id])
        if "output_json" in data:  # only a task with an output schema: no extra query otherwise
            RunTask.objects.filter(run_id=run_id, task_id_snapshot=task_id).update(output_json=data["output_json"])


def _record(run_id: int, type_: str, data: dict[str, Any] | None = None, *,
                 task_id: int | None = None, step_id: str | None = None, working_only: bool = False,
                 owner: str | None = None, llm_call: dict[str, Any] | None = None) -> RunEvent:
    """Store one event with the run's next seq and apply what it means to the roll-ups.

    Two statements for most events (the seq, the row), three with a task's roll-up: an event is
    stored for every step of every run, so each round trip here counts. ``working_only`` (the
    engine's events) raises ``RunNotWorking`` instead, and stores nothing, once the run ended
    or, with ``owner``, once it is no longer working under that claim. ``llm_call`` (an
    ``llm.completed`` or ``llm.failed``: what the call sent and got back, already scrubbed) is
    stored beside the event, under the same seq, in the same transaction.
    """
    data, usage = _meaning(run_id, type_, data, task_id)
    with connection.cursor() as cursor:
        seq = _take_seq(cursor, run_id, usage, working_only=working_only, owner=owner)
        event = RunEvent(
            run_id=run_id, seq=seq, type=type_, task_id=task_id, step_id=step_id or "", data=data, at=timezone.now()
        )
        _insert_event(cursor, event)
        if llm_call is not None:
            _insert_rows(cursor, RunLLMCall, _LLM_CALL_FIELDS, [_llm_call_row(run_id, seq, data, llm_call)])
        _roll_up(cursor, run_id, type_, data, task_id, usage)
    return event


class StoredEvent(NamedTuple):
    """An event ``record_batch`` stored: its row's values, named as the model's attributes (a
    model instance for each cost more than storing it)."""

    run_id: int
    seq: int
    type: str
    task_id: int | None
    step_id: str
    data: dict[str, Any]
    at: datetime


class NewEvent(NamedTuple):
    """An event for ``record_batch``: ``_record``'s arguments."""

    type: str
    data: dict[str, Any] | None
    task_id: int | None = None
    step_id: str | None = None
    llm_call: dict[str, Any] | None = None


def record_batch(run_id: int, events: Sequence[NewEvent], *, working_only: bool = False,
                 owner: str | None = None) -> list[StoredEvent]:
    """``_record`` for events stored together, in the caller's transaction (the engine's, in
    ``crews.sink.RunEventSink`` batches): their seqs and summed usage in one UPDATE, their rows
    in one statement per table, where ``_record`` sends two statements an event (#20). The
    roll-ups then apply in emit order, as ``_record``'s would. Stores nothing, as ``_record``,
    once the run is no longer working (``RunNotWorking``)."""
    meanings = [_meaning(run_id, e.type, e.data, e.task_id) for e in events]
    usages = [usage for _, usage in meanings if usage is not None]
    total = None
    if usages:
        total = (sum(u[0] for u in usages), sum(u[1] for u in usages), sum((u[2] for u in usages), Decimal(0)))
    # One cursor for the batch's statements, on the thread's connection itself: through the
    # ``connection`` proxy, each statement's cursor and attribute cost a look-up of their own.
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        last = _take_seq(cursor, run_id, total, working_only=working_only, owner=owner, count=len(events),
                         calls=len(usages))
        rows = [
            StoredEvent(run_id, last - len(events) + n, e.type, e.task_id, e.step_id or "", data, timezone.now())
            for n, (e, (data, _)) in enumerate(zip(events, meanings, strict=True), start=1)
        ]
        _insert_rows(cursor, RunEvent, _EVENT_FIELDS, rows)
        _insert_rows(cursor, RunLLMCall, _LLM_CALL_FIELDS, [
            _llm_call_row(run_id, row.seq, row.data, e.llm_call) for e, row in zip(events, rows, strict=True)
            if e.llm_call is not None
        ])
        for e, (data, usage) in zip(events, meanings, strict=True):
            _roll_up(cursor, run_id, e.type, data, e.task_id, usage)
    return rows


def record_event(run_id: int, type_: str, data: dict[str, Any] | None = None, **kw: Any) -> RunEvent:
    """``_record`` in a transaction of its own (a service's event, or one stored alone); inside
    a caller's (a service's state change and its event), in that one, without a savepoint: a
    failure fails the caller's change with it, which no caller goes on from. (Two statements
    fewer for each of a run's four or more service events.) So a caller that means to go on
    after ``RunNotWorking`` calls it outside any atomic block of its own."""
    with transaction.atomic(savepoint=False):
        return _record(run_id, type_, data, **kw)


_LLM_CALL_FIELDS = ("run", "seq", "purpose", "model", "messages", "tools", "response_format", "reply", "error")


@functools.cache
def _insert_rows_sql(vendor: str, model: type[Model], fields: tuple[str, ...]) -> str:
    """The INSERT behind ``_insert_rows`` (built once per database kind, table and columns)."""
    quote = connection.ops.quote_name
    meta = model._meta
    columns = ", ".join(quote(meta.get_field(name).column) for name in fields)
    return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"


def _insert_rows(cursor: Any, model: type[Model], fields: tuple[str, ...], rows: Sequence[Any]) -> None:
    """New rows whose pk nobody reads here, in one prepared statement for them all, as
    ``_insert_event`` prepares its values: model instances, or anything with their attributes."""
    if not rows:
        return
    db = cursor.db
    prepared = [model._meta.get_field(name) for name in fields]
    params = [[field.get_db_prep_save(getattr(row, field.attname), db) for field in prepared] for row in rows]
    cursor.executemany(_insert_rows_sql(db.vendor, model, fields), params)


# The text fields each task event writes besides the status (task.started clears both).
_TASK_TEXTS: dict[str, tuple[str, ...]] = {
    "task.started": ("output", "error"),
    "task.completed": ("output",),
    "task.failed": ("error",),
    "task.skipped": (),
}


@functools.cache
def _task_update_sql(vendor: str, kind: str) -> str:
    """The ORM's own UPDATE of a run's task row for ``kind`` ("usage" or a task event), compiled
    once: compiling the update is most of its cost, and an event is stored for every step.

    Compiled with stand-in values, checked to come back as the statement's parameters in order,
    so the SQL is exactly what ``RunTask.objects.filter(...).update(...)`` sends.
    """
    rows = RunTask.objects.filter(run_id=1000001, task_id_snapshot=1000002)
    if kind == "usage":
        values: dict[str, Any] = {
            "prompt_tokens": F("prompt_tokens") + 1001, "completion_tokens": F("completion_tokens") + 1002,
            "cost_usd": F("cost_usd") + Decimal("1003.5"), "llm_calls": F("llm_calls") + 1,
        }
        expected: tuple[Any, ...] = (1001, 1002, Decimal("1003.5"), 1, 1000001, 1000002)
    else:
        values = {"status": "<status>", **{name: f"<{name}>" for name in _TASK_TEXTS[kind]}}
        if kind == "task.started":
            # A task started again (a resumed run) drops its old JSON with its old text: it must
            # not be served if this attempt fails.
            values["output_json"] = None
        expected = (*values.values(), 1000001, 1000002)
    query = rows.query.chain(UpdateQuery)
    query.add_update_values(values)
    sql, params = query.get_compiler(connection.alias).as_sql()
    if tuple(params) != expected:  # pragma: no cover - a backend that inlines or reorders values
        raise RuntimeError(f"unexpected parameters for the {kind} update: {params!r}")
    return sql


def _update_task(cursor: Any, kind: str, params: list[Any]) -> None:
    cursor.execute(_task_update_sql(cursor.db.vendor, kind), params)


# Inside a run's own hop (``run_hop``): where its services' events go, to be broadcast on the
# run's event loop once the hop returns, instead of through a nested ``async_to_sync`` each.
class _HandedBack(list[tuple[int, EventPayload]]):
    """The payloads a hop's services committed, for the hop's caller to broadcast; ``closed`` once
    it has (a hop whose caller was cancelled may still commit: that payload is sent as before)."""

    closed = False


_handed_back: ContextVar[_HandedBack | None] = ContextVar("handed_back", default=None)


def emit_now(run_id: int, type_: str, data: dict[str, Any] | None = None, **kw: Any) -> RunEvent:
    """Record an event from synchronous code (services) and broadcast it once committed."""
    event = record_event(run_id, type_, data, **kw)
    _send_on_commit(run_id, [payload_of(event)])
    return event


def emit_together(run_id: int, events: Sequence[NewEvent], *, owner: str | None) -> list[StoredEvent]:
    """``emit_now`` for several events stored together (``record_batch``) in the caller's
    transaction, while the run works under ``owner``'s claim (``RunNotWorking`` otherwise)."""
    rows = record_batch(run_id, events, working_only=True, owner=owner)
    _send_on_commit(run_id, [payload_of(row) for row in rows])
    return rows


def _send_on_commit(run_id: int, payloads: list[EventPayload]) -> None:
    """Broadcast once the transaction commits: after the run's hop, from its loop, inside one
    (``run_hop``), else at once through the event loop."""
    from asgiref.sync import async_to_sync

    later = _handed_back.get()

    def send() -> None:
        for payload in payloads:
            if later is not None and not later.closed:
                later.append((run_id, payload))
            else:
                _broadcast_quietly(async_to_sync, run_id, payload)

    transaction.on_commit(send)


def _broadcast_quietly(async_to_sync: Any, run_id: int, payload: EventPayload) -> None:
    try:
        async_to_sync(broadcast)(run_id, payload)
    except Exception:  # noqa: BLE001 - the event is stored; a socket reconnect replays it
        logger.warning("could not broadcast event %s of run %s", payload["seq"], run_id, exc_info=True)
