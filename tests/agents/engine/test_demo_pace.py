"""The offline demo model paces itself like a hosted one (ENGINE.md §7) and stops when asked."""

from __future__ import annotations

import asyncio
import time

import pytest

from agents.engine.demo import DemoGateway, Pace
from agents.engine.llm import LLMRequest
from tests.agents.engine.helpers import make_llm


def request(**llm: object) -> LLMRequest:
    spec = make_llm(model="demo/offline", stream=True, **llm)
    return LLMRequest(llm=spec, messages=[{"role": "user", "content": "Current task: Write about tides\n\nBegin!"}],
                      purpose="react", stream=True)


async def test_a_paced_demo_waits_for_its_first_token_then_streams_at_its_rate() -> None:
    pieces: list[tuple[float, str]] = []
    started = time.monotonic()

    async def on_delta(text: str) -> None:
        pieces.append((time.monotonic() - started, text))

    response = await DemoGateway(Pace(first_token_seconds=0.2, tokens_per_second=400)).complete(
        request(), on_delta=on_delta)

    assert "".join(p for _, p in pieces) == response.content
    assert len(pieces) >= 5 and pieces[0][0] >= 0.2
    expected = 0.2 + len(response.content) / 4 / 400
    assert pieces[-1][0] >= expected * 0.9  # a steady rate: the whole answer takes its time


async def test_the_llms_params_override_the_pace_and_zero_answers_at_once() -> None:
    started = time.monotonic()
    await DemoGateway(Pace(first_token_seconds=5, tokens_per_second=1)).complete(
        request(params={"first_token_seconds": 0, "tokens_per_second": 0}))
    assert time.monotonic() - started < 0.5


async def test_a_stop_ends_a_paced_answer_at_once() -> None:
    call = asyncio.ensure_future(DemoGateway(Pace(first_token_seconds=30)).complete(request()))
    await asyncio.sleep(0.05)
    started = time.monotonic()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert time.monotonic() - started < 0.5
