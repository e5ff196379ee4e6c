"""Executes runs and plan drafts in a worker: engine context in, outcome and events out."""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connections, transaction
from django.utils import timezone
from django.utils.translation import gettext_noop

from agents.bridge import agent_spec, llm_lookup, llm_rows, llm_spec, snapshot_llm_ids
from agents.engine.agent import AgentError, run_agent
from agents.engine.calls import BudgetExceeded, LLMCaller, RateLimiters
from agents.engine.demo import DemoGateway, Pace
from agents.engine.events import Event
from agents.engine.gateway import RoutingGateway
from agents.engine.llm import LLMError
from agents.engine.runtime import (
    Cancelled,
    CancelToken,
    EventEmitter,
    RunContext,
    SystemClock,
    Usage,
)
from agents.engine.specs import AgentSpec, ApprovedStep, Budget, TaskSpec
from agents.models import LLM
from agents.selectors import llm_default, prompt_book
from agents.services import llm_capabilities_memo
from agents.tools import registry
from crews import plans, queue, realtime, runs
from crews.bridge import (
    NewEvent,
    RunNotWorking,
    _handed_back,
    _HandedBack,
    crew_snapshot,
    crew_spec,
    emit_together,
)
from crews.engine.interpolate import MissingInput
from crews.engine.kickoff import run_crew
from crews.engine.planner import CrewPlanError, draft_crew_plan
from crews.engine.specs import CrewSpec
from crews.models import RUN_WORKING, Plan, Run, RunEvent, RunTask
from crews.people import DatabaseHuman
from crews.sink import RunEventSink, current_sink, run_hop
from knowledge.retrieval import run_knowledge, run_start_knowledge
from planner_site.prepared import STAND_IN_ID, Prepared
from planner_site.worker import default_worker_id, on_worker_stop, worker_stopping

logger = logging.getLogger(__name__)

# How soon a stop request made in another process reaches a run, and a page opened meanwhile gets
# streamed deltas. A stop from this process arrives at once (``cancel_in_process``); one from
# another process needs ``run.cancelled`` "within seconds" (issue #4), and a shorter poll would
# cost every run more database round trips a second.
WATCH_SECONDS = 1.0
SHUTDOWN = "shutdown"

# Shared by every run in this process, so one LLM's requests-per-minute limit holds across runs.
_clock = SystemClock()
_limiters = RateLimiters(_clock)
# Runs executing in this process: a stop from this process's web side reaches them at once.
_active: dict[int, CancelToken] = {}
_active_lock = threading.Lock()


class RunFailed(Exception):
    """The run ended without an answer; the message is safe to show."""


def db(fn: Callable[..., Any]) -> Callable[..., Any]:
    return run_hop(fn)


def _release_connections() -> None:
    """Drop stale connections as a worker does between tasks, but never inside a transaction:
    that would break the caller's atomic block (a test's, or a command's)."""
    if not any(c.in_atomic_block for c in connections.all(initialized_only=True)):
        close_old_connections()


def cancel_in_process(run_id: int) -> None:
    with _active_lock:
        token = _active.get(run_id)
    if token is not None:
        token.cancel("cancelled")


queue.worker.cancel_in_process = cancel_in_process  # a stop asked here reaches the run at once


def _demo_pace() -> Pace:
    """The offline demo model's pace (settings), so a demo run can be watched and stopped."""
    return Pace(settings.PLANNER_DEMO_FIRST_TOKEN_SECONDS, settings.PLANNER_DEMO_TOKENS_PER_SECOND)


def _default_llm() -> LLM:
    llm = llm_default()
    if llm is None:
        from agents.services import llm_ensure_demo

        llm = llm_ensure_demo()
    return llm


