"""What the per-call and per-chunk paths made cheaper for issue #20 still do: a cancel races the
call, held delta text waits its full time, and a streamed chunk decodes as ``json.loads`` would."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agents.engine.calls import DeltaBatcher
from agents.engine.events import RecordingSink
from agents.engine.llm import LLMError, LLMRequest, LLMResponse
from agents.engine.runtime import Cancelled, CancelToken, EventEmitter, FakeClock, SystemClock
from agents.engine.wire import WireGateway, _chunk_json
from agents.engine.wire_http import SSELines
from tests.agents.engine.test_calls import ask, caller_for
from tests.agents.engine.test_gateway import llm_for
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture


async def test_a_race_returns_the_calls_answer_or_raises_its_error() -> None:
    token = CancelToken()

    async def answer() -> str:
        await asyncio.sleep(0)
        return "ok"

    async def failing() -> str:
        raise LLMError("down")

    assert await token.race(answer()) == "ok"
    with pytest.raises(LLMError, match="down"):
        await token.race(failing())
    assert not token._waiters


async def test_a_cancel_abandons_the_call_in_flight_and_a_timeout_around_the_race_takes_it_down() -> None:
    token = CancelToken()
    started = asyncio.Event()
    ended: list[str] = []

    async def slow() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append("cancelled")
            raise

    racing = asyncio.ensure_future(token.race(slow()))
    await started.wait()
    token.cancel("stopped")
    with pytest.raises(Cancelled, match="stopped"):
        await racing
    assert ended == ["cancelled"] and not token._waiters

    started.clear()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(CancelToken().race(slow()), timeout=0.05)
    await asyncio.sleep(0)
    assert ended == ["cancelled", "cancelled"]


def test_the_system_clock_is_the_monotonic_clock() -> None:
    import time

    before = time.monotonic()
    assert before <= SystemClock().monotonic() <= time.monotonic()


async def test_text_held_after_a_batch_went_out_waits_its_full_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # One timer serves the call's batches: armed by the first held text, it must not send text
    # held after a batch went out before that text has waited MAX_WAIT itself.
    monkeypatch.setattr(DeltaBatcher, "MAX_WAIT", 0.3)
    loop = asyncio.get_running_loop()
    clock, sink = FakeClock(), RecordingSink()
    sent_at: dict[str, float] = {}

    class TimedSink(RecordingSink):
        async def emit(self, event: Any) -> None:
            sent_at[event.data.get("text", event.type)] = loop.time()
            await sink.emit(event)

    held_at: dict[str, float] = {}

    class Gateway:
        async def complete(self, request: LLMRequest, *, on_delta: Any = None) -> LLMResponse:
            await on_delta("a")  # held: the timer is armed
            await asyncio.sleep(0.1)
            await on_delta("b" * 64)  # a full batch goes out at once
            await asyncio.sleep(0.05)
            held_at["tail"] = loop.time()
            await on_delta(" tail")  # held again, while the first timer is still armed
            await asyncio.sleep(0.6)  # the model pauses
            return LLMResponse(content="a" + "b" * 64 + " tail")

    caller = caller_for(Gateway(), clock=clock, sink=sink)  # type: ignore[arg-type]
    caller.emit = EventEmitter(sink=TimedSink(), clock=clock)
    await caller.call(ask(stream=True))
    assert [e.data["text"] for e in sink.of_type("llm.delta")] == ["a" + "b" * 64, " tail"]
    assert sent_at[" tail"] >= held_at["tail"] + 0.3 - 0.02  # its own wait, not the first timer's
    assert sent_at[" tail"] < sent_at["llm.completed"]  # sent during the pause, not at the end


@pytest.mark.parametrize(
    "payload", ['{"a": 1}', "[1, 2]", '"text"', "NaN", '{"a": "\\ud800"}', '{"a": 1} {"b": 2}', "{", "", "\ufeff{}",
                '{"a": 1}x', "nul"],
)
def test_a_chunk_decodes_as_json_loads_would(payload: str) -> None:
    try:
        expected: Any = json.loads(payload)
    except ValueError:
        with pytest.raises(ValueError):
            _chunk_json(payload)
    else:
        assert repr(_chunk_json(payload)) == repr(expected)


async def test_a_chunk_that_is_not_json_fails_the_call_after_what_came_before(fake_llm_server: FakeLLMServer) -> None:
    good = json.dumps({"choices": [{"index": 0, "delta": {"content": "Half"}, "finish_reason": None}]})
    fake_llm_server.add(Reply(raw=f"data: {good}\n\ndata: {{oops\n\n".encode(), raw_type="text/event-stream"))
    heard: list[str] = []

    async def on_delta(text: str) -> None:
        heard.append(text)

    with pytest.raises(LLMError, match="a streamed chunk is not valid JSON"):
        await WireGateway().complete(ask(llm_for(fake_llm_server), stream=True), on_delta=on_delta)
    assert heard == ["Half"]


def test_lines_are_cut_at_each_read_and_whole_across_reads() -> None:
    lines = SSELines()
    assert lines.feed(b"data: {}\r\n\r\ndata: \xc3") == ["data: {}", "", "", ""]
    assert lines.feed(b"\xa9 more") == []
    assert lines.feed(b"\n: ping\n") == ["data: \u00e9 more", ": ping"]
    assert lines.feed(b"data: \xff\n") == ["data: \ufffd"]
    assert lines.feed(b"data: last") == [] and lines.end() == ["data: last"] and lines.end() == []
    wide = SSELines("utf-16")
    body = "data: ça\r\ndata: x".encode("utf-16")
    assert wide.feed(body[:7]) + wide.feed(body[7:]) == ["data: ça", ""] and wide.end() == ["data: x"]
