"""bench/peer.py's fake model against our engine: every workload completes on the answers it is
given, with the calls the bench's table counts (a prompt change that stops the fake recognising a
planner request would otherwise show up only as a failed or skewed bench run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from engine_runs import Shared  # noqa: E402
from peer_ours import llm_for, work  # noqa: E402
from peer_replies import ANSWER, reply_for  # noqa: E402

from agents.engine.wire import WireGateway  # noqa: E402
from tests.fakes.openai_server import FakeLLMServer  # noqa: E402


@pytest.mark.parametrize(
    ("workload", "calls", "first_tool"),
    [("W1", 5, "submit_crew_plan"), ("W2", 2, None), ("W3", 12, "create_plan"), ("W4", 21, "submit_crew_plan")],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_each_workload_runs_to_its_answer_on_the_fake_model(
    workload: str, calls: int, first_tool: str | None, stream: bool
) -> None:
    gateway = WireGateway()
    with FakeLLMServer() as server:
        server.default = reply_for
        try:
            assert await work(Shared(), gateway, workload, llm_for(server.base_url, stream))
        finally:
            await gateway.aclose()
        bodies = server.bodies()
    assert len(bodies) == calls
    assert all(bool(b.get("stream")) == stream for b in bodies)
    offered = [t["function"]["name"] for t in bodies[0].get("tools") or []]
    assert (first_tool in offered) if first_tool else not offered


def test_a_crew_plan_request_gets_steps_for_every_task_it_lists() -> None:
    from tests.fakes.openai_server import RecordedRequest

    def request(body: dict) -> RecordedRequest:
        return RecordedRequest("POST", "/v1/chat/completions", {}, b"", body, 0.0)

    ours = reply_for(request({
        "messages": [{"role": "user", "content": "## Task 1: A\nx\n\n## Task 2: B\ny\n\n## Task 3: C\nz"}],
        "tools": [{"type": "function", "function": {"name": "submit_crew_plan"}}],
    }))  # fmt: skip
    assert '"task_number": 3' in ours.calls[0].arguments
    assert '"task_number": 4' not in ours.calls[0].arguments
    crewai = reply_for(request({
        "messages": [{"role": "user", "content": "Task Number 1 - A ... Task Number 2 - B"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "PlannerTaskPydanticOutput"}},
    }))  # fmt: skip
    assert crewai.content is not None and crewai.content.count('"task_number"') == 2
    assert reply_for(request({"messages": [{"role": "user", "content": "Write section 1."}]})).content == ANSWER