def execute(run_id: int, worker_id: str | None = None) -> None:
    """Claim ``run_id`` and run it to an end state; a stopping worker leaves it interrupted.

    The claim names this execution (the worker's id and a nonce): once the run is no longer
    working under that name (the sweep took this worker for dead, say, and the run was resumed
    elsewhere), this execution stops at its next poll or event and never ends the run.

    The claim and the run's start are made here, in the thread every later database hop of the
    run comes back to, before its event loop takes over: two hops fewer a run (#20). Their
    events (``run.started``, ``run.planning``) are broadcast from that loop, first.
    """
    base = worker_id or default_worker_id(f"-{threading.get_ident()}")
    owner = f"{base[:90]}#{secrets.token_hex(4)}"
    later = _HandedBack()
    bound = _handed_back.set(later)  # the services' events, for the loop to broadcast
    registered = False
    try:
        try:
            claimed = runs.run_claim(run_id=run_id, worker_id=owner)
            if claimed is None:
                return
            token, followers = CancelToken(), DeltaFollowers(run_id)
            with _active_lock:
                _active[run_id] = token
            registered = True
            remove_hook = on_worker_stop(lambda: token.cancel(SHUTDOWN))
            if worker_stopping():  # the process was asked to stop while this worker claimed the run
                token.cancel(SHUTDOWN)
            begun: _Start | BaseException
            try:
                begun = _start(run_id, token, followers)
            except Exception as exc:  # noqa: BLE001 - ended on the loop, as any failure of the run
                begun = exc
        finally:
            _handed_back.reset(bound)
            later.closed = True
        try:
            async_to_sync(_execute)(run_id, token, owner, followers, begun, list(later))
        finally:
            remove_hook()
    finally:
        if later and not registered:  # refused (a stop asked meanwhile): its run.cancelled still goes out
            async_to_sync(_broadcast_all)(list(later))
        if registered:
            with _active_lock:
                _active.pop(run_id, None)
        _release_connections()


async def _broadcast_all(payloads: list[tuple[int, Any]]) -> None:
    for run_id, payload in payloads:
        try:
            await realtime.broadcast(run_id, payload)
        except Exception:  # noqa: BLE001 - the event is stored; a socket reconnect replays it
            logger.warning("could not broadcast event %s of run %s", payload["seq"], run_id, exc_info=True)


class DeltaFollowers:
    """The LLM caller's stream gate: whether anyone follows the run's deltas, as last polled.

    Asking the cache on every call would block the event loop on a Redis round trip in
    scale-out; the watch loop refreshes the answer instead, from a database thread.
    """

    def __init__(self, run_id: int) -> None:
        self.run_id = run_id
        self.followed = False

    def refresh(self) -> None:
        try:
            self.followed = realtime.deltas_followed(self.run_id)
        except Exception:  # noqa: BLE001 - an unreachable cache must not stop the run or its watch
            logger.warning("could not tell who follows run %s; sending deltas to be safe", self.run_id, exc_info=True)
            self.followed = True  # fail open: deltas are what a run sent before the gate

    def __call__(self) -> bool:
        return self.followed


def _poll(run_id: int, owner: str, followers: DeltaFollowers, *, beat: bool) -> bool:
    """One database hop for the watch loop: heartbeat (or a plain look), followers; stop? (a
    stop was asked, or the run is no longer this execution's)"""
    stop = runs.run_heartbeat(run_id=run_id, owner=owner) if beat else _stop_asked(run_id, owner)
    followers.refresh()
    return stop


def _stop_asked(run_id: int, owner: str) -> bool:
    row = _RUN_STATE.rows(run=run_id)
    if not row:
        return True
    cancel_requested, worker, status = row[0]
    return bool(cancel_requested) or worker != owner or status not in RUN_WORKING


