"""The agent entry point: usage, retries, the execution time limit and human feedback."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.engine.agent import AgentError, AgentResult, run_agent
from agents.engine.calls import BudgetExceeded
from agents.engine.llm import (
    ContextLengthError,
    DeltaCallback,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryableLLMError,
    ScriptedGateway,
    tool_call_response,
)
from agents.engine.prompts import PromptBook
from agents.engine.runtime import ApprovalDecision, Cancelled
from agents.engine.specs import Budget, ToolRef
from agents.engine.tools import Tool, ToolRegistry
from tests.agents.engine.helpers import (
    ScriptedHuman,
    make_agent,
    make_ctx,
    make_llm,
    make_task,
    non_llm_types,
)

PROMPTS = PromptBook()


async def test_react_agent_returns_its_answer_and_its_own_usage() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [tool_call_response("calculator", {"expression": "40+2"}), "Final Answer: 42"]
    )
    result = await run_agent(ctx, make_agent("calculator"), make_task())

    assert isinstance(result, AgentResult)
    assert result.output == "42"
    assert result.usage.llm_calls == 2
    assert result.usage.tool_calls == 1
    assert result.usage.prompt_tokens == ctx.usage.prompt_tokens > 0
    assert gateway.purposes() == ["react", "react"]
    assert non_llm_types(sink) == ["tool.started", "tool.completed"]


async def test_agent_budget_is_enforced_against_the_agents_own_usage() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [tool_call_response("calculator", {"expression": "1+1"}), "unused"]
    )
    agent = make_agent("calculator", budget=Budget(max_tool_calls=0))
    with pytest.raises(BudgetExceeded):
        await run_agent(ctx, agent, make_task())
    assert gateway.calls == 1  # not retried
    assert sink.of_type("budget.exceeded")[0].data["limit"] == "max_tool_calls"


# --- retries ------------------------------------------------------------------------------------


# With one turn, an empty reply and an empty forced answer leave the pass without an answer.
NO_ANSWER = ["", ""]


async def test_a_pass_without_an_answer_is_retried_up_to_max_retry_limit() -> None:
    ctx, gateway, _, _ = make_ctx([*NO_ANSWER, *NO_ANSWER, "", "Final Answer: ok"])
    result = await run_agent(ctx, make_agent("calculator", max_iter=1, max_retry_limit=2), make_task())
    assert result.output == "ok"
    assert gateway.calls == 6


async def test_the_agent_fails_clearly_once_retries_are_spent() -> None:
    ctx, gateway, _, _ = make_ctx(NO_ANSWER * 2)
    with pytest.raises(AgentError) as info:
        await run_agent(ctx, make_agent("calculator", max_iter=1, max_retry_limit=1), make_task())
    assert str(info.value) == "Agent 'Researcher' failed after 2 attempts: the model returned no final answer"
    assert isinstance(info.value.__cause__, LLMError)
    assert gateway.calls == 4


async def test_max_retry_limit_zero_means_one_attempt() -> None:
    ctx, gateway, _, _ = make_ctx(NO_ANSWER)
    with pytest.raises(AgentError, match="^Agent 'Researcher' failed: the model returned no final answer$"):
        await run_agent(ctx, make_agent("calculator", max_iter=1, max_retry_limit=0), make_task())
    assert gateway.calls == 2


async def test_a_failed_llm_call_is_retried_by_its_llm_only_not_again_by_the_agent() -> None:
    ctx, gateway, sink, _ = make_ctx(default=RetryableLLMError("server busy"))
    agent = make_agent(llm=make_llm(max_retries=3), max_retry_limit=2)
    with pytest.raises(AgentError) as info:
        await run_agent(ctx, agent, make_task())
    assert str(info.value) == "Agent 'Researcher' failed: server busy"
    assert gateway.calls == 4  # 1 + max_retries, not (1 + max_retries) x (1 + max_retry_limit)
    assert sink.types == ["llm.started", "llm.failed"] * 4


async def test_a_call_that_would_fail_alike_again_is_made_once() -> None:
    ctx, gateway, _, _ = make_ctx(default=LLMError("provider said no"))
    agent = make_agent(llm=make_llm(max_retries=3), max_retry_limit=2)
    with pytest.raises(AgentError, match="^Agent 'Researcher' failed: provider said no$"):
        await run_agent(ctx, agent, make_task())
    assert gateway.calls == 1


async def test_a_context_window_failure_is_not_retried() -> None:
    ctx, gateway, _, _ = make_ctx([ContextLengthError("too long")] * 3)
    agent = make_agent(respect_context_window=False, max_retry_limit=2)
    with pytest.raises(AgentError, match="respect_context_window is off"):
        await run_agent(ctx, agent, make_task())
    assert gateway.calls == 1


async def test_cancellation_is_not_retried() -> None:
    ctx, gateway, _, _ = make_ctx()

    def cancel_then_fail(request: LLMRequest) -> str:
        ctx.cancel.cancel("stop")
        raise LLMError("failed while stopping")

    gateway.script = [cancel_then_fail, "Final Answer: never"]
    with pytest.raises(Cancelled):
        await run_agent(ctx, make_agent(max_retry_limit=3), make_task())
    assert gateway.calls == 1


# --- max_execution_time -------------------------------------------------------------------------


async def test_max_execution_time_fails_the_task_before_the_next_call() -> None:
    ctx, gateway, _, clock = make_ctx()

    def slow(request: LLMRequest) -> LLMResponse:
        clock.advance(31)
        return tool_call_response("calculator", {"expression": "1+1"})

    gateway.script = [slow, "Final Answer: too late"]
    agent = make_agent("calculator", max_execution_time=30, max_retry_limit=2)
    with pytest.raises(AgentError) as info:
        await run_agent(ctx, agent, make_task())
    assert (
        str(info.value) == "Agent 'Researcher' exceeded its maximum execution time of 30 seconds."
    )
    assert gateway.calls == 1  # neither another turn nor a retry


class HangingGateway(ScriptedGateway):
    """Never answers; remembers whether its call was cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = asyncio.Event()

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        self.requests.append(request)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


