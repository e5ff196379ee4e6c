"""What an LLM call is kept as: the caller's record for a sink that keeps calls, scrubbed, capped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.engine.calls import LLMCaller, make_caller
from agents.engine.events import RecordingSink
from agents.engine.llm import (
    LLMError,
    LLMRequest,
    RetryableLLMError,
    ScriptedGateway,
    tool_call_response,
)
from agents.engine.runtime import CancelToken, EventEmitter, FakeClock, Usage
from agents.engine.specs import LLMSpec
from agents.engine.transcript import MAX_CALL_CHARS, call_record, kept_call, scrub

KEY = "fake-key-0123456789abcdef"  # not sk-shaped: only the exact-key scrub catches it


def llm(**kw: Any) -> LLMSpec:
    return LLMSpec(**{"key": "llm-1", "model": "test/model", "max_retries": 0, "api_key": KEY, **kw})


def request(text: str = "Do the Research work", *, spec: LLMSpec | None = None, **kw: Any) -> LLMRequest:
    messages = [{"role": "system", "content": "You are a writer."}, {"role": "user", "content": text}]
    return LLMRequest(llm=spec or llm(), messages=messages, purpose="react", **kw)


def caller(gateway: ScriptedGateway, sink: RecordingSink) -> LLMCaller:
    clock = FakeClock()
    return make_caller(gateway, EventEmitter(sink=sink, clock=clock), cancel=CancelToken(), clock=clock,
                       usage=Usage(), backoff_base=0.0)


# The scrubber --------------------------------------------------------------------------------------


def test_scrub_removes_the_given_keys_bearer_tokens_and_openai_shaped_keys() -> None:
    text = f"key {KEY}; Authorization: Bearer abc.def-123 other sk-proj-AbCdEf0123456789 end"

    scrubbed = scrub(text, [KEY])

    assert KEY not in scrubbed and "abc.def-123" not in scrubbed and "AbCdEf0123456789" not in scrubbed
    assert scrubbed == "key [redacted]; Authorization: Bearer [redacted] other sk-[redacted] end"


def test_scrub_leaves_ordinary_text_and_too_short_secrets_alone() -> None:
    text = "Ask about the sky-blue tides; a bearer of news, bearer instruments"

    assert scrub(text, ["", "sky"]) == text


def test_a_kept_call_has_its_own_llms_key_and_the_runs_other_keys_scrubbed_everywhere() -> None:
    other = "another-llms-key-42"
    record = call_record(
        request(f"Use {KEY} and {other} please", tools=[{"type": "function", "function": {"name": "calculator"}}]),
        tool_call_response("calculator", {"expression": f"{other} + 1"}),
    )

    kept = kept_call(record, secrets={other})

    text = json.dumps(kept)
    assert KEY not in text and other not in text
    assert kept["messages"][1] == {"role": "user", "content": "Use [redacted] and [redacted] please"}
    assert kept["tools"] == ["calculator"]
    assert kept["reply"]["tool_calls"] == [
        {"id": "call_1", "name": "calculator", "arguments": '{"expression": "[redacted] + 1"}'}]
    assert kept["error"] == "" and kept["response_format"] == ""


def test_a_kept_call_names_the_schema_it_asked_for() -> None:
    record = call_record(request(response_schema={"title": "Plan", "type": "object"}), error="bad gateway")

    kept = kept_call(record)

    assert kept["response_format"] == "Plan" and kept["reply"] is None and kept["error"] == "bad gateway"


def test_a_call_too_big_to_keep_cuts_its_longest_texts_first_and_says_so() -> None:
    huge = "x" * (MAX_CALL_CHARS * 2)
    record = call_record(request(huge))

    kept = kept_call(record)

    system, user = kept["messages"]
    assert system["content"] == "You are a writer."  # short texts are kept whole
    assert user["content"].startswith("x" * 1000) and user["content"].endswith("more characters not kept]")
    assert len(json.dumps(kept)) < MAX_CALL_CHARS + 1000


# The caller's record -------------------------------------------------------------------------------


async def test_a_sink_that_keeps_calls_gets_each_attempts_request_and_reply_or_error() -> None:
    sink = RecordingSink(keeps_llm_calls=True)
    gateway = ScriptedGateway([RetryableLLMError("overloaded"), "Final Answer: done"])

    await caller(gateway, sink).call(request(spec=llm(max_retries=1)), step_id="s1")

    ended = sink.of_type("llm.completed", "llm.failed")
    assert [e.type for e in ended] == ["llm.failed", "llm.completed"]
    failed, completed = (e.call for e in ended)
    assert failed is not None and failed.error == "overloaded" and failed.reply is None
    assert completed is not None and completed.reply == {
        "content": "Final Answer: done", "tool_calls": [], "finish_reason": None}
    assert completed.messages[1]["content"] == "Do the Research work"
    assert all(e.call is None for e in sink.of_type("llm.started"))
    assert all("messages" not in e.data for e in sink.events)  # never part of what is stored or sent


async def test_a_call_that_fails_for_good_is_kept_with_its_error() -> None:
    sink = RecordingSink(keeps_llm_calls=True)

    with pytest.raises(LLMError):
        await caller(ScriptedGateway([LLMError("no such model")]), sink).call(request())

    (failed,) = sink.of_type("llm.failed")
    assert failed.call is not None and failed.call.error == "no such model"


async def test_no_record_is_built_for_a_sink_that_does_not_keep_calls() -> None:
    sink = RecordingSink()

    await caller(ScriptedGateway(["Final Answer: done"]), sink).call(request())

    assert [e.call for e in sink.events] == [None, None]


def test_a_provider_error_loses_any_bearer_token_even_a_letters_only_one() -> None:
    from agents.engine.gateway import scrub as scrub_error

    assert scrub_error("401: header Authorization: Bearer abcdefghijkl rejected", None) == (
        "401: header Authorization: Bearer [redacted] rejected"
    )