async def _watch(run_id: int, owner: str, token: CancelToken, followers: DeltaFollowers) -> None:
    """Heartbeat, a stop request made in another process, and who follows the deltas, polled
    while the run works. The first poll waits a period: the claim has just beaten and looked for
    a stop request, and the context asked about followers (most short runs never poll)."""
    beat = settings.PLANNER_RUN_HEARTBEAT_SECONDS
    since_beat = 0.0
    poll = db(_poll)
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        since_beat += WATCH_SECONDS
        if token.cancelled:
            return
        try:
            stop = await poll(run_id, owner, followers, beat=since_beat >= beat)
        except Exception:  # noqa: BLE001 - e.g. a locked database: the watch must outlive one bad poll,
            # or the heartbeat goes stale (the run is swept as interrupted while it works) and a
            # stop from another process never arrives.
            logger.warning("run %s: watch poll failed; trying again", run_id, exc_info=True)
            continue
        if since_beat >= beat:
            since_beat = 0.0
        if stop:
            token.cancel("cancelled")
            return


def _context(run: Run, token: CancelToken, budget: Budget, followers: DeltaFollowers,
             max_rpm: int | None = None) -> RunContext:
    sink = RunEventSink(run.pk, owner=run.worker_id, on_gone=lambda: token.cancel("ended elsewhere"))
    emit = EventEmitter(sink=sink, clock=_clock)
    # What the run spent before (a resumed run): its budget holds across interruptions.
    usage = Usage(prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
                  cost_usd=float(run.cost_usd))
    followers.refresh()  # the first call need not wait for the watch loop's first poll
    caller = LLMCaller(
        gateway=RoutingGateway(demo=DemoGateway(_demo_pace())), emit=emit, cancel=token, clock=_clock, usage=usage,
        limiters=_limiters, budget=budget, stream_gate=followers, capabilities=llm_capabilities_memo(),
    ).with_rpm(f"run:{run.pk}", max_rpm)
    return RunContext(
        llm=caller, emit=emit, cancel=token, clock=_clock, human=DatabaseHuman(run.pk, token),
        prompts=prompt_book(), tools=registry(), usage=usage,
    )


@dataclass
class _Start:
    """What a run needs before its first LLM call, read in one database hop."""

    run: Run
    ctx: RunContext
    crew: CrewSpec | None = None  # interpolated with the run's inputs
    agent: AgentSpec | None = None  # for an agent asked directly
    done: dict[str, str] = field(default_factory=dict)  # task key → output kept from before
    steps: dict[str, list[ApprovedStep]] | None = None  # the approved plan the run follows
    announce_plan: bool = False  # whether the run still has to say which plan it follows
    knowledge: Any = None  # knowledge.retrieval.RunKnowledge: sources and memory, if the crew has any
    planning: bool = False  # the run is planning already (set in this hop: it drafts its plan next)


# The runner's per-run reads, compiled once (``Prepared``): compiling was most of their cost.
_RUN = Prepared(lambda run: Run.objects.filter(pk=run), run=STAND_IN_ID)
_DONE_OUTPUTS = Prepared(
    lambda run: RunTask.objects.filter(run_id=run, status=RunTask.Status.DONE).values_list("task_id_snapshot", "output"),
    run=STAND_IN_ID,
)
_RUN_STATE = Prepared(
    lambda run: Run.objects.filter(pk=run).values_list("cancel_requested", "worker_id", "status"), run=STAND_IN_ID
)


def _run_row(run_id: int) -> Run:
    run = _RUN.one(Run, run=run_id)
    if run is None:
        raise Run.DoesNotExist(f"no run {run_id}")
    return run


def _done_outputs(run_id: int) -> dict[str, str]:
    """Task key → output of the run's tasks finished before (a resumed run, or a re-run's kept)."""
    return {str(task_id): output for task_id, output in _DONE_OUTPUTS.rows(run=run_id)}


