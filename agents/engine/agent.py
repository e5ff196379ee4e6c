"""The agent entry point: one task for one agent, with retries, a time limit and human feedback."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.guardrails import Checked, GuardrailError, check_answer
from agents.engine.llm import ContextLengthError, LLMError, Message
from agents.engine.output_json import OutputSchemaError
from agents.engine.prompts import PromptBook
from agents.engine.react import build_task_messages, run_react_loop
from agents.engine.react_text import registry_for
from agents.engine.runtime import (
    ApprovalDecision,
    Cancelled,
    Clock,
    HumanInterface,
    PlanRevision,
    RunContext,
    Usage,
)
from agents.engine.specs import AgentSpec, TaskSpec

T = TypeVar("T")


class AgentError(Exception):
    """The agent could not finish its task; the message is safe to show to the user.

    Final by construction (retries are already spent), so a tool that runs an agent, such as
    the manager's delegation tool, does not retry it: the executor reads ``retryable``.
    """

    retryable = False


@dataclass
class AgentResult:
    output: str
    usage: Usage  # this agent's own usage for the task
    output_json: Any = None  # the answer's value when the task has an output schema


class _ExecutionTimeout(Exception):
    pass


class _ExecutionTimer:
    """``max_execution_time`` spread over the agent's passes; time waiting for a person is free.

    Two clocks guard it: the agent's clock (this timer: the run's clock less the time spent
    waiting for a person) is read before every ReAct call (deterministic, and the only one a
    fake clock moves), and an asyncio timeout on the loop's clock interrupts a call that is
    still in flight when the time is up; it is held while a person is asked (``waiting``).
    """

    def __init__(self, clock: Clock, limit: float | None) -> None:
        self.clock = clock
        self.remaining = limit
        self._waited = 0.0  # on the run's clock, in waits that ended
        self._waiting_since: float | None = None
        self._waits = 0  # waits under way (steps may ask at the same time)
        self._pass: tuple[float, asyncio.Timeout] | None = None  # its start (agent clock), timeout

    def monotonic(self) -> float:
        """The agent's clock (``Clock``): the run's, stopped while a person is asked."""
        now = self.clock.monotonic()
        return now - self._waited - (now - self._waiting_since if self._waiting_since is not None else 0.0)

    async def sleep(self, seconds: float) -> None:
        await self.clock.sleep(seconds)

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        """Time spent inside is a person's, not the agent's."""
        self._waits += 1
        if self._waits == 1:
            self._waiting_since = self.clock.monotonic()
            if self._pass is not None:
                self._pass[1].reschedule(None)
        try:
            yield
        finally:
            self._waits -= 1
            if self._waits == 0 and self._waiting_since is not None:
                self._waited += self.clock.monotonic() - self._waiting_since
                self._waiting_since = None
                if self._pass is not None and self.remaining is not None:
                    started, timeout = self._pass
                    left = self.remaining - (self.monotonic() - started)
                    timeout.reschedule(asyncio.get_running_loop().time() + max(0.0, left))

    async def run(self, work: Callable[[float | None], Awaitable[T]]) -> T:
        if self.remaining is None:
            return await work(None)
        if self.remaining <= 0:
            raise _ExecutionTimeout
        started = self.monotonic()
        timeout = asyncio.timeout(self.remaining)
        self._pass = (started, timeout)
        try:
            async with timeout:
                return await work(started + self.remaining)
        except TimeoutError as exc:
            if timeout.expired():
                raise _ExecutionTimeout from exc
            raise
        finally:
            self._pass = None
            self.remaining -= self.monotonic() - started


class _TimedHuman:
    """``HumanInterface`` whose waits do not count against the agent's ``max_execution_time``."""

    def __init__(self, human: HumanInterface, timer: _ExecutionTimer) -> None:
        self.human = human
        self.timer = timer

    async def request_feedback(self, *, task_key: str, answer: str) -> str:
        async with self.timer.waiting():
            return await self.human.request_feedback(task_key=task_key, answer=answer)

    async def request_approval(self, *, approval_id: str, tool: str, args: dict[str, Any]) -> ApprovalDecision:
        async with self.timer.waiting():
            return await self.human.request_approval(approval_id=approval_id, tool=tool, args=args)

    async def request_plan_change(
        self, *, task_key: str, reason: str, done_step_ids: Sequence[str], proposed: Sequence[str]
    ) -> PlanRevision:
        async with self.timer.waiting():
            return await self.human.request_plan_change(
                task_key=task_key, reason=reason, done_step_ids=done_step_ids, proposed=proposed
            )


