"""Builders for crew-runtime tests: a two-task crew over the scripted LLM."""

from __future__ import annotations

from typing import Any

from agents.engine.specs import AgentSpec
from crews.engine.specs import CrewSpec, CrewTaskSpec
from tests.agents.engine.helpers import make_agent, make_llm


def researcher(**kw: Any) -> AgentSpec:
    return make_agent(key="a1", name="Researcher", role="{topic} Researcher", goal="Find facts on {topic}", **kw)


def writer(**kw: Any) -> AgentSpec:
    return make_agent(key="a2", name="Writer", role="Writer", goal="Write reports", **kw)


def make_crew(*, tasks: int = 2, **kw: Any) -> CrewSpec:
    specs = [
        CrewTaskSpec(key="11", number=1, name="Research", description="Research {topic}", expected_output="Ten bullets", agent_key="a1"),
        CrewTaskSpec(key="12", number=2, name="Report", description="Write a report", expected_output="A report", agent_key="a2", context_keys=("11",)),
        CrewTaskSpec(key="13", number=3, name="Summary", description="Summarise", expected_output="A line", agent_key="a2"),
    ][:tasks]
    values: dict[str, Any] = {
        "key": "crew-1", "name": "Demo", "agents": (researcher(), writer()), "tasks": tuple(specs),
        "planning": True, "planning_llm": make_llm(key="planner", supports_tools=True),
    }
    values.update(kw)
    return CrewSpec(**values)