def _start(run_id: int, token: CancelToken, followers: DeltaFollowers) -> _Start:
    run = _run_row(run_id)
    if run.agent_id is not None:
        ids = snapshot_llm_ids([run.snapshot["agent"]])
    else:
        crew = run.snapshot["crew"]
        ids = snapshot_llm_ids(run.snapshot["agents"], crew["planning_llm_id"], crew["manager_llm_id"])
    default, rows = llm_rows(ids)  # the default and every LLM the run names, in one query
    default = default or _default_llm()
    if run.agent_id is not None:
        ctx = _context(run, token, Budget(), followers)
        llms = llm_lookup(default=default, rows=rows)
        return _Start(run, ctx, agent=agent_spec(run.snapshot["agent"], llms=llms))
    spec = crew_spec(run.snapshot, default_llm=default, llm_rows=rows)
    ctx = _context(run, token, spec.budget, followers, spec.max_rpm)
    start = _Start(run, ctx, crew=spec.interpolated(run.inputs), done=_done_outputs(run.pk))
    start.knowledge = run_start_knowledge(
        crew_id=run.crew_id, user_id=run.created_by_id, run_id=run.pk,
        agent_ids=[a["id"] for a in run.snapshot["agents"]],
    )
    if run.plan_id and run.plan_version:
        start.steps = plans.steps_by_task_key(run.plan, run.plan_version)  # reads the plan row
        # A resumed run said so before it was interrupted (or approved its own plan then).
        start.announce_plan = not RunEvent.objects.filter(run_id=run.pk, type="crew_plan.approved").exists()
    elif spec.planning and run.planning_plan_id is None:
        # It drafts its plan first (``_draft_in_run``): planning from this hop, not one more.
        runs.run_set_planning(run_id=run.pk)
        start.planning = True
    return start


async def _execute(run_id: int, token: CancelToken, owner: str, followers: DeltaFollowers,
                   begun: _Start | BaseException, said: list[tuple[int, Any]]) -> None:
    """The claimed run on its event loop: ``begun`` is what ``_start`` gave (or raised) in the
    run's thread, ``said`` the events its claim and start stored, broadcast here first."""
    await _broadcast_all(said)
    watcher = asyncio.ensure_future(_watch(run_id, owner, token, followers))
    finish = db(functools.partial(runs.run_finish, owner=owner))
    start: _Start | None = None
    bound = None
    try:
        if isinstance(begun, BaseException):
            raise begun
        start = begun
        bound = current_sink.set(start.ctx.emit.sink)  # this run's hops store its events first (run_hop)
        if start.agent is not None:
            output = (await run_agent(start.ctx, start.agent, TaskSpec.from_message(start.run.message))).output
        else:
            output = await _run_crew(start)
        await start.ctx.emit.sink.drain(check=True)  # every event stored before the run is called done
    except Cancelled:
        status = Run.Status.INTERRUPTED if token.reason == SHUTDOWN else Run.Status.CANCELLED
        await finish(run_id=run_id, status=status)
    except BudgetExceeded as exc:
        await finish(run_id=run_id, status=Run.Status.FAILED, error=str(exc))
    except (RunFailed, CrewPlanError, AgentError, LLMError, MissingInput, LookupError) as exc:
        await finish(run_id=run_id, status=Run.Status.FAILED, error=str(exc))
    except Exception:
        logger.exception("run %s failed unexpectedly", run_id)
        await finish(
            run_id=run_id, status=Run.Status.FAILED, error=gettext_noop("The run stopped because of an internal error.")
        )
    else:
        await finish(run_id=run_id, status=Run.Status.SUCCEEDED, output=output)
    finally:
        if bound is not None:
            current_sink.reset(bound)  # async_to_sync copies the context back to the worker thread
        if start is not None:
            # The run's kept-alive connections (agents.engine.wire), first and shielded: a second
            # cancellation below must not leave the session to the collector.
            await asyncio.shield(start.ctx.llm.aclose())
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


async def _run_crew(start: _Start) -> str:
    ctx, run, spec = start.ctx, start.run, start.crew
    assert spec is not None
    steps = start.steps
    if steps is not None:
        if start.announce_plan:
            await ctx.emit("crew_plan.approved", {"plan_id": run.plan_id, "version": run.plan_version})
    elif spec.planning:
        steps = await _plan_in_run(ctx, run, spec, start.knowledge, planning=start.planning)
    result = await run_crew(ctx, spec, plan=steps, done=start.done, knowledge=start.knowledge)
    if result.failed:
        raise RunFailed(result.error)
    return result.output


