"""Builders for the plan and run API tests: a private crew, a drafted plan, API.md's error shape."""

from __future__ import annotations

from typing import Any

from ninja.testing import TestClient

from agents.models import Agent
from crews.models import Crew, Task


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """An error in API.md's format with ``status`` (and ``code``)."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail", "code", "errors"}, body
    if code is not None:
        assert body["code"] == code, body
    return body


def assert_invalid(response: Any, field: str) -> dict[str, Any]:
    """A 422 whose first error names ``field``."""
    body = assert_error(response, 422)
    assert body["errors"][0]["field"] == field, body
    return body


def private_crew(owner: Any, *, name: str = "Tides", **fields: Any) -> Crew:
    """A planning crew nobody else sees: Research → Report about ``{topic}``, no default inputs."""
    agent = Agent.objects.create(
        owner=owner, name=f"{name} writer", role="Writer on {topic}", goal="Write", backstory=""
    )
    crew = Crew.objects.create(owner=owner, name=name, planning=True, **fields)
    crew.agents.set([agent])
    for order, task in enumerate(["Research", "Report"]):
        Task.objects.create(
            crew=crew, order=order, name=task, agent=agent,
            description=f"Do the {task} work about {{topic}}", expected_output=f"The {task}",
        )  # fmt: skip
    return crew


def draft_plan(
    client: TestClient, user: Any, crew: Crew, capture: Any, inputs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Draft a plan through the API; the background drafting (demo model) runs on commit."""
    with capture(execute=True):
        response = client.post(
            f"/crews/{crew.pk}/plans", json={"inputs": inputs or {"topic": "tides"}}, user=user
        )
    assert response.status_code == 202, response.content
    plan = client.get(f"/plans/{response.json()['id']}", user=user).json()
    assert plan["status"] == "draft", plan
    return plan


def approve(client: TestClient, user: Any, plan_id: int) -> dict[str, Any]:
    response = client.post(f"/plans/{plan_id}/approve", user=user)
    assert response.status_code == 200, response.content
    return response.json()
