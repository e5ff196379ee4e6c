"""API schemas of the crews app: crews and their tasks.

``XIn`` bodies create, ``XPatch`` bodies change only the fields they carry (fields that cannot be
empty refuse null), ``XOut`` is what the API returns. Bodies refuse unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict

from crews import selectors
from crews.models import Crew, Task
from planner_site.schemas import Id

Process = Literal["sequential", "hierarchical"]


class _Body(Schema):
    model_config = ConfigDict(extra="forbid")

    def service_fields(self) -> dict[str, Any]:
        """The fields the client sent, named as the services take them."""
        return self.model_dump(exclude_unset=True)


# Tasks -----------------------------------------------------------------------------------------


class _TaskBody(_Body):
    def service_fields(self) -> dict[str, Any]:
        fields = super().service_fields()
        if "context_task_ids" in fields:
            fields["context"] = fields.pop("context_task_ids")
        return fields


class TaskIn(_TaskBody):
    name: str
    description: str = Field(description="May use {input} placeholders.")
    expected_output: str = Field(description="May use {input} placeholders.")
    agent_id: Id | None = Field(None, description="One of your agents; it joins the crew.")
    context_task_ids: list[Id] = Field(
        default_factory=list, description="Earlier tasks of this crew whose output it receives."
    )
    async_execution: bool = False
    human_input: bool = Field(False, description="A person reviews the answer before it is used.")


class TaskPatch(_TaskBody):
    name: str = Field(None)
    description: str = Field(None)
    expected_output: str = Field(None)
    agent_id: Id | None = Field(None, description="null: no agent.")
    context_task_ids: list[Id] = Field(None)
    async_execution: bool = Field(None)
    human_input: bool = Field(None)


class TaskOut(Schema):
    id: int
    crew_id: int
    order: int = Field(description="0-based position in the crew; change it with reorder.")
    name: str
    description: str
    expected_output: str
    agent_id: int | None
    context_task_ids: list[int]
    async_execution: bool
    human_input: bool
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_context_task_ids(obj: Task) -> list[int]:
        return [t.pk for t in sorted(obj.context.all(), key=lambda t: (t.order, t.pk))]


class TaskReorderIn(_Body):
    task_ids: list[Id] = Field(description="Every task of the crew once, in the new order.")


class TaskListOut(Schema):
    items: list[TaskOut]
    count: int


# Crews -----------------------------------------------------------------------------------------


class CrewBudgetIn(_Body):
    max_tokens: int | None = Field(None, ge=1, description="null: unlimited.")
    max_cost_usd: Decimal | None = Field(None, gt=0, description="null: unlimited.")


class CrewBudgetOut(Schema):
    max_tokens: int | None
    max_cost_usd: float | None


class _CrewBody(_Body):
    def service_fields(self) -> dict[str, Any]:
        fields = super().service_fields()
        if "agent_ids" in fields:
            fields["agents"] = fields.pop("agent_ids")
        budget = fields.pop("budget", None) or {}
        fields.update({f"budget_{key}": value for key, value in budget.items()})
        return fields


class CrewIn(_CrewBody):
    name: str
    description: str = ""
    process: Process = "sequential"
    manager_llm_id: Id | None = Field(None, description="Required for hierarchical crews.")
    agent_ids: list[Id] = Field(default_factory=list, description="Your agents.")
    planning: bool = Field(False, description="Draft a plan for every task before running.")
    planning_llm_id: Id | None = Field(None, description="null: the site's default LLM.")
    review_plan: bool = Field(False, description="A run that drafts its plan waits for approval.")
    run_without_plan_on_failure: bool = False
    max_rpm: int | None = Field(None, ge=1)
    budget: CrewBudgetIn = Field(default_factory=CrewBudgetIn)
    default_inputs: dict[str, Any] = Field(default_factory=dict)
    shared: bool = Field(False, description="Everyone signed in can view it and its runs.")


class CrewPatch(_CrewBody):
    name: str = Field(None)
    description: str = Field(None)
    process: Process = Field(None)
    manager_llm_id: Id | None = None
    agent_ids: list[Id] = Field(
        None, description="The whole new list; an agent that still does a task cannot leave."
    )
    planning: bool = Field(None)
    planning_llm_id: Id | None = None
    review_plan: bool = Field(None)
    run_without_plan_on_failure: bool = Field(None)
    max_rpm: int | None = Field(None, ge=1)
    budget: CrewBudgetIn = Field(None, description="Changes only the limits it has.")
    default_inputs: dict[str, Any] = Field(None)
    shared: bool = Field(None)


class CrewOut(Schema):
    id: int
    name: str
    description: str
    process: Process
    manager_llm_id: int | None
    agent_ids: list[int]
    planning: bool
    planning_llm_id: int | None
    review_plan: bool
    run_without_plan_on_failure: bool
    max_rpm: int | None
    budget: CrewBudgetOut
    default_inputs: dict[str, Any]
    shared: bool
    input_names: list[str] = Field(
        description="Read-only: the {placeholders} in the agents' and tasks' texts."
    )
    tasks: list[TaskOut] = Field(description="Read-only here; change them under /api/tasks.")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_agent_ids(obj: Crew) -> list[int]:
        return [agent.pk for agent in obj.agents.all()]

    @staticmethod
    def resolve_budget(obj: Crew) -> dict[str, Any]:
        return {"max_tokens": obj.budget_max_tokens, "max_cost_usd": obj.budget_max_cost_usd}

    @staticmethod
    def resolve_input_names(obj: Crew) -> list[str]:
        return selectors.crew_input_names(crew=obj)

    @staticmethod
    def resolve_tasks(obj: Crew) -> list[Task]:
        return selectors.crew_tasks(crew=obj)