def _drafted_before(run: Run) -> Plan | None:
    """The plan this run drafted before it was interrupted (awaiting its approval, say)."""
    if run.planning_plan_id is None:
        return None
    return Plan.objects.filter(
        pk=run.planning_plan_id, status__in=[Plan.Status.DRAFT, Plan.Status.APPROVED]
    ).first()


async def _plan_in_run(ctx: RunContext, run: Run, spec: CrewSpec, knowledge: Any = None, *,
                       planning: bool = False) -> dict[str, list[ApprovedStep]] | None:
    """Draft the crew plan inside the run; with review, wait until a person approves it.

    A resumed run that drafted its plan before it was interrupted goes on with that plan (and
    with the edits made to it meanwhile): no second paid draft, no second plan to review.
    ``planning``: the run is planning already (``_start``).
    """
    # A run with no draft of its own yet (all but a resumed one) has nothing to look up: no hop.
    plan = await db(_drafted_before)(run) if run.planning_plan_id is not None else None
    if plan is None:
        drafted = await _draft_in_run(ctx, run, spec, knowledge, planning=planning)
        if drafted is None:
            return None
        if not run.review_plan:
            return await _store_and_follow_in_run(ctx, run, drafted)
        plan = await db(_store_run_plan)(run, *drafted)
        await ctx.emit("crew_plan.completed", {"plan_id": plan.pk, "version": plan.version})
    if plan.status != Plan.Status.APPROVED:  # (a person may have approved it meanwhile)
        if run.review_plan:
            await db(runs.run_wait_for_plan_approval)(run_id=run.pk, plan=plan)
            plan = await _wait_for_approval(ctx.cancel, plan.pk)
        else:
            # The run's own draft, approved as drafted: a task without steps plans as usual.
            plan = await db(plans.plan_approve)(actor=None, plan=plan, supersede=False, allow_gaps=True)
    await ctx.emit("crew_plan.approved", {"plan_id": plan.pk, "version": plan.approved_version})
    return await db(_follow_plan)(run.pk, plan)


def _follow_plan(run_id: int, plan: Plan) -> dict[str, list[ApprovedStep]]:
    """The run follows its approved plan and works again: one database hop for the three."""
    runs.run_set_running(run_id=run_id, plan=plan)  # and ``run_use_plan``, in the same UPDATE
    return plans.steps_by_task_key(plan, plan.approved_version)


async def _store_and_follow_in_run(ctx: RunContext, run: Run, drafted: tuple[Any, ...]
                                   ) -> dict[str, list[ApprovedStep]]:
    """The run's own draft, approved as drafted (a task without steps plans as usual), stored
    and followed in one database hop and one transaction (``_store_and_follow``)."""
    try:
        return await db(_store_and_follow)(run, *drafted)
    except RunNotWorking:
        # Ended elsewhere (the sweep took this worker for dead, say), as the run's sink says it.
        ctx.cancel.cancel("ended elsewhere")
        raise Cancelled("ended elsewhere") from None


def _store_and_follow(run: Run, steps: dict[str, list[str]], usage: dict[str, Any], task_ids: list[int],
                      warnings: list[dict[str, Any]]) -> dict[str, list[ApprovedStep]]:
    """What a run without plan review does once its plan is drafted, at once: store it approved,
    follow it, and say so (``crew_plan.completed``, ``crew_plan.approved``, then ``run.running``,
    stored together as the engine's events are: while the run works and under its claim). Three
    hops and five transactions before; every planned run makes them."""
    with transaction.atomic():
        plan, approved = plans.plan_store_run_draft(run=run, steps=steps, usage=usage, task_ids=task_ids,
                                                    warnings=warnings, approve=True)
        previous = runs.run_set_running(run_id=run.pk, plan=plan, announce=False)
        events = [NewEvent("crew_plan.completed", {"plan_id": plan.pk, "version": plan.version}),
                  NewEvent("crew_plan.approved", {"plan_id": plan.pk, "version": plan.approved_version})]
        if previous is not None:
            events.append(NewEvent("run.running", {"from": previous}))
        emit_together(run.pk, events, owner=run.worker_id)
    return approved