async def test_max_execution_time_interrupts_a_call_in_flight() -> None:
    gateway = HangingGateway()
    ctx, _, _, _ = make_ctx(gateway=gateway)
    agent = make_agent(max_execution_time=0.05)
    with pytest.raises(AgentError, match="exceeded its maximum execution time of 0.05 seconds"):
        await asyncio.wait_for(run_agent(ctx, agent, make_task()), timeout=5)
    await asyncio.wait_for(gateway.cancelled.wait(), timeout=1)  # the call did not linger
    assert gateway.calls == 1


# --- human feedback -----------------------------------------------------------------------------


async def test_feedback_starts_another_pass_and_an_empty_reply_accepts() -> None:
    human = ScriptedHuman(feedback=["Use euros, please.", ""])
    ctx, gateway, sink, _ = make_ctx(
        ["Final Answer: It costs 10 dollars.", "Final Answer: It costs 9 euros."], human=human
    )
    task = make_task(human_input=True)
    result = await run_agent(ctx, make_agent(), task)

    assert result.output == "It costs 9 euros."
    assert result.usage.llm_calls == 2
    assert non_llm_types(sink) == [
        "feedback.requested",
        "feedback.received",
        "feedback.requested",
        "feedback.received",
    ]
    feedback_events = sink.of_type("feedback.requested", "feedback.received")
    assert [e.data for e in feedback_events] == [
        {"answer": "It costs 10 dollars."},
        {"text": "Use euros, please."},
        {"answer": "It costs 9 euros."},
        {"text": ""},
    ]
    assert human.feedback_requests == [
        ("task-1", "It costs 10 dollars."),
        ("task-1", "It costs 9 euros."),
    ]
    second = gateway.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": "Final Answer: It costs 10 dollars."}
    assert second[-1] == {
        "role": "user",
        "content": PROMPTS.render("human_feedback", feedback="Use euros, please."),
    }
    assert second[:2] == gateway.requests[0].messages  # the same conversation, continued


async def test_empty_feedback_accepts_the_first_answer() -> None:
    human = ScriptedHuman(feedback=[""])
    ctx, gateway, sink, _ = make_ctx(["Final Answer: fine"], human=human)
    result = await run_agent(ctx, make_agent(), make_task(human_input=True))
    assert result.output == "fine"
    assert gateway.calls == 1
    assert non_llm_types(sink) == ["feedback.requested", "feedback.received"]


