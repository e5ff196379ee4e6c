"""The direct path's own reading of an event stream (agents.engine.wire_http, issue #20): a line or a
UTF-8 character cut between two network reads, the three line endings (aiohttp's own line reading
knows only ``\n``), a compressed body, a declared charset; and the provider's cookies, sent back."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator

import pytest

from agents.engine.wire import WireGateway
from agents.engine.wire_http import sse_lines
from tests.agents.engine.test_gateway import ask, llm_for
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture

# Two-, three- and four-byte UTF-8 characters.
TEXT = "Olá, mundo: 世界 ✓ 🎉 done"


@pytest.mark.parametrize("write_size", [1, 2, 3, 5, 64])
@pytest.mark.parametrize("line_ending", ["\n", "\r\n", "\r"])
async def test_a_stream_cut_anywhere_reads_as_the_answer_it_carries(
    fake_llm_server: FakeLLMServer, write_size: int, line_ending: str
) -> None:
    fake_llm_server.add(
        Reply.text(TEXT, chunks=["Olá, mun", "do: 世界 ✓", " 🎉 done"], write_size=write_size,
                   line_ending=line_ending, ascii_json=False)
    )  # fmt: skip
    deltas: list[str] = []

    async def heard(text: str) -> None:
        deltas.append(text)

    response = await WireGateway().complete(ask(llm_for(fake_llm_server), stream=True), on_delta=heard)
    assert response.content == TEXT
    assert deltas == ["Olá, mun", "do: 世界 ✓", " 🎉 done"]
    assert response.finish_reason == "stop"


async def test_the_connection_is_kept_after_a_stream_cut_into_bytes(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text(TEXT, write_size=1, line_ending="\r\n", ascii_json=False), Reply.text("two"))
    gateway = WireGateway()
    first = await gateway.complete(ask(llm_for(fake_llm_server), stream=True))
    second = await gateway.complete(ask(llm_for(fake_llm_server), stream=True))
    assert (first.content, second.content) == (TEXT, "two")
    assert len({r.client_port for r in fake_llm_server.requests}) == 1  # [DONE], then read to the end


async def test_a_line_separator_inside_a_chunks_json_does_not_cut_its_line(fake_llm_server: FakeLLMServer) -> None:
    # httpx's aiter_lines split at U+2028 as str.splitlines does, and the chunk's JSON broke.
    fake_llm_server.add(Reply.text("one\u2028two\u2029three", ascii_json=False))
    response = await WireGateway().complete(ask(llm_for(fake_llm_server), stream=True))
    assert response.content == "one\u2028two\u2029three"


async def lines_of(*reads: bytes, encoding: str = "utf-8") -> list[str]:
    async def body() -> AsyncIterator[bytes]:
        for data in reads:
            yield data

    return [line async for batch in sse_lines(body(), encoding) for line in batch]


async def test_lines_come_whole_whatever_the_reads_cut() -> None:
    encoded = "data: é€😀\n".encode()
    reads = [b"da", b"ta: {}\r", b"\n", b": ping\n", encoded[:7], encoded[7:9], encoded[9:], b"data: last"]
    lines = [line for line in await lines_of(*reads) if line]
    assert lines == ["data: {}", ": ping", "data: é€😀", "data: last"]  # the last line has no ending


async def test_a_declared_charset_is_decoded() -> None:
    body = "data: ça\r\n\r\ndata: [DONE]\n\n"
    latin = await lines_of(body.encode("latin-1"), encoding="iso8859-1")
    assert [line for line in latin if line] == ["data: ça", "data: [DONE]"]
    wide = body.encode("utf-16")
    assert [line for line in await lines_of(wide[:5], wide[5:11], wide[11:], encoding="utf-16") if line] == [
        "data: ça", "data: [DONE]"
    ]
    assert [line for line in await lines_of(body.encode(), encoding="no-such-charset") if line] == [
        "data: ça", "data: [DONE]"
    ]


async def test_a_gzipped_answer_is_decompressed(fake_llm_server: FakeLLMServer) -> None:
    stream = f"data: {json.dumps(chunk('ça'))}\n\ndata: [DONE]\n\n".encode()
    whole = json.dumps({"choices": [{"index": 0, "message": {"content": "çb"}, "finish_reason": "stop"}]}).encode()
    gzipped = (("Content-Encoding", "gzip"),)
    fake_llm_server.add(
        Reply(raw=gzip.compress(stream), raw_type="text/event-stream; charset=utf-8", headers=gzipped),
        Reply(raw=gzip.compress(whole), headers=gzipped),
    )
    gateway = WireGateway()
    assert (await gateway.complete(ask(llm_for(fake_llm_server), stream=True))).content == "ça"
    assert (await gateway.complete(ask(llm_for(fake_llm_server)))).content == "çb"
    assert "gzip" in fake_llm_server.requests[0].headers["accept-encoding"]


def chunk(text: str) -> dict[str, object]:
    return {"model": "m", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}


async def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert await lines_of(b"data: \xff\xfe ok\n") == ["data: \ufffd\ufffd ok"]


async def test_a_cookie_the_provider_sets_is_sent_back_on_the_next_call(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(
        Reply.text("one", headers=(("Set-Cookie", "lb=node-2; Path=/"),)), Reply.text("two"), Reply.text("three")
    )
    gateway = WireGateway()
    for stream in (True, False, True):
        await gateway.complete(ask(llm_for(fake_llm_server), stream=stream))
    assert [r.headers.get("cookie") for r in fake_llm_server.requests] == [None, "lb=node-2", "lb=node-2"]


async def test_on_a_loop_that_keeps_its_session_runs_share_connections_not_cookies(
    fake_llm_server: FakeLLMServer,
) -> None:
    """``keep_sessions_on`` (serve's loop): each run's gateway uses the loop's one session, which
    outlives the run's ``aclose``; a provider's cookie goes back on its own run's calls only."""
    import asyncio

    from agents.engine import wire

    fake_llm_server.add(
        Reply.text("one", headers=(("Set-Cookie", "lb=node-2; Path=/"),)), Reply.text("two"), Reply.text("three")
    )
    wire.keep_sessions_on(asyncio.get_running_loop())
    first, second = WireGateway(), WireGateway()
    await first.complete(ask(llm_for(fake_llm_server)))
    await first.aclose()  # the first run ends
    await second.complete(ask(llm_for(fake_llm_server)))
    await first.complete(ask(llm_for(fake_llm_server)))
    assert [r.headers.get("cookie") for r in fake_llm_server.requests] == [None, None, "lb=node-2"]
    assert len({r.client_port for r in fake_llm_server.requests}) == 1
    kept = wire._kept[asyncio.get_running_loop()]
    assert not kept.closed and kept.session.connector.limit == 0  # one pool for every run: no cap
    await wire.close_kept_sessions()
    assert kept.closed and asyncio.get_running_loop() not in wire._kept
    # A run still calling after the shutdown closed it gets a session of its own, closed with it.
    fake_llm_server.add(Reply.text("late"))
    await second.complete(ask(llm_for(fake_llm_server)))
    assert asyncio.get_running_loop() not in wire._kept and second._clients
    await second.aclose()
    assert not second._clients


def test_a_chunk_whose_first_choice_is_another_ones_still_gives_choice_zeros_text() -> None:
    from agents.engine.wire import _Stream

    state = _Stream()
    other_first = {"choices": [{"index": 1, "delta": {"content": "no"}}, {"index": 0, "delta": {"content": "yes"}}]}
    assert state.chunk(other_first) == "yes"
    assert state.chunk({"choices": [{"index": 0, "delta": None, "finish_reason": "stop"}]}) == ""
    assert (state.text, state.finish, state.first) == (["yes"], "stop", True)
