"""The live gateways through real HTTP against the fake OpenAI-compatible server: litellm's path
and the direct one (agents.engine.wire) pass the same tests, each parametrised by ``gateway_path``."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.engine.calls import BudgetScope, LLMCaller, make_caller
from agents.engine.demo import DEMO_MODEL
from agents.engine.events import RecordingSink
from agents.engine.gateway import LiteLLMGateway, RoutingGateway, response_format, supports_tools
from agents.engine.llm import (
    ContextLengthError,
    LLMError,
    LLMRequest,
    RetryableLLMError,
    ToolsUnsupportedError,
)
from agents.engine.runtime import (
    Cancelled,
    CancelToken,
    EventEmitter,
    FakeClock,
    SystemClock,
    Usage,
)
from agents.engine.specs import Budget, LLMSpec
from agents.engine.wire import WireGateway
from tests.fakes.openai_server import FakeLLMServer, FakeToolCall, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture

KEY = "fake-key-0123456789abcdef"  # not sk-shaped: exercises the exact-key scrub
CALC_TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate arithmetic.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}


def llm_for(server: FakeLLMServer, **kw: Any) -> LLMSpec:
    values: dict[str, Any] = {
        "key": "fake",
        "model": "openai/fake-model",
        "api_base": server.base_url,
        "api_key": KEY,
        "timeout": 5.0,
        "max_retries": 0,
    }
    values.update(kw)
    return LLMSpec(**values)


def ask(llm: LLMSpec, text: str = "Say hello.", **kw: Any) -> LLMRequest:
    return LLMRequest(llm=llm, messages=[{"role": "user", "content": text}], purpose="react", **kw)


@pytest.fixture(params=["litellm", "wire"])
def gateway_path(request: pytest.FixtureRequest) -> str:
    return request.param


def gateway(path: str) -> LiteLLMGateway | WireGateway:
    return LiteLLMGateway() if path == "litellm" else WireGateway()


def caller_with(
    sink: RecordingSink, *, clock: Any = None, cancel: CancelToken | None = None, path: str = "litellm"
) -> LLMCaller:
    clock = clock or FakeClock()
    return make_caller(
        gateway(path),
        EventEmitter(sink=sink, clock=clock),
        cancel=cancel or CancelToken(),
        clock=clock,
        usage=Usage(),
    )


async def test_text_answer_reports_content_usage_and_latency(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("Hello there.", prompt_tokens=11, completion_tokens=3))
    response = await gateway(gateway_path).complete(ask(llm_for(fake_llm_server)))
    assert response.content == "Hello there."
    assert response.tool_calls == []
    assert (response.prompt_tokens, response.completion_tokens) == (11, 3)
    assert response.finish_reason == "stop"
    assert response.cost_usd is None  # litellm has no price for an unknown model
    assert response.latency_ms >= 0
    body = fake_llm_server.requests[0].body
    assert body["model"] == "fake-model"
    assert body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert "stream" not in body


async def test_llm_params_reach_the_server_but_cannot_override_what_the_gateway_sets(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("ok"))
    llm = llm_for(
        fake_llm_server,
        params={
            "temperature": 0.2,
            "max_tokens": 50,
            "api_key": "sk-from-params-0000",
            "model": "x",
        },
    )
    await gateway(gateway_path).complete(ask(llm, stop=["\nObservation:"]))
    request = fake_llm_server.requests[0]
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 50
    assert request.body["stop"] == ["\nObservation:"]
    assert request.body["model"] == "fake-model"
    assert request.authorization == f"Bearer {KEY}"


async def test_a_budget_cap_reaches_the_server_unless_the_llms_own_max_tokens_is_lower(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = Reply.text("ok")
    plain, capped = llm_for(fake_llm_server), llm_for(fake_llm_server, params={"max_tokens": 50})
    newer = llm_for(fake_llm_server, params={"max_completion_tokens": 500})
    for llm, cap in ((plain, 300), (capped, 30), (capped, 300), (newer, 300)):
        await gateway(gateway_path).complete(ask(llm, max_tokens=cap))
    bodies = [r.body for r in fake_llm_server.requests]
    assert [b.get("max_tokens") for b in bodies] == [300, 30, 50, None]
    assert bodies[3]["max_completion_tokens"] == 300


async def test_openais_reasoning_models_get_the_cap_as_max_completion_tokens_on_both_paths(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = Reply.text("ok")
    for model in ("openai/o3-mini", "openai/gpt-5", "openai/gpt-4o-mini"):
        await gateway(gateway_path).complete(ask(llm_for(fake_llm_server, model=model), max_tokens=100))
    # The LLM's own max_tokens is renamed too (a reasoning model refuses it), the lower limit kept.
    own = llm_for(fake_llm_server, model="openai/o3-mini", params={"max_tokens": 50})
    await gateway(gateway_path).complete(ask(own, max_tokens=100))
    await gateway(gateway_path).complete(ask(own))
    sent = [(r.body.get("max_completion_tokens"), r.body.get("max_tokens")) for r in fake_llm_server.requests]
    assert sent == [(100, None), (100, None), (None, 100), (50, None), (50, None)]


async def test_stream_sends_deltas_in_order_and_they_join_to_the_content(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(
        Reply.text("One two three four.", chunks=["One ", "two ", "three ", "four."])
    )
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await gateway(gateway_path).complete(
        ask(llm_for(fake_llm_server), stream=True), on_delta=on_delta
    )
    assert deltas == ["One ", "two ", "three ", "four."]
    assert "".join(deltas) == response.content == "One two three four."
    body = fake_llm_server.requests[0].body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert response.completion_tokens > 0


async def test_stream_without_provider_usage_is_counted_locally(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("A streamed answer with no usage.", include_usage=False))
    response = await gateway(gateway_path).complete(
        ask(llm_for(fake_llm_server), "Count these words, please.", stream=True)
    )
    assert response.content == "A streamed answer with no usage."
    assert response.prompt_tokens > 0
    assert response.completion_tokens > 0


async def test_native_tool_call_comes_back_as_tool_calls(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.tool_call("calculator", {"expression": "12 * 7"}, call_id="call_a"))
    response = await gateway(gateway_path).complete(
        ask(llm_for(fake_llm_server), tools=[CALC_TOOL], tool_choice="auto")
    )
    assert response.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("call_a", "calculator", {"expression": "12 * 7"})
    ]
    body = fake_llm_server.requests[0].body
    assert body["tools"] == [CALC_TOOL]
    assert body["tool_choice"] == "auto"


async def test_tool_calls_streamed_in_fragments_are_rebuilt(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(
        Reply.tool_calls(
            FakeToolCall("calculator", '{"expression": "2 + 3"}', "call_1",
                         ('{"expr', 'ession": ', '"2 + 3"}')),
            FakeToolCall("calculator", '{"expression": "4 * 5"}', "call_2",
                         ('{"expression"', ': "4 * 5"', "}")),
        )
    )  # fmt: skip
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    response = await gateway(gateway_path).complete(
        ask(llm_for(fake_llm_server), tools=[CALC_TOOL], stream=True), on_delta=on_delta
    )
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("call_1", "calculator", {"expression": "2 + 3"}),
        ("call_2", "calculator", {"expression": "4 * 5"}),
    ]
    assert response.content == ""
    assert deltas == []


async def test_response_schema_reaches_the_server_as_a_json_schema_response_format(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    schema = {
        "type": "object",
        "properties": {"plans": {"type": "array", "items": {"type": "object"}}},
        "required": ["plans"],
    }
    fake_llm_server.add(Reply.json({"plans": []}))
    request = LLMRequest(
        llm=llm_for(fake_llm_server),
        messages=[{"role": "user", "content": "Plan."}],
        purpose="crew_plan",
        response_schema=schema,
    )
    response = await gateway(gateway_path).complete(request)
    assert json.loads(response.content) == {"plans": []}
    assert fake_llm_server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "crew_plan", "schema": schema},
    }


def test_response_format_keeps_a_schema_that_is_already_named() -> None:
    named = {"name": "Plan", "schema": {"type": "object"}, "strict": True}
    assert response_format(named) == {"type": "json_schema", "json_schema": named}
    titled = response_format({"title": "Crew plan!", "type": "object"})
    assert titled["json_schema"]["name"] == "Crew_plan_"


async def test_429_is_retried_after_its_retry_after_then_succeeds(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.error(429, "Rate limit reached", retry_after=7), Reply.text("Done."))
    sink, clock = RecordingSink(), FakeClock()
    caller = caller_with(sink, clock=clock, path=gateway_path)
    response = await caller.call(ask(llm_for(fake_llm_server, max_retries=2)))
    assert response.content == "Done."
    assert fake_llm_server.request_count == 2
    assert clock.slept == [7.0]  # waited what the server asked, not the default backoff
    assert sink.types == ["llm.started", "llm.failed", "llm.started", "llm.completed"]
    failed = sink.of_type("llm.failed")[0].data
    assert failed["retrying"] is True
    assert "Rate limit reached" in failed["error"]
    assert caller.usage.llm_calls == 1


async def test_500_is_retried_until_attempts_run_out_then_raises(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(*(Reply.error(500, "upstream exploded") for _ in range(3)))
    sink, clock = RecordingSink(), FakeClock()
    caller = caller_with(sink, clock=clock, path=gateway_path)
    with pytest.raises(RetryableLLMError, match="upstream exploded"):
        await caller.call(ask(llm_for(fake_llm_server, max_retries=2)))
    assert fake_llm_server.request_count == 3  # litellm and openai did not retry on their own
    assert clock.slept == [0.5, 1.0]
    assert [e.data["retrying"] for e in sink.of_type("llm.failed")] == [True, True, False]
    assert "llm.completed" not in sink.types


async def test_a_total_timeout_is_not_retried_it_would_happen_again(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("too late").after(2), Reply.text("too late").after(2))
    sink = RecordingSink()
    caller = caller_with(sink, path=gateway_path)
    started = time.monotonic()
    with pytest.raises(LLMError, match=r"^no complete answer within 0\.3 s$") as raised:
        await caller.call(ask(llm_for(fake_llm_server, timeout=0.3, max_retries=1)))
    assert type(raised.value) is LLMError
    assert time.monotonic() - started < 1.5
    assert fake_llm_server.request_count == 1
    assert [e.data["retrying"] for e in sink.of_type("llm.failed")] == [False]


async def test_a_stream_that_stalls_longer_than_the_total_timeout_fails_for_good(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("slow words here", chunk_delay=2))
    with pytest.raises(LLMError, match=r"^no complete answer within 0\.3 s$") as raised:
        await gateway(gateway_path).complete(ask(llm_for(fake_llm_server, timeout=0.3), stream=True))
    assert type(raised.value) is LLMError


@pytest.mark.parametrize("stream", [False, True])
async def test_a_malformed_body_fails_for_good_without_retrying(
    gateway_path: str,
    fake_llm_server: FakeLLMServer, stream: bool
) -> None:
    fake_llm_server.add(Reply.malformed(), Reply.malformed(), Reply.text("never asked for"))
    sink = RecordingSink()
    caller = caller_with(sink, path=gateway_path)
    llm = llm_for(fake_llm_server, max_retries=3)
    with pytest.raises(LLMError) as raised:
        await caller.call(ask(llm, stream=stream))
    assert not isinstance(raised.value, RetryableLLMError)
    # Streamed (every call is), a body that is not an event stream reads as a refusal to stream:
    # asked once more unstreamed, which fails for good; not learned, as that failed too.
    assert fake_llm_server.request_count == 2
    assert [r.stream for r in fake_llm_server.requests] == [True, False]
    assert [e.data["retrying"] for e in sink.of_type("llm.failed")] == [True, False]
    assert not caller.capabilities.refuses(llm, "stream")


async def test_a_context_window_overflow_is_a_context_length_error(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.context_length_exceeded())
    with pytest.raises(ContextLengthError, match="maximum context length"):
        await gateway(gateway_path).complete(ask(llm_for(fake_llm_server)))


async def test_a_provider_rejecting_tools_raises_tools_unsupported(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(
        Reply.error(400, "tools is not supported for this model", type_="invalid_request_error")
    )
    with pytest.raises(ToolsUnsupportedError):
        await gateway(gateway_path).complete(ask(llm_for(fake_llm_server), tools=[CALC_TOOL]))


async def test_other_bad_requests_and_auth_errors_are_plain_llm_errors(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(
        Reply.error(400, "temperature must be below 2", type_="invalid_request_error"),
        Reply.error(401, "Incorrect API key provided", type_="invalid_request_error"),
    )
    for expected in ("temperature must be below 2", "Incorrect API key"):
        with pytest.raises(LLMError, match=expected) as raised:
            await gateway(gateway_path).complete(ask(llm_for(fake_llm_server)))
        assert type(raised.value) is LLMError


async def test_the_key_travels_only_as_the_bearer_header_and_never_in_errors_or_events(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    # A careless provider echoes the key back in its error text.
    fake_llm_server.add(
        Reply.text("fine"),
        Reply.error(401, f"Incorrect API key provided: {KEY}. Header was 'Bearer {KEY}'"),
        Reply.error(503, f"overloaded for key {KEY}", retry_after=0),
    )
    sink = RecordingSink()
    caller = caller_with(sink, path=gateway_path)
    await caller.call(ask(llm_for(fake_llm_server)))
    errors: list[str] = []
    for _ in range(2):
        with pytest.raises(LLMError) as raised:
            await caller.call(ask(llm_for(fake_llm_server)))
        errors += [str(raised.value), repr(raised.value)]
        assert raised.value.__cause__ is None  # litellm's exception (with the key) is not chained
    for request in fake_llm_server.requests:
        assert request.authorization == f"Bearer {KEY}"
        assert KEY.encode() not in request.raw
        assert all(KEY not in v for k, v in request.headers.items() if k != "authorization")
    assert len(fake_llm_server.requests) == 3
    assert not any(KEY in text for text in errors)
    assert "[redacted]" in errors[0]
    assert sink.of_type("llm.failed")
    assert not any(KEY in repr(event) for event in sink.events)


async def test_debug_logging_never_shows_the_key(
    gateway_path: str,
    fake_llm_server: FakeLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # what an operator turning on debug logs would see
    fake_llm_server.add(Reply.text("fine"), Reply.error(401, "Incorrect API key provided"))
    await gateway(gateway_path).complete(ask(llm_for(fake_llm_server)))
    with pytest.raises(LLMError):
        await gateway(gateway_path).complete(ask(llm_for(fake_llm_server)))
    assert any(r.name.startswith(("LiteLLM", "openai", "httpx", "httpcore", "agents.engine.wire")) for r in caplog.records)
    assert KEY not in caplog.text


async def test_cancel_abandons_a_call_in_flight_at_once(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("you will never see this").after(5))
    sink, cancel = RecordingSink(), CancelToken()
    caller = caller_with(sink, clock=SystemClock(), cancel=cancel, path=gateway_path)
    call = asyncio.ensure_future(caller.call(ask(llm_for(fake_llm_server, max_retries=3))))
    await _until(lambda: fake_llm_server.request_count == 1)
    started = time.monotonic()
    cancel.cancel("user stopped the run")
    with pytest.raises(Cancelled, match="user stopped the run"):
        await call
    assert time.monotonic() - started < 3  # far sooner than the 5 s the server holds its reply
    await asyncio.sleep(0.05)
    assert fake_llm_server.request_count == 1  # and nothing sent after the cancel
    assert sink.types == ["llm.started"]


async def test_cancel_mid_stream_stops_reading_and_sends_nothing_more(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("first second third fourth", chunk_delay=0.4))
    sink, cancel = RecordingSink(), CancelToken()
    caller = caller_with(sink, clock=SystemClock(), cancel=cancel, path=gateway_path)
    first_delta = asyncio.Event()
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)
        first_delta.set()

    call = asyncio.ensure_future(
        caller.call(ask(llm_for(fake_llm_server), stream=True), on_delta=on_delta)
    )
    await asyncio.wait_for(first_delta.wait(), timeout=2)
    cancel.cancel()
    with pytest.raises(Cancelled):
        await call
    assert deltas == ["first "]  # stopped before the next chunk was read
    assert fake_llm_server.request_count == 1


async def test_cancel_closes_the_connection_of_a_call_nobody_follows_within_a_second(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    # A crew plan's call: it asks for no deltas and nobody follows the run yet. It streams all
    # the same, so a stop closes the connection and a local server stops generating.
    fake_llm_server.add(Reply.endless())
    cancel = CancelToken()
    caller = caller_with(RecordingSink(), clock=SystemClock(), cancel=cancel, path=gateway_path)
    caller.stream_gate = lambda: False
    request = LLMRequest(llm=llm_for(fake_llm_server), messages=[{"role": "user", "content": "Plan."}],
                         purpose="crew_plan")
    call = asyncio.ensure_future(caller.call(request))
    while fake_llm_server.request_count == 0:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)  # generating: a few chunks out
    stopped = time.monotonic()
    cancel.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(call, 2)

    closed = await asyncio.to_thread(fake_llm_server.wait_disconnect, 3)
    assert closed is not None, "the server kept generating"
    assert closed - stopped < 1.0
    assert fake_llm_server.requests[0].stream


async def test_no_first_token_in_time_is_retryable_and_says_so(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("late").after(3))
    llm = llm_for(fake_llm_server, first_token_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(RetryableLLMError, match=r"^no first token within 0\.3 s$"):
        await gateway(gateway_path).complete(ask(llm, stream=True))
    assert time.monotonic() - started < 2


async def test_a_model_that_never_stops_is_cut_at_the_total_timeout_and_its_connection_closed(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.endless())
    llm = llm_for(fake_llm_server, first_token_timeout=5, timeout=0.5)
    with pytest.raises(LLMError, match=r"^no complete answer within 0\.5 s$") as raised:
        await gateway(gateway_path).complete(ask(llm, stream=True))
    assert type(raised.value) is LLMError  # not retried: it would run as long again
    assert await asyncio.to_thread(fake_llm_server.wait_disconnect, 3) is not None


async def test_an_unstreamed_call_is_bounded_by_the_total_timeout(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("late").after(3))
    llm = llm_for(fake_llm_server, first_token_timeout=0.1, timeout=0.4)
    with pytest.raises(LLMError, match=r"^no complete answer within 0\.4 s$") as raised:
        await gateway(gateway_path).complete(ask(llm))
    assert type(raised.value) is LLMError


async def test_a_server_that_does_not_accept_the_connection_fails_at_the_connect_timeout(gateway_path: str) -> None:
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # never accepted: one queued connection fills the backlog
        queued.connect(listener.getsockname())
        port = listener.getsockname()[1]
        llm = LLMSpec(key="fake", model="openai/fake-model", api_base=f"http://127.0.0.1:{port}/v1",
                      api_key=KEY, max_retries=0, connect_timeout=0.3, first_token_timeout=10, timeout=10)
        started = time.monotonic()
        with pytest.raises(RetryableLLMError):
            await gateway(gateway_path).complete(ask(llm, stream=True))
        assert time.monotonic() - started < 3  # not the 10 s of the other limits


async def test_the_llms_own_prices_override_litellms(gateway_path: str, fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("priced", prompt_tokens=1000, completion_tokens=500))
    sink = RecordingSink()
    llm = llm_for(
        fake_llm_server, model="openai/gpt-4o-mini", input_price_per_1k=0.5, output_price_per_1k=2
    )
    caller = caller_with(sink, path=gateway_path)
    response = await caller.call(ask(llm))
    assert response.cost_usd == pytest.approx(1.5)
    assert sink.of_type("llm.completed")[0].data["cost_usd"] == pytest.approx(1.5)
    assert caller.usage.cost_usd == pytest.approx(1.5)
    # litellm is handed the same prices (it skips its map); the provider never sees them.
    assert not {"input_cost_per_token", "output_cost_per_token"} & set(fake_llm_server.requests[0].body)


async def test_an_unknown_model_with_its_own_prices_is_priced_streamed_or_not(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(
        Reply.text("priced", prompt_tokens=1000, completion_tokens=500),
        Reply.text("priced", prompt_tokens=1000, completion_tokens=500),
    )
    llm = llm_for(fake_llm_server, model="openai/house-model", input_price_per_1k=0.5)
    plain = await gateway(gateway_path).complete(ask(llm))
    streamed = await gateway(gateway_path).complete(ask(llm, stream=True))
    assert plain.cost_usd == pytest.approx(0.5)
    assert streamed.cost_usd == pytest.approx(0.5)


async def test_a_known_model_is_priced_from_litellms_bundled_price_map(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(
        Reply.text("priced", prompt_tokens=1000, completion_tokens=1000),
        Reply.text("priced", prompt_tokens=1000, completion_tokens=1000),
    )
    llm = llm_for(fake_llm_server, model="openai/gpt-4o-mini")
    plain = await gateway(gateway_path).complete(ask(llm))
    streamed = await gateway(gateway_path).complete(ask(llm, stream=True))
    assert plain.cost_usd is not None and plain.cost_usd > 0
    assert streamed.cost_usd == pytest.approx(plain.cost_usd)


async def test_routing_sends_the_demo_model_offline_and_the_rest_to_litellm(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("live answer"))
    gateway = RoutingGateway()
    demo = await gateway.complete(ask(LLMSpec(key="demo", model=DEMO_MODEL)))
    assert demo.model == "demo"
    assert "offline demo model" in demo.content
    assert fake_llm_server.request_count == 0
    live = await gateway.complete(ask(llm_for(fake_llm_server)))
    assert live.content == "live answer"
    assert fake_llm_server.request_count == 1


async def test_llm_caller_budget_stops_a_live_call_before_it_is_sent(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("x" * 40, prompt_tokens=10, completion_tokens=10))
    sink = RecordingSink()
    caller = caller_with(sink, path=gateway_path)
    caller.budget = Budget(max_tokens=20)
    await caller.call(ask(llm_for(fake_llm_server)))
    with pytest.raises(Exception, match="max_tokens"):
        await caller.call(ask(llm_for(fake_llm_server)), scope=BudgetScope(Budget(), Usage(), "a"))
    assert fake_llm_server.request_count == 1
    assert sink.types[-1] == "budget.exceeded"


async def test_the_gateway_prices_a_model_from_litellms_map_for_the_cost_budget() -> None:
    gateway = RoutingGateway()

    assert await gateway.prices(LLMSpec(key="m", model="openai/gpt-4o-mini")) == (1.5e-07, 6e-07)
    assert await gateway.prices(LLMSpec(key="x", model="openai/no-such-model-anywhere")) is None
    assert await gateway.prices(LLMSpec(key="demo", model=DEMO_MODEL)) is None  # it costs nothing


async def test_a_cost_budget_stops_a_live_call_that_could_cross_it_before_it_is_sent(
    gateway_path: str,
    fake_llm_server: FakeLLMServer,
) -> None:
    sink = RecordingSink()
    caller = caller_with(sink, path=gateway_path)
    caller.budget = Budget(max_cost_usd=0.001)  # gpt-4o-mini's 4096-token answer: $0.0025
    llm = llm_for(fake_llm_server, model="openai/gpt-4o-mini")

    with pytest.raises(Exception, match=r"used \$0\.0000 of \$0\.0010; the next call could cost up to"):
        await caller.call(ask(llm))

    assert fake_llm_server.request_count == 0
    assert sink.types == ["budget.exceeded"]


def test_supports_tools_knows_the_demo_model_and_litellms_map() -> None:
    assert supports_tools(DEMO_MODEL) is True
    assert supports_tools("openai/gpt-4o-mini") is True
    assert supports_tools("openai/some-private-model") is False
    assert supports_tools("no-such-provider-model") is False


def test_importing_the_gateway_does_not_import_litellm() -> None:
    code = "import sys, agents.engine.gateway; print('litellm' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert result.stdout.strip() == "False"


async def _until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)
