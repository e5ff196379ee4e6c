"""What a call waits for, said in its events: a retry's back-off (``llm.failed`` {retry_in}) and a
requests-per-minute limiter's slot (``llm.waiting``), so the run page can say why nothing moves."""

from __future__ import annotations

import asyncio

import pytest

from agents.engine.calls import RateLimiters
from agents.engine.events import RecordingSink
from agents.engine.llm import LLMError, RetryableLLMError, ScriptedGateway
from agents.engine.runtime import FakeClock
from tests.agents.engine.test_calls import ask, caller_for, make_llm


async def test_a_retried_call_says_how_long_it_backs_off_and_which_retry_comes_next() -> None:
    clock, sink = FakeClock(), RecordingSink()
    gateway = ScriptedGateway([RetryableLLMError("429 rate limit exceeded", retry_after=12),
                               RetryableLLMError("503 busy"), "ok"])
    caller = caller_for(gateway, clock=clock, sink=sink)

    await caller.call(ask(make_llm(max_retries=3)), step_id="s1")

    assert sink.types == ["llm.started", "llm.failed", "llm.started", "llm.failed", "llm.started", "llm.completed"]
    first, second = (e.data for e in sink.of_type("llm.failed"))
    assert first == {"model": "test/model", "purpose": "react", "error": "429 rate limit exceeded", "retrying": True,
                     "attempt": 1, "kind": "rate_limited", "retry_in": 12, "max_retries": 3}
    assert (second["retry_in"], second["attempt"], second["kind"]) == (1.0, 2, "server_error")  # 0.5 s doubled
    assert clock.slept == [12, 1.0]  # the wait said is the wait taken


async def test_a_failure_that_is_not_retried_names_no_wait() -> None:
    sink = RecordingSink()
    gateway = ScriptedGateway([RetryableLLMError("down"), RetryableLLMError("still down"), LLMError("bad request")])
    caller = caller_for(gateway, sink=sink)
    with pytest.raises(RetryableLLMError):
        await caller.call(ask(make_llm(max_retries=1)))
    with pytest.raises(LLMError, match="bad request"):
        await caller.call(ask(make_llm(max_retries=1)))

    retried, spent, permanent = (e.data for e in sink.of_type("llm.failed"))
    assert retried["retry_in"] == 0.5
    assert "retry_in" not in spent and spent["retrying"] is False
    assert "retry_in" not in permanent and permanent["retrying"] is False


async def test_a_wait_for_the_models_rate_limit_is_said_before_it_starts() -> None:
    clock, sink = FakeClock(), RecordingSink()
    caller = caller_for(ScriptedGateway(default="ok"), clock=clock, sink=sink)
    llm = make_llm(rpm=1)
    await caller.call(ask(llm))
    clock.advance(15)

    await caller.call(ask(llm), step_id="s2")

    assert sink.types == ["llm.started", "llm.completed", "llm.waiting", "llm.started", "llm.completed"]
    waiting = sink.of_type("llm.waiting")[0]
    assert waiting.data == {"model": "test/model", "purpose": "react", "reason": "rate_limit", "seconds": 45.0,
                            "limit": "model", "rpm": 1}
    assert waiting.step_id == "s2"
    assert clock.slept == [45.0]


async def test_a_wait_of_a_second_or_less_is_not_said() -> None:
    clock, sink = FakeClock(), RecordingSink()
    caller = caller_for(ScriptedGateway(default="ok"), clock=clock, sink=sink)
    llm = make_llm(rpm=1)
    await caller.call(ask(llm))
    clock.advance(59.5)

    await caller.call(ask(llm))

    assert clock.slept == [0.5]
    assert "llm.waiting" not in sink.types


async def test_the_wait_names_whose_limit_it_is_the_agents_or_the_crews() -> None:
    clock, sink = FakeClock(), RecordingSink()
    limiters = RateLimiters(clock)
    caller = caller_for(ScriptedGateway(default="ok"), clock=clock, sink=sink, limiters=limiters)
    agent = caller.with_rpm("agent:writer", 1)
    crew = caller.with_rpm("run:7", 1)

    await agent.call(ask())
    await agent.call(ask())  # the agent's own window is full
    await crew.call(ask())
    clock.advance(30)
    await crew.call(ask())  # the crew's window is full

    assert [(e.data["limit"], e.data["rpm"], e.data["seconds"]) for e in sink.of_type("llm.waiting")] == [
        ("agent", 1, 60.0), ("crew", 1, 30.0)]


async def test_calls_queued_on_one_limiter_each_say_their_wait_once() -> None:
    # Every waiter wakes when the window moves; one takes the slot and the rest wait again. Saying
    # each of those waits made 20 queued calls emit 190 events, a re-render of the page each.
    clock, sink = FakeClock(), RecordingSink()
    caller = caller_for(ScriptedGateway(default="ok"), clock=clock, sink=sink)
    llm = make_llm(rpm=1)

    await asyncio.gather(*(caller.call(ask(llm), step_id=f"s{n}") for n in range(6)))

    assert len(sink.of_type("llm.completed")) == 6
    waits = [e.step_id for e in sink.of_type("llm.waiting")]
    assert sorted(waits) == [f"s{n}" for n in range(1, 6)]  # one each, for the five that queued
