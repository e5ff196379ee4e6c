"""API schemas of the crews app: crews and their tasks, plans, runs and their events.

``XIn`` bodies create, ``XPatch`` bodies change only the fields they carry (fields that cannot be
empty refuse null), ``XOut`` is what the API returns. Bodies refuse unknown fields.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict, StringConstraints

from crews import selectors
from crews.models import (
    Crew,
    Plan,
    PlanVersion,
    Task,
)
from crews.plans import current_steps
from crews.services import MAX_INPUT_CHARS
from planner_site.body_checks import MAX_DEPTH, MAX_INPUT_KEYS
from planner_site.schemas import Id, model_text

Process = Literal["sequential", "hierarchical"]
OnStepFailure = Literal["continue", "ask", "adapt"]


class _Body(Schema):
    # strict: "shared": 0 or "max_rpm": "5" is a 422, not quietly read as false or 5 (issue #16).
    model_config = ConfigDict(extra="forbid", strict=True)

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


TaskName = model_text(Task, "name", trim=True)
TaskDescription = model_text(Task, "description")
TaskExpectedOutput = model_text(Task, "expected_output")


class Guardrails(_Body):
    """Checks a task's answer must pass before a later task takes it (every one optional)."""

    criteria: list[str] = Field(default_factory=list, description="Plain-language criteria an LLM judges.")
    min_chars: int | None = Field(None, ge=0)
    max_chars: int | None = Field(None, ge=1)
    must_contain: list[str] = Field(default_factory=list, description="Compared without regard to case.")
    must_not_contain: list[str] = Field(default_factory=list)
    pattern: str | None = Field(None, description="A regular expression searched in the answer.")


class TaskIn(_TaskBody):
    name: TaskName
    description: TaskDescription = Field(description="May use {input} placeholders.")
    expected_output: TaskExpectedOutput = Field(description="May use {input} placeholders.")
    agent_id: Id | None = Field(None, description="One of your agents; it joins the crew.")
    context_task_ids: list[Id] = Field(
        default_factory=list, description="Earlier tasks of this crew whose output it receives."
    )
    async_execution: bool = False
    human_input: bool = Field(False, description="A person reviews the answer before it is used.")
    output_schema: dict[str, Any] | None = Field(
        None, description='A JSON schema (Draft 2020-12) with "type" object or array at its root.'
    )
    guardrails: Guardrails = Field(default_factory=Guardrails)
    guardrail_max_retries: int = Field(3, ge=0, le=10, description="Retries after a failed check.")


class TaskPatch(_TaskBody):
    name: TaskName = Field(None)
    description: TaskDescription = Field(None)
    expected_output: TaskExpectedOutput = Field(None)
    agent_id: Id | None = Field(None, description="null: no agent.")
    context_task_ids: list[Id] = Field(None)
    async_execution: bool = Field(None)
    human_input: bool = Field(None)
    output_schema: dict[str, Any] | None = Field(None, description="null: a free-text answer.")
    guardrails: Guardrails = Field(None)
    guardrail_max_retries: int = Field(None, ge=0, le=10)


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
    output_schema: dict[str, Any] | None
    guardrails: Guardrails
    guardrail_max_retries: int
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_guardrails(obj: Task) -> dict[str, Any]:
        return obj.guardrails or {}

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
    # A JSON number or a string of one: money is read as a Decimal either way.
    max_cost_usd: Decimal | None = Field(None, gt=0, strict=False, description="null: unlimited.")


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


CrewName = model_text(Crew, "name", trim=True)
CrewDescription = model_text(Crew, "description")
Inputs = dict[str, Any]
INPUTS_HELP = f"At most {MAX_INPUT_KEYS} names, nested at most {MAX_DEPTH} levels (the whole body)."
# A message or feedback goes into a prompt like an input value: the same ceiling.
Message = Annotated[str, StringConstraints(max_length=MAX_INPUT_CHARS)]


class CrewIn(_CrewBody):
    name: CrewName
    description: CrewDescription = ""
    process: Process = "sequential"
    manager_llm_id: Id | None = Field(None, description="Required for hierarchical crews.")
    agent_ids: list[Id] = Field(default_factory=list, description="Your agents.")
    planning: bool = Field(False, description="Draft a plan for every task before running.")
    planning_llm_id: Id | None = Field(None, description="null: the site's default LLM.")
    review_plan: bool = Field(False, description="A run that drafts its plan waits for approval.")
    run_without_plan_on_failure: bool = False
    on_step_failure: OnStepFailure = Field(
        "continue", description="When a step of the approved plan fails: go on, ask a person, or let the agent replan."
    )
    max_rpm: int | None = Field(None, ge=1)
    memory: bool = Field(False, description="Remember what tasks taught the crew and recall it in later runs.")
    budget: CrewBudgetIn = Field(default_factory=CrewBudgetIn)
    default_inputs: Inputs = Field(default_factory=dict, max_length=MAX_INPUT_KEYS, description=INPUTS_HELP)
    shared: bool = Field(False, description="Everyone signed in can view it and its runs.")