async def run_agent(ctx: RunContext, agent: AgentSpec, task: TaskSpec) -> AgentResult:
    """Run ``task`` with ``agent``: ReAct, Plan-and-Act or plan-execute, by the agent's settings.

    An answer the agent cannot use (``LLMError`` from the agent itself) retries the whole pass up
    to ``max_retry_limit`` times; a failed LLM call does not, its LLM's ``max_retries`` having
    been spent on it already (retries count once across layers). Cancellation and budgets stop
    at once. ``max_execution_time`` counts the agent's own work, not a person's replies.
    With ``task.human_input`` every answer is shown for feedback; non-empty feedback starts
    another pass on the same conversation, an empty reply accepts the answer.
    """
    if agent.max_rpm and hasattr(ctx.llm, "with_rpm"):
        # The agent's own requests-per-minute cap, on top of its LLM's and the crew's.
        ctx = dataclasses.replace(ctx, llm=ctx.llm.with_rpm(f"agent:{agent.key}", agent.max_rpm))
    scope = BudgetScope(agent.budget, Usage(), "agent")
    timer = _ExecutionTimer(ctx.clock, agent.max_execution_time)
    if agent.max_execution_time is not None:
        # The agent reads its deadline on its own clock, and its questions to people pause it.
        ctx = dataclasses.replace(ctx, clock=timer, human=_TimedHuman(ctx.human, timer))

    async def first_pass(deadline: float | None) -> tuple[str, list[Message] | None]:
        return await _first_pass(ctx, agent, task, scope, deadline)

    async def checked(output: str, conversation: list[Message] | None) -> Checked:
        # The answer's schema and the task's checks; a failed check re-runs the final answer.
        async def redo(messages: list[Message]) -> tuple[str, list[Message] | None]:
            return await _with_retries(agent, timer, functools.partial(_react_pass, ctx, agent, messages, scope))

        async def timed(call: Callable[[], Awaitable[T]]) -> T:
            # A check's LLM call (the repair, the criteria) counts against max_execution_time
            # like a pass: not made once the time is up, interrupted when it runs out.
            try:
                return await timer.run(lambda _deadline: call())
            except _ExecutionTimeout as exc:
                raise _timed_out(agent) from exc

        try:
            return await check_answer(
                ctx, agent, task, output, conversation, scope=scope, redo=redo,
                base_messages=lambda: build_task_messages(ctx, agent, task), timed=timed,
            )
        except (OutputSchemaError, GuardrailError) as exc:
            raise AgentError(str(exc)) from exc

    output, conversation = await _with_retries(agent, timer, first_pass)
    result = await checked(output, conversation)
    output, conversation = result.output, result.conversation
    if not task.human_input:
        return AgentResult(output=output, usage=scope.usage, output_json=result.output_json)
    prompts: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
    while True:
        ctx.cancel.raise_if_cancelled()
        await ctx.emit("feedback.requested", {"answer": output})
        feedback = await ctx.cancel.race(
            ctx.human.request_feedback(task_key=task.key, answer=output)
        )
        await ctx.emit("feedback.received", {"text": feedback})
        if not feedback.strip():
            return AgentResult(output=output, usage=scope.usage, output_json=result.output_json)
        if conversation is None:
            # Planned runs keep no single conversation: the task and the answer stand for it.
            conversation = [
                *build_task_messages(ctx, agent, task),
                {"role": "assistant", "content": output},
            ]
        revised = [
            *conversation,
            {"role": "user", "content": prompts.render("human_feedback", feedback=feedback)},
        ]
        feedback_pass = functools.partial(_react_pass, ctx, agent, revised, scope)
        output, conversation = await _with_retries(agent, timer, feedback_pass)
        result = await checked(output, conversation)
        output, conversation = result.output, result.conversation