async def _draft_in_run(ctx: RunContext, run: Run, spec: CrewSpec, knowledge: Any = None, *,
                        planning: bool = False) -> tuple[Any, ...] | None:
    """The run's own draft, as ``_store_run_plan``'s arguments after the run; None when planning
    failed and the crew may run without one."""
    if not planning:
        await db(runs.run_set_planning)(run_id=run.pk)
    assert spec.planning_llm is not None
    before = (ctx.usage.prompt_tokens, ctx.usage.completion_tokens, ctx.usage.cost_usd)
    try:
        draft = await draft_crew_plan(ctx, spec, llm=spec.planning_llm, knowledge=knowledge)
    except CrewPlanError:
        if not spec.run_without_plan_on_failure:
            raise
        await ctx.emit("crew_plan.warning", {"message": gettext_noop("Planning failed; the crew runs without a plan.")})
        await db(runs.run_set_running)(run_id=run.pk)
        return None
    usage = {
        "prompt_tokens": ctx.usage.prompt_tokens - before[0],
        "completion_tokens": ctx.usage.completion_tokens - before[1],
        "cost_usd": ctx.usage.cost_usd - before[2],
    }
    warnings = plans.draft_warnings(draft.task_warnings, draft.warnings)
    return draft.steps, usage, [int(t.key) for t in spec.tasks], warnings


def _store_run_plan(run: Run, steps: dict[str, list[str]], usage: dict[str, Any], task_ids: list[int],
                    warnings: list[dict[str, Any]]) -> Plan:
    """The run's own draft, stored for a person to review."""
    plan, _steps = plans.plan_store_run_draft(run=run, steps=steps, usage=usage, task_ids=task_ids,
                                              warnings=warnings, approve=False)
    return plan


async def _wait_for_approval(cancel: CancelToken, plan_id: int) -> Plan:
    fetch = db(lambda: Plan.objects.filter(pk=plan_id, status=Plan.Status.APPROVED).first())
    while True:
        cancel.raise_if_cancelled()
        plan = await fetch()
        if plan is not None:
            return plan
        await cancel.race(asyncio.sleep(WATCH_SECONDS))


# Plans drafted outside a run -------------------------------------------------------------------


class DraftCalls:
    """The sink of a drafting outside a run: no page follows its events, but its LLM calls are
    kept (``llm.completed``, with when each finished) for usage and the daily budgets
    (``plans.plan_store_draft`` and the others write them as ``PlanLLMCall`` rows)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def emit(self, event: Event) -> None:
        if event.type == "llm.completed":
            self.calls.append({**event.data, "at": timezone.now()})


def _plan_context(usage: Usage, calls: DraftCalls) -> RunContext:
    emit = EventEmitter(sink=calls, clock=_clock)
    token = CancelToken()
    caller = LLMCaller(gateway=RoutingGateway(demo=DemoGateway(_demo_pace())), emit=emit, cancel=token, clock=_clock, usage=usage, limiters=_limiters,
                       capabilities=llm_capabilities_memo())
    return RunContext(llm=caller, emit=emit, cancel=token, clock=_clock, prompts=prompt_book(), tools=registry(), usage=usage)


async def _drafting(ctx: RunContext, spec: CrewSpec, **kwargs: Any) -> Any:
    """``draft_crew_plan``, then the drafting's connections closed (its loop ends with it)."""
    try:
        return await draft_crew_plan(ctx, spec, **kwargs)
    finally:
        await ctx.llm.aclose()


def _usage_dict(usage: Usage, calls: DraftCalls | None = None) -> dict[str, Any]:
    totals = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens, "cost_usd": usage.cost_usd}
    return totals if calls is None else {**totals, "calls": calls.calls}


