"""LLMCaller: rate limits, budgets, cancellation, retries and the exact events of every call."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from agents.engine.calls import (
    DEFAULT_MAX_COMPLETION_TOKENS,
    MIN_ANSWER_TOKENS,
    PURPOSE_MAX_COMPLETION_TOKENS,
    BudgetExceeded,
    BudgetScope,
    LLMCaller,
    RateLimiters,
    make_caller,
)
from agents.engine.capabilities import Capabilities
from agents.engine.events import RecordingSink
from agents.engine.llm import (
    FormUnsupportedError,
    LLMError,
    LLMRequest,
    LLMResponse,
    RetryableLLMError,
    ScriptedGateway,
)
from agents.engine.runtime import Cancelled, CancelToken, EventEmitter, FakeClock, Usage
from agents.engine.specs import Budget, LLMSpec
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture


def make_llm(**kw: Any) -> LLMSpec:
    values: dict[str, Any] = {"key": "llm-1", "model": "test/model", "max_retries": 0}
    values.update(kw)
    return LLMSpec(**values)


def ask(llm: LLMSpec | None = None, text: str = "hi", **kw: Any) -> LLMRequest:
    return LLMRequest(
        llm=llm or make_llm(), messages=[{"role": "user", "content": text}], purpose="react", **kw
    )


def answer(
    content: str = "ok", prompt: int = 10, completion: int = 5, cost: float = 0.0
) -> LLMResponse:
    return LLMResponse(
        content=content, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost
    )


def caller_for(
    gateway: ScriptedGateway,
    *,
    clock: FakeClock | None = None,
    sink: RecordingSink | None = None,
    limiters: RateLimiters | None = None,
    cancel: CancelToken | None = None,
    budget: Budget | None = None,
) -> LLMCaller:
    clock = clock or FakeClock()
    return make_caller(
        gateway,
        EventEmitter(sink=sink or RecordingSink(), clock=clock),
        cancel=cancel or CancelToken(),
        clock=clock,
        usage=Usage(),
        limiters=limiters,
        budget=budget,
    )


async def test_a_call_emits_started_then_completed_with_usage_cost_and_latency() -> None:
    clock, sink = FakeClock(), RecordingSink()

    def slow(request: LLMRequest) -> LLMResponse:
        clock.advance(1.25)  # the call "takes" 1.25 s on the fake clock
        return answer("done", prompt=12, completion=4, cost=0.003)

    caller = caller_for(ScriptedGateway([slow]), clock=clock, sink=sink)
    response = await caller.call(ask(), step_id="s1")
    assert response.content == "done"
    assert [(e.type, e.data, e.step_id) for e in sink.events] == [
        ("llm.started", {"model": "test/model", "purpose": "react"}, "s1"),
        (
            "llm.completed",
            {
                "model": "test/model",
                "purpose": "react",
                "prompt_tokens": 12,
                "completion_tokens": 4,
                "cost_usd": 0.003,
                "latency_ms": 1250,
            },
            "s1",
        ),
    ]
    assert caller.usage == Usage(prompt_tokens=12, completion_tokens=4, cost_usd=0.003, llm_calls=1)


async def test_rate_limiter_waits_only_until_the_oldest_call_leaves_the_window() -> None:
    clock = FakeClock()
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway, clock=clock)
    llm = make_llm(rpm=2)
    await caller.call(ask(llm))  # t=0
    clock.advance(10)
    await caller.call(ask(llm))  # t=10: the window holds two calls now
    clock.advance(5)
    await caller.call(ask(llm))  # t=15: must wait until t=60, when the first call leaves
    assert clock.slept == [45.0]
    assert clock.now == 60
    await caller.call(ask(llm))  # t=60: window [10, 60]: wait until t=70
    assert clock.slept == [45.0, 10.0]
    assert gateway.calls == 4


async def test_calls_within_the_limit_never_wait() -> None:
    clock = FakeClock()
    caller = caller_for(ScriptedGateway(default="ok"), clock=clock)
    for _ in range(5):
        await caller.call(ask(make_llm(rpm=5)))
    assert clock.slept == []


async def test_one_limiter_is_shared_by_every_caller_holding_the_same_limiters() -> None:
    clock = FakeClock()
    limiters = RateLimiters(clock)
    first = caller_for(ScriptedGateway(default="a"), clock=clock, limiters=limiters)
    second = caller_for(ScriptedGateway(default="b"), clock=clock, limiters=limiters)
    other_llm = caller_for(ScriptedGateway(default="c"), clock=clock, limiters=limiters)
    await first.call(ask(make_llm(rpm=1)))
    await other_llm.call(ask(make_llm(key="llm-2", rpm=1)))  # another LLM has its own window
    assert clock.slept == []
    await second.call(ask(make_llm(rpm=1)))
    assert clock.slept == [60.0]


async def test_separate_limiters_do_not_see_each_others_calls() -> None:
    clock = FakeClock()
    first = caller_for(ScriptedGateway(default="a"), clock=clock)
    second = caller_for(ScriptedGateway(default="b"), clock=clock)
    await first.call(ask(make_llm(rpm=1)))
    await second.call(ask(make_llm(rpm=1)))
    assert clock.slept == []


async def test_max_tokens_stops_the_next_call_with_a_budget_event() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(default=answer(prompt=60, completion=40))
    caller = caller_for(gateway, sink=sink, budget=Budget(max_tokens=100))
    await caller.call(ask())
    with pytest.raises(BudgetExceeded) as raised:
        await caller.call(ask())
    assert (raised.value.limit, raised.value.used, raised.value.allowed) == ("max_tokens", 100, 100)
    assert gateway.calls == 1
    assert sink.types == ["llm.started", "llm.completed", "budget.exceeded"]
    assert sink.events[-1].data == {"limit": "max_tokens", "used": 100, "allowed": 100}


async def test_max_cost_stops_the_next_call() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(default=answer(cost=0.02))
    caller = caller_for(gateway, sink=sink, budget=Budget(max_cost_usd=0.03))
    await caller.call(ask())
    await caller.call(ask())  # 0.02 spent < 0.03: allowed
    with pytest.raises(BudgetExceeded, match="max_cost_usd"):
        await caller.call(ask())
    assert gateway.calls == 2
    assert sink.events[-1].type == "budget.exceeded"
    assert sink.events[-1].data["used"] == pytest.approx(0.04)


async def test_a_cost_budget_refuses_a_call_whose_worst_case_could_cross_it() -> None:
    sink = RecordingSink()
    # 0.1 and 0.2 dollars per 1k tokens: a 100-token prompt ($0.01) and a 50-token answer ($0.01).
    llm = make_llm(input_price_per_1k=0.1, output_price_per_1k=0.2, params={"max_tokens": 50})
    gateway = ScriptedGateway(default=answer(cost=0.0123))
    caller = caller_for(gateway, sink=sink, budget=Budget(max_cost_usd=0.03))
    await caller.call(ask(llm, text="x" * 400))  # at worst $0.02 of $0.03: made

    with pytest.raises(BudgetExceeded) as raised:
        await caller.call(ask(llm, text="x" * 400))  # $0.0123 used + up to $0.02 > $0.03

    assert gateway.calls == 1
    assert str(raised.value) == (
        "budget exceeded: max_cost_usd used $0.0123 of $0.0300; the next call could cost up to $0.0200"
    )
    assert sink.types == ["llm.started", "llm.completed", "budget.exceeded"]
    assert sink.events[-1].data == {"limit": "max_cost_usd", "used": 0.0123, "allowed": 0.03, "next_call_usd": 0.02}


@pytest.mark.parametrize(
    ("params", "cap", "tokens"),
    [
        ({}, None, DEFAULT_MAX_COMPLETION_TOKENS),
        ({"max_tokens": 300}, None, 300),
        ({"max_completion_tokens": 200}, None, 200),
        ({"max_tokens": 300}, 100, 100),  # the request's cap, when lower, is what is sent
        ({"max_tokens": 30}, 100, 30),
    ],
)
async def test_a_calls_worst_case_prices_its_longest_answer(params: dict[str, Any], cap: int | None, tokens: int) -> None:
    llm = make_llm(input_price_per_1k=0.0, output_price_per_1k=1.0, params=params)
    caller = caller_for(ScriptedGateway(), budget=Budget(max_cost_usd=1000.0))

    worst = await caller.worst_cost(ask(llm, max_tokens=cap), None, 1)

    assert worst == pytest.approx(tokens / 1000)


@pytest.mark.parametrize(("params", "sent"), [({}, DEFAULT_MAX_COMPLETION_TOKENS), ({"max_tokens": 300}, 300)])
async def test_under_a_cost_budget_the_call_is_sent_capped_at_the_answer_length_it_was_priced_for(
    params: dict[str, Any], sent: int
) -> None:
    llm = make_llm(input_price_per_1k=0.0, output_price_per_1k=1.0, params=params)
    gateway = ScriptedGateway(default="ok")
    await caller_for(gateway, budget=Budget(max_cost_usd=1000.0)).call(ask(llm))
    await caller_for(gateway).call(ask(llm))  # no budget: the same cap, the purpose's default

    assert [r.max_tokens for r in gateway.requests] == [sent, sent]


class PricedGateway(ScriptedGateway):
    """A scripted LLM whose gateway knows the model's prices (as litellm's map does)."""

    async def prices(self, llm: LLMSpec) -> tuple[float, float] | None:
        return (0.0, 0.001) if llm.model == "test/priced" else None


async def test_an_llm_without_prices_of_its_own_is_priced_by_the_gateway() -> None:
    sink = RecordingSink()
    gateway = PricedGateway(default="ok")
    caller = caller_for(gateway, sink=sink, budget=Budget(max_cost_usd=1.0))

    await caller.call(ask(make_llm(model="test/unpriced")))  # no price known: only spending stops it
    with pytest.raises(BudgetExceeded, match=r"the next call could cost up to \$4\.0960"):
        await caller.call(ask(make_llm(model="test/priced")))  # 4096 answer tokens at $0.001

    assert gateway.calls == 1


async def test_max_input_tokens_counts_the_prompt_about_to_be_sent() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway, sink=sink)
    agent = BudgetScope(Budget(max_input_tokens=20), Usage(), "agent")
    with pytest.raises(BudgetExceeded) as raised:
        await caller.call(ask(text="x" * 100), scope=agent)  # ~26 tokens > 20
    assert raised.value.limit == "max_input_tokens"
    assert gateway.calls == 0
    assert sink.types == ["budget.exceeded"]
    await caller.call(ask(text="x" * 40), scope=agent)  # ~11 tokens: fits
    assert gateway.calls == 1


async def test_usage_counts_against_the_run_and_the_agent_scope() -> None:
    caller = caller_for(ScriptedGateway(default=answer(prompt=7, completion=3, cost=0.5)))
    agent = BudgetScope(Budget(), Usage(), "agent")
    await caller.call(ask(), scope=agent)
    await caller.call(ask())
    assert (caller.usage.total_tokens, caller.usage.llm_calls) == (20, 2)
    assert (agent.usage.total_tokens, agent.usage.llm_calls, agent.usage.cost_usd) == (10, 1, 0.5)


async def test_tool_call_budget_is_checked_before_counting() -> None:
    sink = RecordingSink()
    caller = caller_for(ScriptedGateway(), sink=sink)
    agent = BudgetScope(Budget(max_tool_calls=2), Usage(), "agent")
    await caller.count_tool_call(agent)
    await caller.count_tool_call(agent)
    with pytest.raises(BudgetExceeded, match="max_tool_calls"):
        await caller.count_tool_call(agent)
    assert agent.usage.tool_calls == 2
    assert sink.types == ["budget.exceeded"]


async def test_a_cancelled_run_never_reaches_the_gateway() -> None:
    sink, cancel = RecordingSink(), CancelToken()
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway, sink=sink, cancel=cancel)
    cancel.cancel("stopped by user")
    with pytest.raises(Cancelled, match="stopped by user"):
        await caller.call(ask())
    with pytest.raises(Cancelled):
        await caller.count_tool_call()
    assert gateway.calls == 0
    assert sink.events == []


async def test_cancel_while_waiting_for_the_rate_limiter_sends_nothing() -> None:
    clock, cancel = FakeClock(), CancelToken()
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway, clock=clock, cancel=cancel)
    await caller.call(ask(make_llm(rpm=1)))

    async def sleep_then_cancel(seconds: float) -> None:
        cancel.cancel()  # the user cancels while the call waits for a free slot
        await FakeClock.sleep(clock, seconds)

    clock.sleep = sleep_then_cancel  # type: ignore[method-assign]
    with pytest.raises(Cancelled):
        await caller.call(ask(make_llm(rpm=1)))
    assert gateway.calls == 1


async def test_retryable_errors_back_off_exponentially_then_succeed() -> None:
    clock, sink = FakeClock(), RecordingSink()
    gateway = ScriptedGateway(
        [RetryableLLMError("503 busy"), RetryableLLMError("503 busy"), answer("finally")]
    )
    caller = caller_for(gateway, clock=clock, sink=sink)
    response = await caller.call(ask(make_llm(max_retries=3)))
    assert response.content == "finally"
    assert clock.slept == [0.5, 1.0]
    assert sink.types == [
        "llm.started",
        "llm.failed",
        "llm.started",
        "llm.failed",
        "llm.started",
        "llm.completed",
    ]
    assert [e.data["retrying"] for e in sink.of_type("llm.failed")] == [True, True]
    assert [e.data["attempt"] for e in sink.of_type("llm.failed")] == [1, 2]
    assert caller.usage.llm_calls == 1


async def test_retry_after_wins_over_backoff_and_the_cap_bounds_it() -> None:
    clock = FakeClock()
    gateway = ScriptedGateway(
        [
            RetryableLLMError("429", retry_after=3),
            RetryableLLMError("429", retry_after=600),
            "ok",
        ]
    )
    caller = caller_for(gateway, clock=clock)
    await caller.call(ask(make_llm(max_retries=2)))
    assert clock.slept == [3, 20.0]


async def test_exhausted_retries_raise_the_last_error() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway([RetryableLLMError("down"), RetryableLLMError("still down")])
    caller = caller_for(gateway, sink=sink)
    with pytest.raises(RetryableLLMError, match="still down"):
        await caller.call(ask(make_llm(max_retries=1)))
    assert [e.data["retrying"] for e in sink.of_type("llm.failed")] == [True, False]
    assert gateway.calls == 2


async def test_a_permanent_error_is_not_retried() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway([LLMError("invalid request")])
    caller = caller_for(gateway, sink=sink)
    with pytest.raises(LLMError, match="invalid request"):
        await caller.call(ask(make_llm(max_retries=5)))
    assert gateway.calls == 1
    assert sink.types == ["llm.started", "llm.failed"]
    assert sink.events[-1].data["retrying"] is False


async def test_a_token_budget_caps_the_answer_to_what_it_has_left() -> None:
    gateway = ScriptedGateway(default=answer(prompt=50, completion=10))
    caller = caller_for(gateway, budget=Budget(max_tokens=100))
    await caller.call(ask(text="x" * 40))  # estimated at 11 prompt tokens
    await caller.call(ask(text="x" * 40), scope=BudgetScope(Budget(max_tokens=1000), Usage(), "agent"))
    assert [r.max_tokens for r in gateway.requests] == [100 - 11, 100 - 60 - 11]


async def test_a_prompt_that_leaves_too_little_for_an_answer_stops_the_run_before_the_call() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(default=answer(prompt=60, completion=10))
    caller = caller_for(gateway, sink=sink, budget=Budget(max_tokens=100))
    await caller.call(ask())  # 70 of 100 used

    with pytest.raises(BudgetExceeded) as raised:
        await caller.call(ask(text="x" * 60))  # estimated at 16: leaves 14, under the floor
    assert gateway.calls == 1  # the prompt is not paid for a cut-off answer
    assert (raised.value.limit, raised.value.used, raised.value.allowed) == ("max_tokens", 86, 100)
    assert sink.types[-1] == "budget.exceeded"
    assert sink.events[-1].data == {"limit": "max_tokens", "used": 86, "allowed": 100}

    await caller.call(ask(text="x" * 52))  # estimated at 14: leaves exactly the floor
    assert gateway.requests[-1].max_tokens == MIN_ANSWER_TOKENS == 16


async def test_without_any_cap_the_answer_is_capped_by_what_the_call_is_for() -> None:
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway)
    for purpose in ("observe", "agent_plan", "react", "something_new"):
        await caller.call(LLMRequest(llm=make_llm(), messages=[{"role": "user", "content": "hi"}], purpose=purpose))
    await caller.call(ask(make_llm(params={"max_tokens": 100})))  # the LLM's own cap wins
    await caller.call(ask(max_tokens=50))  # and the request's

    assert [r.max_tokens for r in gateway.requests] == [
        PURPOSE_MAX_COMPLETION_TOKENS["observe"], PURPOSE_MAX_COMPLETION_TOKENS["agent_plan"],
        PURPOSE_MAX_COMPLETION_TOKENS["react"], DEFAULT_MAX_COMPLETION_TOKENS, 100, 50,
    ]
    assert PURPOSE_MAX_COMPLETION_TOKENS["observe"] < PURPOSE_MAX_COMPLETION_TOKENS["agent_plan"] <= PURPOSE_MAX_COMPLETION_TOKENS["react"]


async def test_a_streamed_call_without_a_callback_emits_delta_events() -> None:
    sink = RecordingSink()
    caller = caller_for(ScriptedGateway(["streamed text"]), sink=sink)
    await caller.call(ask(stream=True))
    assert sink.types == ["llm.started", "llm.delta", "llm.completed"]
    assert sink.of_type("llm.delta")[0].data == {"text": "streamed text"}


async def test_a_streamed_call_with_a_callback_leaves_deltas_to_it() -> None:
    sink, seen = RecordingSink(), []

    async def on_delta(text: str) -> None:
        seen.append(text)

    caller = caller_for(ScriptedGateway(["streamed text"]), sink=sink)
    await caller.call(ask(stream=True), on_delta=on_delta)
    assert seen == ["streamed text"]
    assert "llm.delta" not in sink.types


async def test_a_call_nobody_follows_still_streams_so_a_stop_can_close_it_but_emits_no_deltas() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(["whole answer"])
    caller = caller_for(gateway, sink=sink)
    caller.stream_gate = lambda: False
    response = await caller.call(ask(stream=True))
    assert response.content == "whole answer"
    assert gateway.requests[0].stream is True
    assert sink.types == ["llm.started", "llm.completed"]


async def test_every_call_streams_unless_its_llm_refuses_to() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(default="answer")
    caller = caller_for(gateway, sink=sink)
    refusing = make_llm(key="llm-2")
    await caller.capabilities.learn(refusing, "stream")
    await caller.call(ask())  # asks for no deltas: streamed all the same
    await caller.call(ask(make_llm(stream=False), stream=True))  # set up not to stream
    await caller.call(ask(refusing, stream=True))  # refused streaming before

    assert [r.stream for r in gateway.requests] == [True, False, False]
    assert "llm.delta" not in sink.types


async def test_an_llm_that_refuses_to_stream_is_asked_again_unstreamed_and_never_streamed_again() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(
        [FormUnsupportedError("streaming is not supported", form="stream"), "first", "second"]
    )
    caller = caller_for(gateway, sink=sink)  # max_retries=0: the second try is not a retry
    assert (await caller.call(ask(stream=True))).content == "first"
    await caller.call(ask(stream=True))

    assert [r.stream for r in gateway.requests] == [True, False, False]
    assert caller.capabilities.refuses(make_llm(), "stream")
    assert sink.of_type("llm.failed")[0].data["retrying"] is True


async def test_the_stream_gate_is_asked_before_every_call() -> None:
    sink, followed = RecordingSink(), [False, True]
    gateway = ScriptedGateway(["first", "second"])
    caller = caller_for(gateway, sink=sink)
    caller.stream_gate = lambda: followed.pop(0)
    await caller.call(ask(stream=True))
    await caller.call(ask(stream=True))
    assert [r.stream for r in gateway.requests] == [True, True]
    assert sink.types == ["llm.started", "llm.completed", "llm.started", "llm.delta", "llm.completed"]
    assert sink.of_type("llm.delta")[0].data == {"text": "second"}


async def test_a_callers_own_delta_callback_keeps_the_stream_whatever_the_gate_says() -> None:
    seen: list[str] = []

    async def on_delta(text: str) -> None:
        seen.append(text)

    gateway = ScriptedGateway(["streamed text"])
    caller = caller_for(gateway)
    caller.stream_gate = lambda: False
    await caller.call(ask(stream=True), on_delta=on_delta)
    assert gateway.requests[0].stream is True
    assert seen == ["streamed text"]


async def test_crew_and_agent_rpm_limits_apply_on_top_of_the_llm_limit() -> None:
    from agents.engine.runtime import FakeClock as _Clock
    from tests.agents.engine.helpers import make_agent, make_ctx, make_task

    clock = _Clock()
    ctx, gateway, _sink, _ = make_ctx(default="Final Answer: ok", clock=clock)
    ctx.llm = ctx.llm.with_rpm("crew:1", 2)
    from agents.engine.agent import run_agent

    for _ in range(3):
        await run_agent(ctx, make_agent(), make_task())
    assert gateway.calls == 3
    assert clock.slept == [60.0]  # the third call waited for the crew's window, only once

    clock2 = _Clock()
    ctx2, gateway2, _s, _ = make_ctx(default="Final Answer: ok", clock=clock2)
    for _ in range(2):
        await run_agent(ctx2, make_agent(max_rpm=1), make_task())
    assert gateway2.calls == 2 and clock2.slept == [60.0]  # the agent's own max_rpm


async def test_a_cancel_from_another_thread_just_before_the_race_waits_still_abandons_the_call() -> None:
    token = CancelToken()

    class CancelledOnAdd(set):  # the other thread's cancel lands after the check, before the waiter
        def add(self, item: object) -> None:
            other = threading.Thread(target=token.cancel, args=("cancelled",))
            other.start()
            other.join()
            super().add(item)

    token._waiters = CancelledOnAdd()
    with pytest.raises(Cancelled):
        # Without a second look after the waiter is added, nothing wakes it: a 30 s call runs on.
        await asyncio.wait_for(token.race(asyncio.sleep(30)), timeout=3)


async def test_the_answer_cap_leaves_the_prompt_room_in_the_llms_context_window() -> None:
    gateway = ScriptedGateway(default="ok")
    caller = caller_for(gateway)
    small = make_llm(context_window=4096)
    prompt = "x" * 4000 * 4  # estimated at 4000 tokens: the window has 96 left before the margin

    await caller.call(ask(small, text="x" * 400))  # 100 tokens: 4096 - 100 - (64 + 12) left
    await caller.call(ask(small, text=prompt))  # never below the floor
    await caller.call(ask(make_llm(context_window=4096, params={"max_tokens": 8000}), text="x" * 400))

    assert [r.max_tokens for r in gateway.requests] == [
        min(PURPOSE_MAX_COMPLETION_TOKENS["react"], 4096 - 100 - 64 - 12), MIN_ANSWER_TOKENS, 4096 - 100 - 64 - 12,
    ]
    assert PURPOSE_MAX_COMPLETION_TOKENS["react"] > 4096 - 100 - 64 - 12  # the window is what capped it


async def test_a_refused_form_is_reported_as_negotiated_not_as_a_plain_failure() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway(
        [FormUnsupportedError("json_schema is not supported", form="json_schema"), LLMError("bad request")]
    )
    caller = caller_for(gateway, sink=sink)
    with pytest.raises(FormUnsupportedError):
        await caller.call(ask())
    with pytest.raises(LLMError):
        await caller.call(ask())

    refused, failed = (e.data for e in sink.of_type("llm.failed"))
    assert refused == {
        "model": "test/model", "purpose": "react", "error": "json_schema is not supported",
        "retrying": False, "attempt": 1, "negotiated": True, "kind": "other",
    }
    assert "negotiated" not in failed


async def test_a_refusal_that_cannot_be_stored_is_logged_and_the_call_carries_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken_store(llm: LLMSpec, form: str) -> None:
        raise RuntimeError("database is locked")

    gateway = ScriptedGateway([FormUnsupportedError("streaming is not supported", form="stream"), "answer"])
    caller = caller_for(gateway)
    caller.capabilities = Capabilities(on_learned=broken_store)

    with caplog.at_level(logging.WARNING, logger="agents.engine.capabilities"):
        response = await caller.call(ask(stream=True))

    assert response.content == "answer"
    assert caller.capabilities.refuses(make_llm(), "stream")  # remembered in this process all the same
    [record] = caplog.records
    assert "refuses stream" in record.getMessage() and record.exc_info is not None


# Coalesced deltas (issue #20) --------------------------------------------------------------------


class ChunkingGateway:
    """Sends ``pieces`` as deltas, the clock moved ``gap`` seconds before each; then answers, or
    fails after them when ``fail``."""

    def __init__(self, pieces: list[str], clock: FakeClock, *, gap: float = 0.0, fail: bool = False) -> None:
        self.pieces, self.clock, self.gap, self.fail = pieces, clock, gap, fail

    async def complete(self, request: LLMRequest, *, on_delta: Any = None) -> LLMResponse:
        for piece in self.pieces:
            self.clock.advance(self.gap)
            if on_delta is not None:
                await on_delta(piece)
        if self.fail:
            raise LLMError("the connection dropped")
        return LLMResponse(content="".join(self.pieces))


async def test_a_burst_of_chunks_becomes_a_few_delta_events_that_add_up_to_the_answer() -> None:
    clock, sink = FakeClock(), RecordingSink()
    pieces = [f"w{i:02d} " for i in range(40)]  # 160 characters at once
    caller = caller_for(ChunkingGateway(pieces, clock), clock=clock, sink=sink)  # type: ignore[arg-type]
    await caller.call(ask(stream=True))
    texts = [e.data["text"] for e in sink.of_type("llm.delta")]
    assert "".join(texts) == "".join(pieces)
    assert [len(t) for t in texts] == [64, 64, 32]  # two full batches, the rest when it ended
    assert sink.types[-1] == "llm.completed" and sink.types[-2] == "llm.delta"


async def test_a_slow_model_has_each_chunk_shown_as_it_comes() -> None:
    clock, sink = FakeClock(), RecordingSink()
    pieces = ["The ", "tide ", "turns"]
    caller = caller_for(ChunkingGateway(pieces, clock, gap=0.2), clock=clock, sink=sink)  # type: ignore[arg-type]
    await caller.call(ask(stream=True))
    assert [e.data["text"] for e in sink.of_type("llm.delta")] == pieces  # 200 ms apart: no waiting


async def test_text_heard_before_a_failure_is_emitted_before_the_failure() -> None:
    clock, sink = FakeClock(), RecordingSink()
    caller = caller_for(ChunkingGateway(["Half ", "an ans"], clock, fail=True), clock=clock, sink=sink)  # type: ignore[arg-type]
    with pytest.raises(LLMError):
        await caller.call(ask(stream=True))
    assert sink.types == ["llm.started", "llm.delta", "llm.failed"]
    assert sink.of_type("llm.delta")[0].data == {"text": "Half an ans"}


async def test_a_lone_surrogate_in_an_answer_becomes_a_replacement_character(fake_llm_server: Any) -> None:
    # JSON can carry "\ud800"; UTF-8, PostgreSQL, pages and sockets cannot (issue #16).
    from agents.engine.gateway import RoutingGateway
    from tests.fakes.openai_server import Reply

    fake_llm_server.add(Reply.text("Half \ud800 done"), Reply.tool_call("calc", '{"x": "\udc00"}'))
    sink = RecordingSink()
    caller = make_caller(RoutingGateway(), EventEmitter(sink=sink, clock=FakeClock()), cancel=CancelToken(),
                         clock=FakeClock(), usage=Usage())
    llm = LLMSpec(key="f", model="openai/fake", api_base=fake_llm_server.base_url, max_retries=0)
    answer = await caller.call(ask(llm, stream=True))
    called = await caller.call(ask(llm))
    assert answer.content == "Half \ufffd done"
    assert called.tool_calls[0].arguments == '{"x": "\ufffd"}'
    assert all("\ud800" not in e.data.get("text", "") for e in sink.of_type("llm.delta"))


async def test_text_held_while_the_model_pauses_goes_out_after_the_wait() -> None:
    clock, sink = FakeClock(), RecordingSink()
    first_held = asyncio.Event()

    class Pausing:
        async def complete(self, request: LLMRequest, *, on_delta: Any = None) -> LLMResponse:
            clock.advance(0.3)  # the first token's latency
            await on_delta("Hello")  # shown at once: nothing came before it for a while
            clock.advance(0.001)
            await on_delta(" there")  # held: it came 1 ms after the last event
            first_held.set()
            await asyncio.sleep(0.2)  # the model thinks, or writes a tool call
            return LLMResponse(content="Hello there")

    caller = caller_for(Pausing(), clock=clock, sink=sink)  # type: ignore[arg-type]
    call = asyncio.ensure_future(caller.call(ask(stream=True)))
    await first_held.wait()
    await asyncio.sleep(0.12)  # past the 50 ms wait, before the answer ends
    assert [e.data["text"] for e in sink.of_type("llm.delta")] == ["Hello", " there"]
    await call
    assert sink.types[-1] == "llm.completed"