async def _first_pass(
    ctx: RunContext,
    agent: AgentSpec,
    task: TaskSpec,
    scope: BudgetScope,
    deadline: float | None,
) -> tuple[str, list[Message] | None]:
    # Imported here: these modules build on this one and are written alongside it.
    output: Any
    if task.plan_steps:
        # An approved crew plan binds every agent kind: its steps are the plan (ENGINE.md §2b).
        from agents.engine.planning import run_approved_steps

        output = await run_approved_steps(ctx, agent, task, scope=scope)
        return _as_text(output), None
    if agent.agent_type == "plan_execute":
        from agents.engine.plan_execute import run_plan_execute

        output = await run_plan_execute(ctx, agent, task, scope=scope)
        return _as_text(output), None
    planning = agent.effective_planning
    if planning is not None:
        from agents.engine.planning import run_plan_and_act

        output = await run_plan_and_act(ctx, agent, task, planning, scope=scope)
        return _as_text(output), None
    messages = build_task_messages(ctx, agent, task)
    if task.output_json_schema is not None and not _uses_tools(ctx, agent):
        # One reply is the answer: ask for it natively in the schema's shape (issue #18).
        from agents.engine.output_json import ask_answer

        if deadline is not None and ctx.clock.monotonic() >= deadline:
            raise _ExecutionTimeout
        return await ask_answer(ctx, agent, task.output_json_schema, messages, scope=scope)
    return await _react_pass(ctx, agent, messages, scope, deadline)


def _uses_tools(ctx: RunContext, agent: AgentSpec) -> bool:
    registry = registry_for(ctx)
    return any(ref.name in registry for ref in agent.tools)


async def _react_pass(
    ctx: RunContext,
    agent: AgentSpec,
    messages: list[Message],
    scope: BudgetScope,
    deadline: float | None,
) -> tuple[str, list[Message] | None]:
    result = await run_react_loop(
        ctx, agent, messages, max_iter=agent.max_iter, scope=scope, deadline=deadline
    )
    if result.outcome == "timed_out":
        raise _ExecutionTimeout
    return result.output, result.messages


def _as_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    return str(getattr(output, "output", output))


def _timed_out(agent: AgentSpec) -> AgentError:
    return AgentError(
        f"Agent {agent.name or agent.role!r} exceeded its maximum execution time of "
        f"{agent.max_execution_time:g} seconds."
    )


async def _with_retries(
    agent: AgentSpec,
    timer: _ExecutionTimer,
    work: Callable[[float | None], Awaitable[tuple[str, list[Message] | None]]],
) -> tuple[str, list[Message] | None]:
    attempts = agent.max_retry_limit + 1
    label = agent.name or agent.role
    for attempt in range(1, attempts + 1):
        try:
            return await timer.run(work)
        except (Cancelled, BudgetExceeded, AgentError):
            raise
        except _ExecutionTimeout as exc:
            raise _timed_out(agent) from exc
        except ContextLengthError as exc:
            # Deterministic: the same conversation would not fit on a second attempt either.
            raise AgentError(f"Agent {label!r} failed: {exc}") from exc
        except LLMError as exc:
            if exc.retries_spent:
                # The call was retried as often as its LLM allows: another pass would make
                # those calls again (the "4 × 3" a local server once saw).
                raise AgentError(f"Agent {label!r} failed: {exc}") from exc
            if attempt < attempts:
                continue
            tries = f" after {attempts} attempts" if attempts > 1 else ""
            raise AgentError(f"Agent {label!r} failed{tries}: {exc}") from exc
        except Exception as exc:
            raise AgentError(f"Agent {label!r} failed: {exc}") from exc
    raise AssertionError("unreachable")  # pragma: no cover
