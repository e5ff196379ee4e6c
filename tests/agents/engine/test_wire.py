"""The direct path to OpenAI-compatible endpoints (agents.engine.wire, issue #20): which models take
it, and what only it handles. What both paths share is tested on each in test_gateway.py and
test_gateway_refusals.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agents.engine.demo import DemoGateway
from agents.engine.gateway import LiteLLMGateway, RoutingGateway
from agents.engine.llm import LLMError, RetryableLLMError
from agents.engine.specs import LLMSpec
from agents.engine.wire import WireGateway
from tests.agents.engine.test_gateway import ask, llm_for
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture


def test_openai_compatible_models_go_direct_and_every_other_provider_through_litellm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PLANNER_LLM_PATH", raising=False)
    gateway = RoutingGateway()
    assert isinstance(gateway.route(LLMSpec(key="a", model="openai/gpt-4o-mini")), WireGateway)
    assert isinstance(gateway.route(LLMSpec(key="b", model="openai/local-model", api_base="http://x/v1")), WireGateway)
    assert isinstance(gateway.route(LLMSpec(key="c", model="ollama/llama3.2")), LiteLLMGateway)
    assert isinstance(gateway.route(LLMSpec(key="d", model="anthropic/claude-3-5-haiku")), LiteLLMGateway)
    assert isinstance(gateway.route(LLMSpec(key="e", model="demo/offline")), DemoGateway)


def test_planner_llm_path_litellm_sends_every_model_through_litellm_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANNER_LLM_PATH", "litellm")
    assert isinstance(RoutingGateway().route(LLMSpec(key="a", model="openai/gpt-4o-mini")), LiteLLMGateway)


async def test_the_provider_gets_the_model_name_without_its_prefix_and_no_litellm_switches(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.add(Reply.text("fine"))
    llm = llm_for(fake_llm_server, params={"temperature": 0.2, "drop_params": True, "extra_headers": {"X-Team": "ops"},
                                            "extra_body": {"top_k": 5}})
    await WireGateway().complete(ask(llm, stream=True))
    [request] = fake_llm_server.requests
    assert request.body["model"] == "fake-model"
    assert request.body["temperature"] == 0.2 and request.body["top_k"] == 5
    assert "drop_params" not in request.body and "extra_body" not in request.body
    assert request.headers.get("x-team") == "ops"
    assert request.body["stream_options"] == {"include_usage": True}


async def test_an_error_sent_inside_a_stream_is_an_error_of_its_kind(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(
        Reply.fails_mid_stream("Half an ans", "CUDA out of memory", code=500),
        Reply.fails_mid_stream("Half an ans", "invalid grammar", code=400),
    )
    deltas: list[str] = []

    async def heard(text: str) -> None:
        deltas.append(text)

    with pytest.raises(RetryableLLMError, match="CUDA out of memory") as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server), stream=True), on_delta=heard)
    assert raised.value.kind == "server_error"
    assert "".join(deltas) == "Half an ans"  # what came before the error was heard
    with pytest.raises(LLMError, match="invalid grammar") as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server), stream=True))
    assert type(raised.value) is LLMError  # a 400 would fail again


async def test_connections_are_kept_alive_between_calls_on_one_loop(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("one"), Reply.text("two"), Reply.text("three"))
    gateway = WireGateway()
    for _ in range(3):
        await gateway.complete(ask(llm_for(fake_llm_server), stream=True))
    assert len({r.client_port for r in fake_llm_server.requests}) == 1


async def test_a_redirect_is_reported_with_where_it_points_not_followed(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply(status=307, raw=b"", headers=(("Location", "https://llm.example/v1/chat/completions"),)))
    with pytest.raises(LLMError, match=r"redirects to https://llm\.example/v1/chat/completions") as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server)))
    assert type(raised.value) is LLMError
    assert fake_llm_server.request_count == 1


async def test_an_error_sent_with_a_200_keeps_the_providers_words_and_kind(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply(raw=b'{"error": {"message": "Incorrect API key provided", "code": 401}}'))
    with pytest.raises(LLMError, match="Incorrect API key provided") as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server)))
    assert raised.value.kind == "auth"


async def test_closing_a_loops_client_closes_its_connections(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("one"), Reply.text("two"))
    gateway = WireGateway()
    await gateway.complete(ask(llm_for(fake_llm_server)))
    [client] = gateway._clients.values()
    await gateway.aclose()
    assert client.closed and not gateway._clients
    await gateway.complete(ask(llm_for(fake_llm_server)))  # a new client, a new connection
    assert len({r.client_port for r in fake_llm_server.requests}) == 2


def test_tool_call_fragments_without_an_index_continue_the_call_under_way() -> None:
    from agents.engine.wire import _Stream

    state = _Stream()
    for fragment in (
        {"id": "c1", "function": {"name": "calc", "arguments": ""}},
        {"function": {"arguments": '{"a":'}},
        {"function": {"name": "calc", "arguments": "1}"}},  # a server repeating the name whole
        {"id": "c2", "function": {"name": "look", "arguments": {"q": "x"}}},  # arguments as an object
    ):
        state.chunk({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
    assert [(c[0], c[1], "".join(c[2])) for c in state.calls.values()] == [
        ("c1", "calc", '{"a":1}'), ("c2", "look", '{"q": "x"}'),
    ]


def test_malformed_tool_calls_and_other_choices_are_handled() -> None:
    from agents.engine.wire import _Stream

    state = _Stream()
    state.chunk({"choices": [{"index": 1, "delta": {"content": "the second choice"}}]})
    state.chunk({"choices": [{"index": 0, "delta": {"reasoning": "thinking…"}}]})
    assert state.text == [] and state.first  # a thinking model counts as answering
    with pytest.raises(LLMError, match="not a list"):
        state.chunk({"choices": [{"index": 0, "delta": {"tool_calls": "calc"}}]})


def closed_address() -> str:
    """An http:// address on this host where nothing listens (a proxy that is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def proxy_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


