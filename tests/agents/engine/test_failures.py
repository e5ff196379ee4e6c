"""Kinds of provider failure: read from what litellm raised (through the fake server) or from a
stored message; an unreachable host is given up at once, other retryable failures are retried."""

from __future__ import annotations

import socket
import time

import pytest

from agents.engine.calls import make_caller
from agents.engine.events import RecordingSink
from agents.engine.failures import kind_of_exception, kind_of_message
from agents.engine.gateway import LiteLLMGateway
from agents.engine.llm import LLMError, LLMRequest, RetryableLLMError, ScriptedGateway
from agents.engine.runtime import CancelToken, EventEmitter, FakeClock, Usage
from agents.engine.specs import LLMSpec
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - a fixture

KEY = "sk-test-failures-0123456789"


def spec(api_base: str, **kw: object) -> LLMSpec:
    values: dict[str, object] = {"key": "fake", "model": "openai/test", "api_base": api_base, "api_key": KEY,
                                 "max_retries": 0, "first_token_timeout": 5, "timeout": 5}
    values.update(kw)
    return LLMSpec(**values)  # type: ignore[arg-type]


def ask(llm: LLMSpec) -> LLMRequest:
    return LLMRequest(llm=llm, messages=[{"role": "user", "content": "hi"}], purpose="react")


@pytest.mark.parametrize(("reply", "kind"), [
    (Reply.error(401, "Incorrect API key provided"), "auth"),
    (Reply.error(404, "The model `test` does not exist"), "model_not_found"),
    (Reply.error(429, "Rate limit reached", retry_after=0), "rate_limited"),
    (Reply.error(429, "You exceeded your current quota", code="insufficient_quota"), "quota"),
    (Reply.context_length_exceeded(), "context_too_long"),
    (Reply.error(400, "Your request was rejected as a result of our safety system"), "content_filter"),
    (Reply.error(503, "overloaded"), "server_error"),
    (Reply.error(400, "Unrecognized field"), "other"),
])
async def test_the_gateway_names_the_kind_of_each_provider_failure(fake_llm_server: FakeLLMServer, reply, kind):
    fake_llm_server.add(reply)

    with pytest.raises(LLMError) as raised:
        await LiteLLMGateway().complete(ask(spec(fake_llm_server.base_url)))

    assert raised.value.kind == kind
    assert KEY not in str(raised.value)


async def test_a_closed_port_is_unreachable_and_a_slow_answer_a_timeout(fake_llm_server: FakeLLMServer):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RetryableLLMError) as closed:
        await LiteLLMGateway().complete(ask(spec(f"http://127.0.0.1:{port}/v1")))
    fake_llm_server.add(Reply.text("late").after(3))
    with pytest.raises(LLMError) as slow:
        await LiteLLMGateway().complete(ask(spec(fake_llm_server.base_url, first_token_timeout=0.3, timeout=0.3)))

    assert closed.value.kind == "unreachable"
    assert slow.value.kind == "timeout"


def caller(gateway: ScriptedGateway, sink: RecordingSink):  # noqa: ANN201 - an LLMCaller
    clock = FakeClock()
    return make_caller(gateway, EventEmitter(sink=sink, clock=clock), cancel=CancelToken(), clock=clock, usage=Usage())


async def test_an_unreachable_host_is_not_retried_and_its_kind_is_in_the_event():
    unreachable = RetryableLLMError("Connection error.")
    unreachable.kind_hint = "unreachable"
    gateway, sink = ScriptedGateway([unreachable]), RecordingSink()

    started = time.monotonic()
    with pytest.raises(RetryableLLMError):
        await caller(gateway, sink).call(LLMRequest(llm=LLMSpec(key="x", model="openai/x", max_retries=3),
                                                    messages=[], purpose="react"))

    assert gateway.calls == 1 and time.monotonic() - started < 1
    assert [e.data for e in sink.of_type("llm.failed")] == [{
        "model": "openai/x", "purpose": "react", "error": "Connection error.", "retrying": False, "attempt": 1,
        "kind": "unreachable",
    }]


