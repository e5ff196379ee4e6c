"""What local servers answer to a form of request they refuse, and which errors are retried, through
real HTTP against the fake server's plain-server modes (issue #14); every test runs on litellm's path
and on the direct one (agents.engine.wire, issue #20)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.engine.events import RecordingSink
from agents.engine.llm import (
    FormUnsupportedError,
    LLMError,
    LLMRequest,
    RetryableLLMError,
    ToolsUnsupportedError,
)
from tests.agents.engine.test_gateway import CALC_TOOL, ask, caller_with, llm_for
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import (
    answers,
    refuses_json_object,
    refuses_json_schema,
    refuses_tools,
)

_path = ["litellm"]  # the gateway the module's callers use, set per test by ``gateway_path``


@pytest.fixture(autouse=True, params=["litellm", "wire"])
def gateway_path(request: pytest.FixtureRequest) -> str:
    _path[0] = request.param
    return request.param


SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


async def send(server: FakeLLMServer, request: LLMRequest) -> Any:
    """One call through ``LLMCaller`` with three retries allowed: what comes back, or the error."""
    sink = RecordingSink()
    try:
        return await caller_with(sink, path=_path[0]).call(request)
    except LLMError as exc:
        return exc


async def test_llama_cpp_pythons_500_to_a_json_schema_format_is_a_refusal_not_retried(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = refuses_json_schema(answers({"ok": True}))
    llm = llm_for(fake_llm_server, max_retries=3)

    error = await send(fake_llm_server, ask(llm, response_schema=SCHEMA))

    assert isinstance(error, FormUnsupportedError) and error.form == "json_schema"
    assert fake_llm_server.request_count == 1  # not retried: the same request fails alike


async def test_the_same_server_takes_json_mode(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.default = refuses_json_schema(answers({"ok": True}))
    llm = llm_for(fake_llm_server)

    response = await send(
        fake_llm_server, ask(llm, response_schema=SCHEMA, response_form="json_object")
    )

    assert response.content == '{"ok": true}'
    assert fake_llm_server.requests[0].body["response_format"] == {"type": "json_object"}


async def test_lm_studios_400_to_json_mode_is_a_refusal_of_json_object(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = refuses_json_object(answers({"ok": True}))

    error = await send(
        fake_llm_server,
        ask(llm_for(fake_llm_server, max_retries=3), response_schema=SCHEMA, response_form="json_object"),
    )

    assert isinstance(error, FormUnsupportedError) and error.form == "json_object"
    assert fake_llm_server.request_count == 1


@pytest.mark.parametrize("style", ["ollama", "llama_server"])
async def test_a_server_refusing_tools_is_a_tools_refusal_whatever_its_status(
    fake_llm_server: FakeLLMServer, style: str
) -> None:
    fake_llm_server.default = refuses_tools(answers({"ok": True}), style=style)  # type: ignore[arg-type]

    error = await send(fake_llm_server, ask(llm_for(fake_llm_server, max_retries=3), tools=[CALC_TOOL]))

    assert isinstance(error, ToolsUnsupportedError) and error.form == "tools"
    assert fake_llm_server.request_count == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(422, "messages: field required", type_="invalid_request_error"),
        Reply.error(404, "model 'tiny' not found, try pulling it first"),
        Reply.error(403, "this key may not use this model"),
        Reply.error(413, "request entity too large"),
        # A validation error a server reports as a 500 (FastAPI behind a catch-all handler).
        Reply.error(500, "1 validation error: ('body', 'temperature') Input should be less than 2"),
    ],
    ids=["422", "404", "403", "413", "validation-500"],
)
async def test_errors_that_will_repeat_fail_at_once(
    fake_llm_server: FakeLLMServer, reply: Reply
) -> None:
    fake_llm_server.default = reply

    error = await send(fake_llm_server, ask(llm_for(fake_llm_server, max_retries=3)))

    assert type(error) is LLMError
    assert fake_llm_server.request_count == 1


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_rate_limits_timeouts_and_plain_server_errors_are_retried(
    fake_llm_server: FakeLLMServer, status: int
) -> None:
    fake_llm_server.add(Reply.error(status, "busy, try later", retry_after=0), Reply.text("fine"))

    response = await send(fake_llm_server, ask(llm_for(fake_llm_server, max_retries=3)))

    assert not isinstance(response, Exception), response
    assert response.content == "fine"
    assert fake_llm_server.request_count == 2


async def test_a_connection_that_fails_is_retryable(fake_llm_server: FakeLLMServer) -> None:
    llm = llm_for(fake_llm_server, max_retries=1)
    dead = llm.model_copy(update={"api_base": "http://127.0.0.1:9/v1"})  # nothing listens there

    error = await send(fake_llm_server, ask(dead))

    assert isinstance(error, RetryableLLMError)


_COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}  # fmt: skip


@pytest.mark.parametrize(
    "refusal",
    [
        Reply.error(400, "Your organization must be verified to stream this model.", type_="invalid_request_error"),
        Reply.error(400, "Unrecognized request argument supplied: stream_options", type_="invalid_request_error"),
        Reply.malformed(json.dumps(_COMPLETION).encode()),  # a JSON body, not an event stream
    ],
    ids=["openai-verify", "stream_options", "json-body"],
)
async def test_a_server_refusing_to_stream_is_asked_unstreamed_and_never_streamed_to_again(
    fake_llm_server: FakeLLMServer, refusal: Reply
) -> None:
    fake_llm_server.default = lambda request: refusal if request.stream else Reply.text("fine")
    sink = RecordingSink()
    caller = caller_with(sink, path=_path[0])
    llm = llm_for(fake_llm_server, max_retries=0)

    first = await caller.call(ask(llm, stream=True))
    second = await caller.call(ask(llm, stream=True))

    assert (first.content, second.content) == ("fine", "fine")
    assert [r.stream for r in fake_llm_server.requests] == [True, False, False]
    assert caller.capabilities.refuses(llm, "stream")
    [failed] = sink.of_type("llm.failed")
    assert failed.data["retrying"] is True and failed.data["negotiated"] is True


async def test_a_streamed_error_echoing_the_stream_key_is_not_a_refusal_to_stream(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = Reply.error(
        400, "Input should be less than 2: {'temperature': 3, 'stream': True}", type_="invalid_request_error"
    )

    error = await send(fake_llm_server, ask(llm_for(fake_llm_server), stream=True))

    assert type(error) is LLMError
    assert fake_llm_server.request_count == 1