async def test_tasks_without_human_input_never_ask() -> None:
    human = ScriptedHuman(feedback=["should not be asked"])
    ctx, _, sink, _ = make_ctx(["Final Answer: fine"], human=human)
    await run_agent(ctx, make_agent(), make_task())
    assert human.feedback_requests == []
    assert non_llm_types(sink) == []


async def test_waiting_for_feedback_does_not_use_up_the_execution_time() -> None:
    ctx, gateway, _, clock = make_ctx(["Final Answer: v1", "Final Answer: v2"])

    class SlowReviewer(ScriptedHuman):
        async def request_feedback(self, *, task_key: str, answer: str) -> str:
            clock.advance(3600)  # an hour to reply
            return await super().request_feedback(task_key=task_key, answer=answer)

    ctx.human = SlowReviewer(feedback=["shorter", ""])
    agent = make_agent(max_execution_time=60)
    result = await run_agent(ctx, agent, make_task(human_input=True))
    assert result.output == "v2"
    assert gateway.calls == 2


async def test_waiting_for_a_tool_approval_does_not_use_up_the_execution_time() -> None:
    ctx, gateway, _, clock = make_ctx(
        [tool_call_response("calculator", {"expression": "40+2"}), "Final Answer: 42"]
    )

    class SlowApprover(ScriptedHuman):
        async def request_approval(self, **kw: Any) -> ApprovalDecision:
            clock.advance(3600)  # an hour to approve
            await asyncio.sleep(0.3)  # and longer than the whole limit on the loop's clock too
            return await super().request_approval(**kw)

    ctx.human = human = SlowApprover()
    agent = make_agent(ToolRef(name="calculator", needs_approval=True), max_execution_time=0.2)
    result = await asyncio.wait_for(run_agent(ctx, agent, make_task()), 5)
    assert result.output == "42"
    assert len(human.approval_requests) == 1
    assert gateway.calls == 2


async def test_the_agents_own_time_still_counts_after_an_approval() -> None:
    ctx, gateway, _, clock = make_ctx()

    def slow(request: LLMRequest) -> LLMResponse:
        clock.advance(20)
        return tool_call_response("calculator", {"expression": "1+1"})

    class SlowApprover(ScriptedHuman):
        async def request_approval(self, **kw: Any) -> ApprovalDecision:
            clock.advance(3600)
            return await super().request_approval(**kw)

    gateway.script = [slow, slow, "Final Answer: too late"]
    ctx.human = SlowApprover()
    agent = make_agent(ToolRef(name="calculator", needs_approval=True), max_execution_time=30)
    with pytest.raises(AgentError, match="exceeded its maximum execution time of 30 seconds"):
        await run_agent(ctx, agent, make_task())
    assert gateway.calls == 2  # 20 s + 20 s of its own: no third call


async def test_cancel_while_waiting_for_feedback_stops_the_agent() -> None:
    ctx, gateway, _, _ = make_ctx(["Final Answer: draft"])

    class Gone(ScriptedHuman):
        async def request_feedback(self, *, task_key: str, answer: str) -> str:
            ctx.cancel.cancel("run cancelled")
            await asyncio.Event().wait()
            return ""

    ctx.human = Gone()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(run_agent(ctx, make_agent(), make_task(human_input=True)), 5)
    assert gateway.calls == 1


async def test_a_tool_that_runs_a_failing_agent_is_not_retried_by_the_executor() -> None:
    coworker_runs: list[int] = []
    ctx, gateway, sink, _ = make_ctx()

    async def delegate(args: dict[str, object]) -> str:
        coworker_runs.append(1)
        raise AgentError("Agent 'Writer' failed after 3 attempts: provider down")

    ctx.tools = ToolRegistry(
        [
            Tool(
                name="delegate",
                description="Delegate.",
                args_schema={"type": "object"},
                run=delegate,
            )
        ]
    )
    gateway.script = [tool_call_response("delegate", {}), "Final Answer: did it myself"]
    result = await run_agent(ctx, make_agent("delegate"), make_task())
    assert result.output == "did it myself"
    assert coworker_runs == [1]
    assert sink.of_type("tool.failed")[0].data["attempts"] == 1
