"""API schemas of the crews app: crews and their tasks, plans, runs and their events.

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
from crews.models import (
    Crew,
    FeedbackRequest,
    Plan,
    PlanVersion,
    Run,
    RunTask,
    Task,
)
from crews.plans import current_steps
from planner_site.schemas import Id

Process = Literal["sequential", "hierarchical"]
OnStepFailure = Literal["continue", "ask", "adapt"]


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
    on_step_failure: OnStepFailure = Field(
        "continue", description="When a step of the approved plan fails: go on, ask a person, or let the agent replan."
    )
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
    on_step_failure: OnStepFailure = Field(None)
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
    on_step_failure: OnStepFailure
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
        return [w for w in obj.warnings or [] if isinstance(w, dict)]

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
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description="Values for the crew's inputs; its defaults fill the rest.",
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
    feedback: str = Field("", description="What the planner should do differently.")


# Runs ------------------------------------------------------------------------------------------

RunStatus = Literal[
    "queued", "planning", "awaiting_approval", "running", "awaiting_input", "cancelling",
    "succeeded", "failed", "cancelled", "interrupted",
]  # fmt: skip


class RunUsageOut(UsageOut):
    llm_calls: int


class RunTaskOut(Schema):
    task_id: int = Field(description="The crew task (as it was at kickoff).")
    name: str
    agent: str = Field(description="The agent's name.")
    status: Literal["waiting", "running", "done", "failed", "skipped"]
    output: str | None
    error: str | None
    usage: RunUsageOut

    @staticmethod
    def resolve_task_id(obj: RunTask) -> int:
        return obj.task_id_snapshot

    @staticmethod
    def resolve_agent(obj: RunTask) -> str:
        return obj.agent_name

    @staticmethod
    def resolve_output(obj: RunTask) -> str | None:
        return obj.output or None

    @staticmethod
    def resolve_error(obj: RunTask) -> str | None:
        return obj.error or None

    @staticmethod
    def resolve_usage(obj: RunTask) -> dict[str, Any]:
        return _run_usage(obj)


def _run_usage(obj: Run | RunTask) -> dict[str, Any]:
    return {
        "prompt_tokens": obj.prompt_tokens,
        "completion_tokens": obj.completion_tokens,
        "cost_usd": _money(obj.cost_usd),
        "llm_calls": obj.llm_calls,
    }


class FeedbackRequestOut(Schema):
    id: int
    task_id: int | None = Field(description="The task whose answer waits for your feedback.")
    answer: str = Field(description="The agent's answer to review.")
    status: Literal["pending", "answered"]
    text: str = Field(description="The feedback given; empty accepted the answer.")
    created_at: datetime
    answered_at: datetime | None

    @staticmethod
    def resolve_task_id(obj: FeedbackRequest) -> int | None:
        return int(obj.task_key) if obj.task_key.isdigit() else None


class ToolApprovalOut(Schema):
    approval_id: str = Field(description="Answer it at /api/runs/{id}/approvals/{approval_id}.")
    tool: str
    args: dict[str, Any]
    status: Literal["pending", "approved", "denied"]
    note: str
    created_at: datetime
    decided_at: datetime | None


class RunPendingOut(Schema):
    plan_id: int | None = Field(
        description="The plan to approve with approve-plan, while awaiting_approval."
    )
    feedback: FeedbackRequestOut | None = Field(description="Answer it with /feedback.")
    approvals: list[ToolApprovalOut] = Field(description="Tool calls waiting for a decision.")


class PlanChangeOut(Schema):
    task_id: int
    name: str = Field(description="The task's name (its last name, for a deleted task).")
    change: Literal["deleted", "added", "description", "expected_output", "agent"] = Field(
        description="deleted: it does not run; added: it has no approved steps; the others: that "
        "field changed, so its approved steps were written for the old one."
    )


class RunOut(Schema):
    id: int
    crew_id: int | None
    agent_id: int | None = Field(description="Set for an agent asked directly (no crew).")
    plan_id: int | None
    plan_version: int | None = Field(description="The plan version the run follows verbatim.")
    plan_changes: list[PlanChangeOut] = Field(
        description="The run's tasks that changed between that version's approval and the kickoff."
    )
    status: RunStatus
    inputs: dict[str, Any]
    message: str | None = Field(description="What an agent asked directly was told to do.")
    output: str | None
    task_outputs: list[RunTaskOut] = Field(description="One per crew task, in order.")
    error: str | None
    usage: RunUsageOut
    pending: RunPendingOut = Field(description="What the run waits for a person to answer.")
    review_plan: bool
    rerun_of_id: int | None
    created_by: str
    last_seq: int = Field(description="The newest event's seq.")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_plan_changes(obj: Run) -> list[dict[str, Any]]:
        return selectors.run_plan_changes(run=obj)

    @staticmethod
    def resolve_message(obj: Run) -> str | None:
        return obj.message or None

    @staticmethod
    def resolve_output(obj: Run) -> str | None:
        return obj.output or None

    @staticmethod
    def resolve_error(obj: Run) -> str | None:
        return obj.error or None

    @staticmethod
    def resolve_task_outputs(obj: Run) -> list[RunTask]:
        return sorted(obj.task_results.all(), key=lambda r: r.order)

    @staticmethod
    def resolve_usage(obj: Run) -> dict[str, Any]:
        return _run_usage(obj)

    @staticmethod
    def resolve_pending(obj: Run) -> dict[str, Any]:
        # Only what can be answered now: a stopped run's leftover requests have no reader.
        answering = obj.status in (Run.Status.AWAITING_INPUT, Run.Status.RUNNING)
        plan_id = obj.planning_plan_id if obj.status == Run.Status.AWAITING_APPROVAL else None
        if not answering:  # a queued or ended run: no need to read its requests
            return {"plan_id": plan_id, "feedback": None, "approvals": []}
        feedback = [f for f in obj.feedback_requests.all() if f.status == "pending"]
        approvals = [a for a in obj.approvals.all() if a.status == "pending"]
        return {
            "plan_id": plan_id,
            "feedback": max(feedback, key=lambda f: f.pk, default=None),
            "approvals": approvals,
        }

    @staticmethod
    def resolve_created_by(obj: Run) -> str:
        return obj.created_by.get_username()


class KickoffIn(_Body):
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description="Values for the crew's inputs; its defaults fill the rest.",
    )
    plan_id: Id | None = Field(
        None, description="An approved plan of this crew, used verbatim (no planner call)."
    )
    review_plan: bool | None = Field(
        None,
        description="Wait for approval of a plan drafted in the run; null: the crew's setting.",
    )


class AgentKickoffIn(_Body):
    message: str = Field(description="What the agent should do.")


class EventOut(Schema):
    seq: int = Field(description="From 1, without gaps.")
    type: str = Field(description="Dotted, e.g. task.completed (API.md lists them).")
    at: str = Field(description="ISO 8601 UTC.")
    task_id: int | None
    step_id: str | None
    data: dict[str, Any]


class RunFilters(Schema):
    crew_id: Id | None = Field(None, description="Only this crew's runs.")
    status: RunStatus | None = None


class RunEventsQuery(Schema):
    after: int = Field(0, ge=0, le=2**31, description="Only events with a larger seq.")
    limit: int = Field(500, ge=1, le=1000, description="At most this many events.")


class EventPageOut(Schema):
    items: list[EventOut]
    next_after: int = Field(description="Pass it as ?after= to get the events that follow.")


class LLMToolCallOut(Schema):
    id: str = ""
    name: str
    arguments: str = Field(description="JSON text, as the model wrote it.")


class LLMReplyOut(Schema):
    content: str = ""
    tool_calls: list[LLMToolCallOut] = []
    finish_reason: str | None = None


class LLMCallOut(Schema):
    seq: int = Field(description="Of the call's llm.completed or llm.failed event.")
    purpose: str
    model: str
    messages: list[dict[str, Any]] = Field(
        description="The request's messages as sent (OpenAI chat format), keys and secrets redacted."
    )
    tools: list[str] = Field(description="Names of the tool schemas sent with the request.")
    response_format: str = Field(description="Name of the JSON schema asked for; empty for none.")
    reply: LLMReplyOut | None = Field(description="None when the call failed.")
    error: str


class RunApprovePlanIn(_Body):
    plan: PlanEditIn | None = Field(None, description="An edit to save before approving.")


class FeedbackIn(_Body):
    text: str = Field("", description="Feedback on the answer; empty accepts it.")


class ApprovalDecisionIn(_Body):
    approve: bool
    note: str = ""


class RerunIn(_Body):
    from_task_id: Id | None = Field(
        None, description="Start at this task; earlier tasks' outputs are reused."
    )