def _plan_knowledge(plan: Plan) -> Any:
    """The crew's sources as its planner reads them (issue #19); None when it has none."""
    return run_knowledge(
        crew_id=plan.crew_id, user_id=plan.created_by_id or 0, run_id=None, remembers=False,
        agent_ids=list(plan.crew.agents.values_list("id", flat=True)),
    )


def _plan_spec(plan: Plan) -> tuple[CrewSpec, Any]:
    default = _default_llm()
    spec = crew_spec(crew_snapshot(plan.crew), default_llm=default).interpolated(plan.inputs)
    llm = llm_spec(plan.llm) if plan.llm_id else spec.planning_llm
    return spec, llm


def generate_plan(plan_id: int) -> None:
    """Draft a plan that is being generated; any other state means it was drafted already."""
    plan = Plan.objects.select_related("crew", "llm").get(pk=plan_id)
    if plan.status != Plan.Status.GENERATING:
        return  # a second delivery of the task must not add a version or undo an approval
    # Drafting starts now (it may have waited in the queue): the stale sweep counts from here.
    Plan.objects.filter(pk=plan_id, status=Plan.Status.GENERATING).update(updated_at=timezone.now())
    usage, calls = Usage(), DraftCalls()
    try:
        spec, llm = _plan_spec(plan)
        draft = async_to_sync(_drafting)(_plan_context(usage, calls), spec, llm=llm, knowledge=_plan_knowledge(plan))
    except (CrewPlanError, LLMError, MissingInput, LookupError, BudgetExceeded) as exc:
        kind = exc.kind if isinstance(exc, LLMError) else ""  # only an LLM call's error has a kind
        plans.plan_fail(plan_id=plan_id, error=str(exc), usage=_usage_dict(usage, calls), failure_kind=kind)
        return
    except Exception:
        logger.exception("drafting plan %s failed unexpectedly", plan_id)
        plans.plan_fail(plan_id=plan_id, error=gettext_noop("Drafting stopped because of an internal error."),
                        usage=_usage_dict(usage, calls))
        return
    finally:
        _release_connections()
    plans.plan_store_draft(plan_id=plan_id, steps=draft.steps, usage=_usage_dict(usage, calls), task_ids=[int(t.key) for t in spec.tasks],
                           warnings=plans.draft_warnings(draft.task_warnings, draft.warnings))


def regenerate_plan(plan_id: int, task_id: int, feedback: str, actor_id: int | None) -> None:
    # It starts now (it may have waited in the queue): the stale sweep counts from here.
    Plan.objects.filter(pk=plan_id).update(updated_at=timezone.now())
    plan = Plan.objects.select_related("crew", "llm").get(pk=plan_id)
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id else None
    usage, calls = Usage(), DraftCalls()
    pinned = [s.text for s in plans.current_steps(plan).get(task_id, []) if s.pinned]
    try:
        spec, llm = _plan_spec(plan)
        draft = async_to_sync(_drafting)(
            _plan_context(usage, calls), spec, llm=llm, only_tasks=[str(task_id)], feedback=feedback or None,
            keep={str(task_id): pinned}, knowledge=_plan_knowledge(plan),
        )
        texts = draft.steps.get(str(task_id))
        error = "" if texts is not None else gettext_noop("The planner wrote no steps for this task; nothing changed.")
    except (CrewPlanError, LLMError, MissingInput, LookupError, BudgetExceeded) as exc:
        texts, error = None, str(exc)
    except Exception:
        # Whatever went wrong, the task must leave "regenerating": else every later regenerate
        # of it is refused as busy, and the editor waits on it for ever.
        logger.exception("regenerating task %s of plan %s failed unexpectedly", task_id, plan_id)
        texts, error = None, gettext_noop("Regenerating stopped because of an internal error.")
    finally:
        _release_connections()
    plans.plan_store_regenerated(
        plan_id=plan_id, task_id=task_id, texts=texts or [], actor=actor, usage=_usage_dict(usage, calls), error=error
    )