class CrewPatch(_CrewBody):
    name: CrewName = Field(None)
    description: CrewDescription = Field(None)
    process: Process = Field(None)
    manager_llm_id: Id | None = None
    agent_ids: list[Id] = Field(
        None, description="The whole new list; an agent that still does a task cannot leave."
    )
    planning: bool = Field(None)
    planning_llm_id: Id | None = None
    review_plan: bool = Field(None)
    run_without_plan_on_failure: bool = Field(None)
    on_step_failure: OnStepFailure = Field(None)
    max_rpm: int | None = Field(None, ge=1)
    memory: bool = Field(None)
    budget: CrewBudgetIn = Field(None, description="Changes only the limits it has.")
    default_inputs: Inputs = Field(None, max_length=MAX_INPUT_KEYS, description=INPUTS_HELP)
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
    on_step_failure: OnStepFailure
    max_rpm: int | None
    memory: bool
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
        return selectors.crew_input_names(crew=obj, tasks=selectors.crew_tasks_as_read(crew=obj))

    @staticmethod
    def resolve_tasks(obj: Crew) -> list[Task]:
        return selectors.crew_tasks_as_read(crew=obj)


# Plans -----------------------------------------------------------------------------------------

PlanStatus = Literal["generating", "draft", "approved", "failed", "superseded"]


def _money(value: Decimal) -> float:
    """Money in JSON: a number, to the micro-dollar the database keeps."""
    return round(float(value), 6)


class UsageOut(Schema):
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float = Field(description="US dollars, as a number (6 decimals).")


class PlanStepOut(Schema):
    id: int = Field(description="The step's stable id: it keeps it across versions and edits.")
    order: int = Field(description="0-based position within its task.")
    text: str
    pinned: bool = Field(description="Regenerating the task keeps this step where it is.")


class PlanTaskOut(Schema):
    task_id: int
    task_number: int = Field(description="1-based position of the task in the crew.")
    task_name: str
    steps: list[PlanStepOut]


class PlanWarningOut(Schema):
    task_id: int | None = Field(description="The task it is about, if it is about one.")
    message: str


class PlanOut(Schema):
    id: int
    crew_id: int
    version: int = Field(description="The current version; send it back as If-Match to edit.")
    status: PlanStatus
    error: str | None = Field(description="Why drafting or the last regeneration failed.")
    inputs: dict[str, Any]
    llm_id: int | None = Field(description="The LLM that drafts it.")
    usage: UsageOut = Field(description="Every drafting and regeneration of this plan.")
    tasks: list[PlanTaskOut] = Field(
        description="Every task of the crew in crew order, with this version's steps."
    )
    approved_version: int | None = Field(description="The version an approval is bound to.")
    regenerating_task_ids: list[int] = Field(description="Tasks being redrafted right now.")
    warnings: list[PlanWarningOut] = Field(description="What the planner warned of when it drafted.")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_warnings(obj: Plan) -> list[dict[str, Any]]:
        # A failed drafting's kind of provider failure (``plans.plan_fail``) is no warning.
        return [w for w in obj.warnings or [] if isinstance(w, dict) and "failure_kind" not in w]

    @staticmethod
    def resolve_error(obj: Plan) -> str | None:
        return obj.error or None

    @staticmethod
    def resolve_usage(obj: Plan) -> dict[str, Any]:
        return {
            "prompt_tokens": obj.prompt_tokens,
            "completion_tokens": obj.completion_tokens,
            "cost_usd": _money(obj.cost_usd),
        }

    @staticmethod
    def resolve_tasks(obj: Plan) -> list[dict[str, Any]]:
        steps = current_steps(obj, obj.version) if obj.version else {}
        return [
            {
                "task_id": task.pk,
                "task_number": number,
                "task_name": task.name,
                "steps": [
                    {"id": s.uid, "order": s.order, "text": s.text, "pinned": s.pinned}
                    for s in steps.get(task.pk, [])
                ],
            }
            for number, task in enumerate(selectors.crew_tasks(crew=obj.crew), start=1)
        ]

    @staticmethod
    def resolve_regenerating_task_ids(obj: Plan) -> list[int]:
        return list(obj.regenerating_task_ids or [])


class PlanVersionOut(Schema):
    number: int
    note: str = Field(description='What made it: "drafted", "edited", "restored v2", ...')
    created_by: str | None = Field(description="Username; null for the planner.")
    created_at: datetime
    step_count: int

    @staticmethod
    def resolve_created_by(obj: PlanVersion) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None

    @staticmethod
    def resolve_step_count(obj: PlanVersion) -> int:
        return len(obj.steps.all())


class PlanDraftIn(_Body):
    inputs: Inputs = Field(
        default_factory=dict,
        max_length=MAX_INPUT_KEYS,
        description="Values for the crew's inputs; its defaults fill the rest. " + INPUTS_HELP,
    )


class PlanStepIn(_Body):
    id: Id | None = Field(None, description="A step of the current version; omit for a new step.")
    text: str = Field(description="Not empty.")
    pinned: bool = False
    order: int | None = Field(None, description="Ignored: a step's place in the list is its order.")


class PlanTaskIn(_Body):
    task_id: Id
    steps: list[PlanStepIn] = Field(description="The task's whole new list of steps, in order.")
    task_number: int | None = Field(None, description="Ignored (read-only).")
    task_name: str | None = Field(None, description="Ignored (read-only).")


class PlanEditIn(_Body):
    """A plan's ``tasks`` as GET returns them can be sent back as they are, read-only parts too."""

    tasks: list[PlanTaskIn] = Field(description="Tasks left out keep their steps.")

    def service_fields(self) -> dict[str, Any]:
        return {
            "tasks": [
                {
                    "task_id": task.task_id,
                    "steps": [
                        step.model_dump(include={"id", "text", "pinned"}) for step in task.steps
                    ],
                }
                for task in self.tasks
            ]
        }


class PlanRegenerateIn(_Body):
    feedback: Message = Field("", description="What the planner should do differently.")
