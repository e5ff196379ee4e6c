"""What the model says in bench/engine.py: the scenarios' scripts (one neutral script, turned into
ScriptedGateway items or fake-server replies, so both gateways get the same conversation), the
agent and the crew that run them, and the fake OpenAI server in a process of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from _common import ROOT

from agents.engine.llm import (
    LLMResponse,
    tool_call_response,
)
from agents.engine.specs import AgentSpec, LLMSpec, PlanningConfigSpec, TaskSpec, ToolRef
from crews.engine.specs import CrewSpec, CrewTaskSpec

PLAN_STEPS = 5
CREW_TASKS = 10

ENGINE_SCRIPT = str(ROOT / "bench" / "engine.py")  # the fake LLM re-runs it in a mode of its own


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    arguments: dict[str, Any]


Line = Say | Call


LOREM = (
    "Quarterly revenue grew 12% to 4.2M, driven by the enterprise tier; churn fell to 2.1% after "
    "the onboarding rework. Support tickets per account dropped by a third, and the two largest "
    "customers renewed for three years. Risks: one supplier contract ends in March."
)


def final(text: str) -> Say:
    return Say(f"Thought: I now know the final answer\nFinal Answer: {text}")


def observation(number: int) -> Say:
    return Say(
        json.dumps(
            {
                "success": True,
                "learned": f"Step {number} produced the figures the next step needs.",
                "plan_valid": True,
                "refinements": [],
                "needs_replan": False,
                "replan_reason": "",
                "goal_achieved": False,
            }
        )
    )


def plan_and_act_script() -> list[Line]:
    """The plan (a tool call); per step an answer (step 2 calls the calculator first) and an
    observation; the synthesis."""
    steps = [
        {
            "number": n,
            "description": f"Step {n}: work out part {n} of the quarterly summary",
            "tool": "calculator" if n == 2 else None,
            "depends_on": [n - 1] if n > 1 else [],
        }
        for n in range(1, PLAN_STEPS + 1)
    ]
    script: list[Line] = [
        Call(
            "create_plan",
            {"plan": "Summarise the quarter in five steps.", "steps": steps, "ready": True},
        )
    ]
    for n in range(1, PLAN_STEPS + 1):
        if n == 2:
            script.append(Call("calculator", {"expression": "4200000 * 0.12"}))
        # Short step results: the last one is no full answer, so synthesis runs (one more call).
        script.append(final(f"Part {n}: {LOREM[: 60 + 10 * n]}"))
        script.append(observation(n))
    script.append(Say(f"## Quarterly summary\n\n{LOREM}\n\n{LOREM}"))
    return script


def crew_script() -> list[Line]:
    """Per task: one calculator call, then a final answer that later tasks get as context."""
    script: list[Line] = []
    for n in range(1, CREW_TASKS + 1):
        script.append(Call("calculator", {"expression": f"{n} * 1200 * 0.15"}))
        script.append(final(f"Task {n} result: {n * 180}. {LOREM}"))
    return script


def as_scripted(script: Sequence[Line]) -> list[LLMResponse | str]:
    return [
        tool_call_response(line.name, line.arguments, call_id=f"call_{i}")
        if isinstance(line, Call)
        else line.text
        for i, line in enumerate(script)
    ]


SCRIPTS: dict[str, Callable[[], list[Line]]] = {
    "plan_and_act": plan_and_act_script,
    "crew": crew_script,
}


def as_replies(script: Sequence[Line]) -> list[Any]:
    from tests.fakes.openai_server import Reply

    return [
        Reply.tool_call(line.name, line.arguments, call_id=f"call_{i}")
        if isinstance(line, Call)
        else Reply.text(line.text)
        for i, line in enumerate(script)
    ]


def plan_and_act_agent(llm: LLMSpec) -> tuple[AgentSpec, TaskSpec]:
    agent = AgentSpec(
        key="analyst",
        name="Analyst",
        role="Financial analyst",
        goal="Explain the quarter's numbers",
        backstory="You have read every board pack since 2019.",
        llm=llm,
        tools=(ToolRef(name="calculator"),),
        # Medium effort: every step is observed by an LLM call, replans only on failure.
        planning_config=PlanningConfigSpec(reasoning_effort="medium", max_attempts=1),
    )
    task = TaskSpec(
        key="t1",
        description="Write the quarterly summary for the board from the finance export.",
        expected_output="A one-page summary with revenue, churn, support load and risks.",
    )
    return agent, task


def react_crew(llm: LLMSpec) -> CrewSpec:
    roles = ("Researcher", "Analyst", "Writer")
    agents = tuple(
        AgentSpec(
            key=f"a{i}",
            name=role,
            role=role,
            goal=f"Do the {role.lower()}'s part of the quarterly report",
            backstory="You are careful with numbers and cite them.",
            llm=llm,
            tools=(ToolRef(name="calculator"),),
        )
        for i, role in enumerate(roles)
    )
    tasks = tuple(
        CrewTaskSpec(
            key=f"t{n}",
            number=n,
            name=f"Section {n}",
            description=f"Write section {n} of the quarterly report; compute its figures with the calculator.",
            expected_output="A paragraph with the computed figures.",
            agent_key=agents[(n - 1) % len(agents)].key,
        )
        for n in range(1, CREW_TASKS + 1)
    )
    return CrewSpec(key="report", name="Quarterly report", agents=agents, tasks=tasks)


def serve_fake_llm(kind: str) -> None:
    """``--serve-fake-llm KIND``: the fake OpenAI server in a process of its own, as a real endpoint
    is, so its threads never take the GIL from the engine. It answers the scenario's script in
    order, over and over, prints its base URL, and stops when its stdin closes.
    """
    from tests.fakes.openai_server import FakeLLMServer

    replies = as_replies(SCRIPTS[kind]())
    numbers = itertools.count()
    with FakeLLMServer() as server:
        server.default = lambda _request: replies[next(numbers) % len(replies)]
        print(server.base_url, flush=True)
        sys.stdin.read()


@contextlib.contextmanager
def fake_llm_server_process(kind: str) -> Iterator[str]:
    """Start the fake server for the ``kind`` script in a child process; yield its base URL."""
    process = subprocess.Popen(
        [sys.executable, ENGINE_SCRIPT, "--serve-fake-llm", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the fake LLM server did not start (it said {base_url!r})")
        yield base_url
    finally:
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