async def test_the_proxy_the_environment_names_is_used_unless_no_proxy_says_otherwise(
    fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed = closed_address()
    proxy_env(monkeypatch, HTTP_PROXY=closed)
    with pytest.raises(RetryableLLMError) as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server)))
    assert raised.value.kind == "unreachable" and fake_llm_server.request_count == 0
    proxy_env(monkeypatch, HTTP_PROXY=closed, NO_PROXY="localhost,127.0.0.1")
    fake_llm_server.add(Reply.text("direct"))
    assert (await WireGateway().complete(ask(llm_for(fake_llm_server)))).content == "direct"
    # The fake server as the proxy: it gets the whole URL of a host it does not serve.
    proxy_env(monkeypatch, HTTP_PROXY=fake_llm_server.url)
    with pytest.raises(LLMError, match=r"no route http://llm\.invalid/v1/chat/completions"):
        await WireGateway().complete(ask(llm_for(fake_llm_server, api_base="http://llm.invalid/v1")))


async def test_a_netrc_entry_for_the_providers_host_changes_nothing(
    fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # aiohttp's own trust_env would add the .netrc login beside the key and refuse the request.
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login someone password secret\n")
    (tmp_path / ".netrc").chmod(0o600)
    monkeypatch.setenv("NETRC", str(tmp_path / ".netrc"))
    proxy_env(monkeypatch)
    fake_llm_server.add(Reply.text("fine"))
    assert (await WireGateway().complete(ask(llm_for(fake_llm_server)))).content == "fine"
    assert fake_llm_server.requests[0].authorization == "Bearer fake-key-0123456789abcdef"


async def test_a_star_anywhere_in_no_proxy_and_a_bracketed_ipv6_entry_bypass_the_proxy(
    fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As httpx read NO_PROXY: urllib's check honours only a list that is exactly "*"."""
    closed = closed_address()
    for no_proxy in ("localhost, *", " * ", "[::1],127.0.0.1"):
        proxy_env(monkeypatch, HTTP_PROXY=closed, NO_PROXY=no_proxy)
        fake_llm_server.add(Reply.text("direct"))
        assert (await WireGateway().complete(ask(llm_for(fake_llm_server)))).content == "direct", no_proxy


async def test_a_proxy_login_goes_to_the_proxy_as_its_own_header(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    proxy_env(monkeypatch, HTTP_PROXY=f"http://ann:s3cret@127.0.0.1:{port}")
    llm = LLMSpec(key="p", model="openai/m", api_base="http://llm.invalid/v1", api_key="sk-proxied-key", max_retries=0)
    async with server:
        with pytest.raises(LLMError) as raised:
            await WireGateway().complete(ask(llm))
    head = seen[0].decode().lower()
    assert head.startswith("post http://llm.invalid/v1/chat/completions")  # the whole URL, to the proxy
    assert "proxy-authorization: basic yw5uonmzy3jlda==" in head  # ann:s3cret
    assert "s3cret" not in str(raised.value)


async def test_a_key_with_a_line_break_fails_the_call_in_words_not_with_a_crash(
    fake_llm_server: FakeLLMServer,
) -> None:
    with pytest.raises(LLMError, match="could not be sent") as raised:
        await WireGateway().complete(ask(llm_for(fake_llm_server, api_key="sk-abc\nInjected: yes")))
    assert "sk-abc" not in str(raised.value) and fake_llm_server.request_count == 0


async def test_a_session_dropped_without_aclose_is_closed_on_its_own_loop(
    fake_llm_server: FakeLLMServer,
) -> None:
    """A gateway caught in a reference cycle: its session is closed by the loop, never left to
    aiohttp's finalizer ("Unclosed connector", sockets closed from the collecting thread)."""
    import asyncio
    import gc

    gateway = WireGateway()
    fake_llm_server.add(Reply.text("once"))
    await gateway.complete(ask(llm_for(fake_llm_server)))
    session = next(iter(gateway._clients.values())).session
    gateway.cycle = gateway  # type: ignore[attr-defined]
    del gateway
    gc.collect()
    for _ in range(5):
        await asyncio.sleep(0)
    assert session.closed


async def test_a_stream_cut_off_without_done_or_a_finish_reason_is_asked_again_not_kept() -> None:
    """A server that closes the connection mid-answer (Connection: close, no length): the part
    received is not the answer."""
    import asyncio
    import json as json_lib

    chunk = {"choices": [{"index": 0, "delta": {"content": "Half an ans"}}]}
    ending = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = f"data: {json_lib.dumps(chunk)}\n\n"
        if served:  # the second time, the whole answer: a finish reason, no [DONE] (still whole)
            body += f"data: {json_lib.dumps(ending)}\n\n"
        served.append(1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body.encode())
        await writer.drain()
        writer.close()

    served: list[int] = []
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    llm = LLMSpec(key="c", model="openai/m", api_base=base, api_key="sk-cut-key", max_retries=0)
    async with server:
        with pytest.raises(RetryableLLMError, match="ended before the answer did"):
            await WireGateway().complete(ask(llm, stream=True))
        whole = await WireGateway().complete(ask(llm, stream=True))
    assert whole.content == "Half an ans" and whole.finish_reason == "stop"
