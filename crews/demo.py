"""Demo data: CrewAI's documented "AI LLMs" crew and a "Trip planner" agent that plans (idempotent)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from agents.models import Agent
from crews.models import Crew, Task

RESEARCHER = {
    "name": "Senior Data Researcher",
    "role": "{topic} Senior Data Researcher",
    "goal": "Uncover cutting-edge developments in {topic}",
    "backstory": (
        "You're a seasoned researcher with a knack for uncovering the latest developments in "
        "{topic}. Known for your ability to find the most relevant information and present it in "
        "a clear and concise manner."
    ),
}
ANALYST = {
    "name": "Reporting Analyst",
    "role": "{topic} Reporting Analyst",
    "goal": "Create detailed reports based on {topic} data analysis and research findings",
    "backstory": (
        "You're a meticulous analyst with a keen eye for detail. You're known for your ability to "
        "turn complex data into clear and concise reports, making it easy for others to understand "
        "and act on the information you provide."
    ),
}
TRIP_PLANNER = {
    "name": "Trip planner",
    "role": "Trip Planner",
    "goal": "Plan practical, well-paced trips that fit the traveller's time and budget",
    "backstory": (
        "You have planned hundreds of city breaks. You balance sights, food and rest, and you "
        "always check opening days and travel times."
    ),
    "tools": ["current_datetime", "calculator"],
    "planning": True,
}
RESEARCH_TASK = {
    "name": "Research",
    "description": (
        "Conduct a thorough research about {topic}. Make sure you find any interesting and "
        "relevant information given the current year is {current_year}."
    ),
    "expected_output": "A list with 10 bullet points of the most relevant information about {topic}",
}
REPORT_TASK = {
    "name": "Report",
    "description": (
        "Review the context you got and expand each topic into a full section for a report. Make "
        "sure the report is detailed and contains any and all relevant information."
    ),
    "expected_output": (
        "A fully fledged report with the main topics, each with a full section of information. "
        "Formatted as markdown without '```'"
    ),
}
CREW_NAME = "AI LLMs"


def _agent(owner: Any, spec: dict[str, Any]) -> Agent:
    agent, _created = Agent.objects.get_or_create(owner=owner, name=spec["name"], defaults=spec)
    return agent


@transaction.atomic
def demo_seed(*, owner: Any) -> Crew:
    """Create the demo crew and agents for ``owner`` unless they exist (never overwrite edits)."""
    researcher = _agent(owner, RESEARCHER)
    analyst = _agent(owner, ANALYST)
    _agent(owner, TRIP_PLANNER)
    crew, created = Crew.objects.get_or_create(
        owner=owner,
        name=CREW_NAME,
        defaults={
            "description": "CrewAI's quick-start crew: research a topic, then write a report on it.",
            "planning": True,
            "shared": True,
            "default_inputs": {"topic": "AI LLMs", "current_year": "2026"},
        },
    )
    if created:
        crew.agents.set([researcher, analyst])
        research = Task.objects.create(crew=crew, order=0, agent=researcher, **RESEARCH_TASK)
        report = Task.objects.create(crew=crew, order=1, agent=analyst, **REPORT_TASK)
        report.context.set([research])
    return crew