async def test_a_rate_limit_is_still_retried():
    limited = RetryableLLMError("litellm.RateLimitError: Rate limit reached", retry_after=0)
    gateway, sink = ScriptedGateway([limited, "done"]), RecordingSink()

    await caller(gateway, sink).call(LLMRequest(llm=LLMSpec(key="x", model="openai/x", max_retries=3),
                                                messages=[], purpose="react"))

    assert gateway.calls == 2
    assert [(e.data["kind"], e.data["retrying"]) for e in sink.of_type("llm.failed")] == [("rate_limited", True)]


def test_a_connection_that_never_opened_is_unreachable_whatever_litellm_called_it():
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise RuntimeError("InternalServerError: Connection error.") from cause
    except RuntimeError as exc:
        assert kind_of_exception(exc, 500) == "unreachable"


# Only words a provider uses for a failure name its kind (review finding 5) ---------------------


@pytest.mark.parametrize(("text", "kind"), [
    ("litellm.BadRequestError: OpenAIException - body.api_key: extra inputs are not permitted", "other"),
    ("400 body.api_key: extra inputs are not permitted", "other"),
    ("The planner's answer could not be used: Expecting value: line 1 column 401 (char 400).", "other"),
    ("The planner's answer could not be used: Expecting value: line 1 column 501 (char 500).", "other"),
    ("task 'Billing report' has no agent", "other"),
    ("Missing input {api_key}: give it a value.", "other"),
    ("the quota of 404 pages was reached at line 429", "other"),
    ("401 Unauthorized", "auth"),
    ("Error code: 401 - {'error': 'bad key'}", "auth"),
    ("upstream said HTTP 403", "auth"),
    ("status 429 from the proxy", "rate_limited"),
    ("Error code: 503 - overloaded", "server_error"),
    ("litellm.NotFoundError: NotFoundError: OpenAIException - 404 page not found", "endpoint_not_found"),
    ("litellm.NotFoundError: OpenAIException - model 'x' is not available", "model_not_found"),
])
def test_kinds_are_never_guessed_from_ordinary_words_or_bare_numbers(text, kind):
    assert kind_of_message(text) == kind


FREE_TIER_429 = (
    "Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, "
    "Requested 1. Please try again in 20s. You can increase your rate limit by adding a payment method to your "
    "account at https://platform.openai.com/account/billing."
)
GEMINI_429 = ("Quota exceeded for quota metric 'Generate Content API requests per minute' and limit "
              "'GenerateContent request limit per minute' of service 'generativelanguage.googleapis.com'")


@pytest.mark.parametrize(("reply", "kind"), [
    (Reply.error(429, FREE_TIER_429, retry_after=0), "rate_limited"),
    (Reply.error(429, GEMINI_429, retry_after=0), "rate_limited"),
    (Reply.error(429, "You exceeded your current quota, please check your plan and billing details.",
                 code="insufficient_quota", type_="insufficient_quota"), "quota"),
    (Reply.error(400, "body.api_key: extra inputs are not permitted"), "other"),
    (Reply.error(404, "404 page not found"), "endpoint_not_found"),
    (Reply.error(404, "Not Found"), "endpoint_not_found"),
    (Reply.error(404, "model 'llama3' not found, try pulling it first"), "model_not_found"),
])
async def test_a_429_is_a_rate_limit_unless_the_quota_is_gone_and_a_404_off_the_model_is_the_address(
    fake_llm_server: FakeLLMServer, reply, kind,
):
    fake_llm_server.add(reply)

    with pytest.raises(LLMError) as raised:
        await LiteLLMGateway().complete(ask(spec(fake_llm_server.base_url)))

    assert raised.value.kind == kind


@pytest.mark.parametrize(("status", "text", "kind"), [
    (401, "401 Incorrect API key provided", "auth"),
    (429, f"429 {FREE_TIER_429}", "rate_limited"),
    (429, "429 You exceeded your current quota, please check your plan and billing details.", "quota"),
    (404, "404 Not Found", "endpoint_not_found"),
    (404, "404 The model `x` does not exist", "model_not_found"),
])
def test_the_direct_paths_leading_status_still_names_the_kind(status, text, kind):
    assert kind_of_message(text) == kind
    assert kind_of_exception(LLMError(text), status) == kind
