"""CrewAI's side of bench/peer.py, run INSIDE the throwaway CrewAI venv (``make bench-peer``).

It imports only crewai and the standard library. Each line on stdin names a kickoff as JSON
(``{"workload": "W1", "stream": true, "base_url": "http://127.0.0.1:…/v1"}``); each answer on
stdout is JSON: the process's CPU seconds (every thread: CrewAI's event bus runs handlers in
threads) and wall seconds of the kickoff, and whether it ended with an answer. Everything CrewAI
itself prints goes to stderr, so stdout carries only the answers.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any

# Set before crewai is imported: no telemetry, no tracing prompt, no proxy on loopback.
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true",
    CREWAI_DISABLE_TRACKING="true",
    CREWAI_TRACING_ENABLED="false",
    OTEL_SDK_DISABLED="true",
    NO_PROXY="127.0.0.1,localhost",
    no_proxy="127.0.0.1,localhost",
)

ANSWERS = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)  # CrewAI's console output goes to stderr

from crewai import LLM, Agent, Crew, Task  # noqa: E402
from crewai.agent.planning_config import PlanningConfig  # noqa: E402

ROLES = ("Researcher", "Analyst", "Writer")
SETTLE = 0.02  # after kickoff: work CrewAI's event bus threads still do for it is counted


def llm_for(base_url: str, stream: bool) -> Any:
    # "openai/…" with a base URL: CrewAI's native OpenAI provider (the openai SDK), its default
    # route for an OpenAI-compatible endpoint.
    return LLM(model="openai/fake-model", base_url=base_url, api_key="fake-key-for-the-bench", stream=stream)


def crew_for(workload: str, llm: Any) -> Any:
    """W1/W4: a planned crew of 2/10 tasks; W2: W1 without planning; W3: one agent's Plan-and-Act."""
    if workload == "W3":
        agent = Agent(
            role="Financial analyst", goal="Explain the quarter's numbers",
            backstory="You have read every board pack since 2019.", llm=llm,
            # Medium effort: every step observed by an LLM call, replans only on failure.
            planning_config=PlanningConfig(reasoning_effort="medium", max_attempts=1),
        )  # fmt: skip
        task = Task(
            description="Write the quarterly summary for the board from the finance export.",
            expected_output="A one-page summary with revenue, churn, support load and risks.",
            agent=agent,
        )
        return Crew(agents=[agent], tasks=[task])
    count = 10 if workload == "W4" else 2
    agents = [
        Agent(role=role, goal=f"Do the {role.lower()}'s part of the quarterly report",
              backstory="You are careful with numbers and cite them.", llm=llm)
        for role in ROLES[: min(count, len(ROLES))]
    ]  # fmt: skip
    tasks = [
        Task(
            description=f"Write section {n} of the quarterly report.",
            expected_output="A paragraph with the figures.",
            agent=agents[(n - 1) % len(agents)],
        )
        for n in range(1, count + 1)
    ]
    planning = workload != "W2"
    return Crew(agents=agents, tasks=tasks, planning=planning, planning_llm=llm if planning else None)


def kickoff(command: dict[str, Any]) -> dict[str, Any]:
    # The crew is built outside the window, as ours is: its specs come from the database.
    crew = crew_for(command["workload"], llm_for(command["base_url"], command["stream"]))
    started, cpu = time.perf_counter(), time.process_time()
    try:
        output = crew.kickoff()
        ok, error = bool(output.raw), ""
    except Exception:  # noqa: BLE001 - reported to the parent, which stops the bench
        ok, error = False, traceback.format_exc(limit=3)
    wall = time.perf_counter() - started
    time.sleep(SETTLE)
    return {"cpu": time.process_time() - cpu, "wall": wall, "ok": ok, "error": error}


def main() -> None:
    import crewai

    print(json.dumps({"version": crewai.__version__, "python": sys.version.split()[0]}), file=ANSWERS, flush=True)
    for line in sys.stdin:
        print(json.dumps(kickoff(json.loads(line))), file=ANSWERS, flush=True)


if __name__ == "__main__":
    main()
