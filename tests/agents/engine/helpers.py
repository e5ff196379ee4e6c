"""Builders shared by engine tests: a RunContext over a scripted LLM, a recording sink, a fake clock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.engine.calls import make_caller
from agents.engine.events import RecordingSink
from agents.engine.llm import Script, ScriptedGateway
from agents.engine.prompts import PromptBook
from agents.engine.runtime import (
    ApprovalDecision,
    AutoApprove,
    CancelToken,
    EventEmitter,
    FakeClock,
    HumanInterface,
    PlanRevision,
    RunContext,
    Usage,
)
from agents.engine.specs import AgentSpec, ApprovedStep, Budget, LLMSpec, TaskSpec, ToolRef


class ScriptedHuman:
    """A person who answers from lists, in order, and records what they were asked.

    ``feedback`` items are returned by ``request_feedback`` (an empty string accepts; running out
    accepts too); ``approvals`` items by ``request_approval`` (running out approves).
    """

    def __init__(
        self,
        *,
        feedback: Sequence[str] = (),
        approvals: Sequence[ApprovalDecision | bool] = (),
        plan_changes: Sequence[Sequence[str] | None] = (),
    ) -> None:
        self.feedback = list(feedback)
        self.approvals = [
            a if isinstance(a, ApprovalDecision) else ApprovalDecision(approve=a) for a in approvals
        ]
        self.plan_changes = list(plan_changes)  # the steps approved per proposal (None: as proposed)
        self.plan_change_requests: list[dict[str, Any]] = []
        self.feedback_requests: list[tuple[str, str]] = []
        self.approval_requests: list[tuple[str, str, dict[str, Any]]] = []

    async def request_feedback(self, *, task_key: str, answer: str) -> str:
        self.feedback_requests.append((task_key, answer))
        return self.feedback.pop(0) if self.feedback else ""

    async def request_approval(
        self, *, approval_id: str, tool: str, args: dict[str, Any]
    ) -> ApprovalDecision:
        self.approval_requests.append((approval_id, tool, args))
        return self.approvals.pop(0) if self.approvals else ApprovalDecision(approve=True)

    async def request_plan_change(
        self, *, task_key: str, reason: str, done_step_ids: Sequence[str], proposed: Sequence[str]
    ) -> PlanRevision:
        asked = {"task_key": task_key, "reason": reason, "done": list(done_step_ids), "proposed": list(proposed)}
        self.plan_change_requests.append(asked)
        chosen = self.plan_changes.pop(0) if self.plan_changes else None
        texts = proposed if chosen is None else chosen
        n = len(self.plan_change_requests)
        steps = [ApprovedStep(id=f"{task_key}.p{100 * n + i}", text=t) for i, t in enumerate(texts, start=1)]
        return PlanRevision(steps, {"version": n + 1})


def make_llm(**kw: Any) -> LLMSpec:
    """A test LLM: no streaming, no retries, so scripts map one-to-one onto calls."""
    values: dict[str, Any] = {
        "key": "test-llm",
        "model": "test/model",
        "max_retries": 0,
        "stream": False,
    }
    values.update(kw)
    return LLMSpec(**values)


def make_agent(*tools: str | ToolRef, llm: LLMSpec | None = None, **kw: Any) -> AgentSpec:
    """An agent with the named catalogue tools (strings become plain ``ToolRef``s)."""
    values: dict[str, Any] = {
        "key": "agent-1",
        "name": "Researcher",
        "role": "Researcher",
        "goal": "Find facts",
        "backstory": "You are careful.",
        "llm": llm or make_llm(),
        "tools": tuple(t if isinstance(t, ToolRef) else ToolRef(name=t) for t in tools),
    }
    values.update(kw)
    return AgentSpec(**values)


def make_task(description: str = "Add two numbers", **kw: Any) -> TaskSpec:
    values: dict[str, Any] = {
        "key": "task-1",
        "description": description,
        "expected_output": "The sum",
    }
    values.update(kw)
    return TaskSpec(**values)


def make_ctx(
    script: Sequence[Script] = (),
    *,
    default: Script | None = None,
    human: HumanInterface | None = None,
    tools: Any = None,
    prompts: PromptBook | None = None,
    budget: Budget | None = None,
    clock: FakeClock | None = None,
    task_id: str | None = None,
    gateway: ScriptedGateway | None = None,
) -> tuple[RunContext, ScriptedGateway, RecordingSink, FakeClock]:
    """A RunContext wired to a ``ScriptedGateway`` through the real ``LLMCaller``.

    ``tools`` is a ``ToolRegistry`` (``None`` = the built-in catalogue); ``budget`` is the
    crew-level budget the caller enforces; ``gateway`` replaces the one built from ``script``
    (a subclass that hangs or checks requests, say).
    """
    gateway = gateway if gateway is not None else ScriptedGateway(script, default=default)
    sink = RecordingSink()
    clock = clock or FakeClock()
    cancel = CancelToken()
    usage = Usage()
    emit = EventEmitter(sink=sink, clock=clock, task_id=task_id)
    caller = make_caller(
        gateway, emit, cancel=cancel, clock=clock, usage=usage, budget=budget or Budget()
    )
    ctx = RunContext(
        llm=caller,
        emit=emit,
        cancel=cancel,
        clock=clock,
        human=human or AutoApprove(),
        prompts=prompts,
        tools=tools,
        usage=usage,
    )
    return ctx, gateway, sink, clock


def non_llm_types(sink: RecordingSink) -> list[str]:
    """Event types without the ``llm.*`` noise and the loop's turn counter (``react.turn``), for
    asserting what the agent itself did."""
    return [t for t in sink.types if not t.startswith("llm.") and t != "react.turn"]
