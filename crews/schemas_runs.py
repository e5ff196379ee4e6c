"""API schemas of the crews app's runs: a run and its task results, events, LLM calls, and the
bodies that start, steer and answer a run (split from ``crews.schemas``, which keeps crews,
tasks and plans)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from ninja import Field, Schema

from crews import selectors
from crews.models import FeedbackRequest, Run, RunTask
from crews.schemas import INPUTS_HELP, Inputs, Message, PlanEditIn, UsageOut, _Body, _money
from planner_site.body_checks import MAX_INPUT_KEYS
from planner_site.schemas import Id

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
    output_json: Any = Field(None, description="The answer as JSON, when the task has an output schema.")
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
    inputs: Inputs = Field(
        default_factory=dict,
        max_length=MAX_INPUT_KEYS,
        description="Values for the crew's inputs; its defaults fill the rest. " + INPUTS_HELP,
    )
    plan_id: Id | None = Field(
        None, description="An approved plan of this crew, used verbatim (no planner call)."
    )
    review_plan: bool | None = Field(
        None,
        description="Wait for approval of a plan drafted in the run; null: the crew's setting.",
    )


class AgentKickoffIn(_Body):
    message: Message = Field(description="What the agent should do.")


class EventOut(Schema):
    seq: int = Field(description="From 1, without gaps.")
    type: str = Field(description="Dotted, e.g. task.completed (API.md lists them).")
    at: str = Field(description="ISO 8601 UTC.")
    task_id: int | None
    step_id: str | None
    data: dict[str, Any]


class RunFilters(Schema):
    """The run history page's filters (``crews.forms_runs.RunFilterForm``), named for the API."""

    crew_id: Id | None = Field(None, description="Only this crew's runs.")
    status: RunStatus | None = None
    started_by: Id | None = Field(
        None, description="Only the runs this person (user id) started: one of the people whose runs you see."
    )
    since: date | None = Field(
        None, alias="from", description="Only runs started on this day or later (ISO date, the site's time zone)."
    )
    until: date | None = Field(
        None, alias="to", description="Only runs started on this day or earlier (ISO date, the site's time zone)."
    )


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
    text: Message = Field("", description="Feedback on the answer; empty accepts it.")


class ApprovalDecisionIn(_Body):
    approve: bool
    note: Message = ""


class RerunIn(_Body):
    from_task_id: Id | None = Field(
        None, description="Start at this task; earlier tasks' outputs are reused."
    )
