"""Our side of bench/peer.py: the four workloads on our engine, in a process of its own per path.

    .venv/bin/python bench/peer_ours.py direct|litellm

Same protocol as bench/peer_crewai.py: a JSON kickoff per line on stdin, a JSON answer per line
on stdout (the process's CPU seconds and wall seconds of the kickoff, and whether it succeeded).
A kickoff is what a worker does with a run, as bench/engine.py drives it: ``draft_crew_plan``
then ``run_crew`` with the drafted plan (W1, W4), ``run_crew`` alone (W2), ``run_agent`` on an
agent with a planning config (W3); one event loop, gateway and rate limiters for the process.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from typing import Any

import _common  # noqa: F401 - puts the repository on sys.path

os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from engine_runs import Shared  # noqa: E402

from agents.engine.agent import run_agent  # noqa: E402
from agents.engine.llm import Gateway  # noqa: E402
from agents.engine.specs import AgentSpec, LLMSpec, PlanningConfigSpec, TaskSpec  # noqa: E402
from crews.engine.kickoff import run_crew  # noqa: E402
from crews.engine.planner import draft_crew_plan  # noqa: E402
from crews.engine.specs import CrewSpec, CrewTaskSpec  # noqa: E402

ROLES = ("Researcher", "Analyst", "Writer")
SETTLE = 0.02  # after the run: litellm's logging Tasks of the last call are counted (as CrewAI's)


def llm_for(base_url: str, stream: bool) -> LLMSpec:
    return LLMSpec(
        key="fake", model="openai/fake-model", api_base=base_url, api_key="fake-key-for-the-bench",
        stream=stream, max_retries=0, timeout=10.0,
    )  # fmt: skip


def crew_for(workload: str, llm: LLMSpec) -> CrewSpec:
    """The crews of bench/peer_crewai.py: the same roles, texts and task counts."""
    count = 10 if workload == "W4" else 2
    agents = tuple(
        AgentSpec(key=f"a{i}", name=role, role=role, goal=f"Do the {role.lower()}'s part of the quarterly report",
                  backstory="You are careful with numbers and cite them.", llm=llm)
        for i, role in enumerate(ROLES[: min(count, len(ROLES))])
    )  # fmt: skip
    tasks = tuple(
        CrewTaskSpec(
            key=f"t{n}", number=n, name=f"Section {n}", description=f"Write section {n} of the quarterly report.",
            expected_output="A paragraph with the figures.", agent_key=agents[(n - 1) % len(agents)].key,
        )
        for n in range(1, count + 1)
    )  # fmt: skip
    planning = workload != "W2"
    return CrewSpec(key="report", name="Quarterly report", agents=agents, tasks=tasks, planning=planning,
                    planning_llm=llm if planning else None)  # fmt: skip


async def work(shared: Shared, gateway: Gateway, workload: str, llm: LLMSpec) -> bool:
    ctx, _sink = shared.context(gateway)
    if workload == "W3":
        agent = AgentSpec(
            key="analyst", name="Analyst", role="Financial analyst", goal="Explain the quarter's numbers",
            backstory="You have read every board pack since 2019.", llm=llm,
            planning_config=PlanningConfigSpec(reasoning_effort="medium", max_attempts=1),
        )  # fmt: skip
        task = TaskSpec(
            key="t1",
            description="Write the quarterly summary for the board from the finance export.",
            expected_output="A one-page summary with revenue, churn, support load and risks.",
        )
        return bool((await run_agent(ctx, agent, task)).output)
    crew = crew_for(workload, llm)
    plan = (await draft_crew_plan(ctx, crew, llm=llm)).steps if crew.planning else None
    result = await run_crew(ctx, crew, plan=plan)
    if result.failed:
        raise RuntimeError(result.error)
    return bool(result.output)


async def kickoff(shared: Shared, gateway: Gateway, command: dict[str, Any]) -> dict[str, Any]:
    llm = llm_for(command["base_url"], command["stream"])
    started, cpu = time.perf_counter(), time.process_time()
    try:
        ok, error = await work(shared, gateway, command["workload"], llm), ""
    except Exception:  # noqa: BLE001 - reported to the parent, which stops the bench
        ok, error = False, traceback.format_exc(limit=3)
    wall = time.perf_counter() - started
    await asyncio.sleep(SETTLE)
    return {"cpu": time.process_time() - cpu, "wall": wall, "ok": ok, "error": error}


async def main(path: str) -> None:
    if path == "litellm":
        from agents.engine.gateway import LiteLLMGateway

        gateway: Gateway = LiteLLMGateway()
    else:
        from agents.engine.wire import WireGateway

        gateway = WireGateway()
    shared = Shared()
    loop = asyncio.get_running_loop()
    print(json.dumps({"path": path}), flush=True)
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        print(json.dumps(await kickoff(shared, gateway, json.loads(line))), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
