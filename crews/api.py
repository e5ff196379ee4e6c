"""REST operations of the crews app: crews and their tasks, plans, runs and their events."""

# No ``from __future__ import annotations`` here: ninja reads the operations' annotations, and
# through @paginate's wrapper a string annotation would be looked up in ninja's module.
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils.translation import gettext as _
from ninja import Header, Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from agents.selectors import agent_get
from crews import plans, runs, selectors, services
from crews.bridge import payload_of
from crews.forms_runs import RunFilterForm
from crews.models import Plan
from crews.schemas import (
    CrewIn,
    CrewOut,
    CrewPatch,
    PlanDraftIn,
    PlanEditIn,
    PlanOut,
    PlanRegenerateIn,
    PlanVersionOut,
    TaskIn,
    TaskListOut,
    TaskOut,
    TaskPatch,
    TaskReorderIn,
)
from crews.schemas_runs import (
    AgentKickoffIn,
    ApprovalDecisionIn,
    EventPageOut,
    FeedbackIn,
    FeedbackRequestOut,
    KickoffIn,
    LLMCallOut,
    RerunIn,
    RunApprovePlanIn,
    RunEventsQuery,
    RunFilters,
    RunOut,
    ToolApprovalOut,
)
from planner_site.apiutils import LimitOffset, api_field_names, version_from_if_match
from planner_site.errors import NotFound
from planner_site.schemas import errors

router = Router(tags=["crews"])

# Model field → API field, for the errors services raise.
CREW_FIELD_NAMES = {
    "manager_llm": "manager_llm_id",
    "planning_llm": "planning_llm_id",
    "agents": "agent_ids",
    "budget_max_tokens": "budget.max_tokens",
    "budget_max_cost_usd": "budget.max_cost_usd",
}
TASK_FIELD_NAMES = {"agent": "agent_id", "context": "context_task_ids", **{
    k: f"guardrails.{k}" for k in ("criteria", "min_chars", "max_chars", "must_contain", "must_not_contain", "pattern")}}


# Crews -----------------------------------------------------------------------------------------


@router.get("/crews", response=list[CrewOut], summary="List crews")
@paginate(LimitOffset)
def crew_list(request: HttpRequest) -> Any:
    return selectors.crew_list(user=request.user).prefetch_related(
        "agents", selectors.crew_tasks_prefetch()
    )


@router.post("/crews", response={201: CrewOut, **errors(422)}, summary="Create a crew")
def crew_create(request: HttpRequest, payload: CrewIn) -> Any:
    with api_field_names(CREW_FIELD_NAMES):
        crew = services.crew_create(actor=request.user, **payload.service_fields())
    return Status(201, crew)


@router.get("/crews/{id}", response={200: CrewOut, **errors(404)})
def crew_get(request: HttpRequest, id: int) -> Any:
    return selectors.crew_get(user=request.user, crew_id=id)


@router.patch("/crews/{id}", response={200: CrewOut, **errors(404, 422)}, summary="Change a crew")
def crew_update(request: HttpRequest, id: int, payload: CrewPatch) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    with api_field_names(CREW_FIELD_NAMES):
        return services.crew_update(actor=request.user, crew=crew, **payload.service_fields())


@router.delete(
    "/crews/{id}",
    response={204: None, **errors(404, 409)},
    description="409 while one of its runs works: stop the run first.",
)
def crew_delete(request: HttpRequest, id: int) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    services.crew_delete(actor=request.user, crew=crew)
    return Status(204, None)


# Tasks -----------------------------------------------------------------------------------------


@router.get("/crews/{id}/tasks", response=list[TaskOut], tags=["tasks"])
@paginate(LimitOffset)
def task_list(request: HttpRequest, id: int) -> Any:
    return selectors.crew_tasks(crew=selectors.crew_get(user=request.user, crew_id=id))


@router.post(
    "/crews/{id}/tasks",
    response={201: TaskOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Add a task at the end of the crew",
)
def task_create(request: HttpRequest, id: int, payload: TaskIn) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    with api_field_names(TASK_FIELD_NAMES):
        task = services.task_create(actor=request.user, crew=crew, **payload.service_fields())
    return Status(201, task)


@router.post(
    "/crews/{id}/tasks/reorder",
    response={200: TaskListOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Put the crew's tasks in a new order",
    description="Name every task once; a task must stay after the tasks whose output it uses.",
)
def task_reorder(request: HttpRequest, id: int, payload: TaskReorderIn) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    tasks = services.task_reorder(actor=request.user, crew=crew, task_ids=payload.task_ids)
    return {"items": tasks, "count": len(tasks)}


@router.get("/tasks/{id}", response={200: TaskOut, **errors(404)}, tags=["tasks"])
def task_get(request: HttpRequest, id: int) -> Any:
    return selectors.task_get(user=request.user, task_id=id)


@router.patch(
    "/tasks/{id}",
    response={200: TaskOut, **errors(404, 422)},
    tags=["tasks"],
    summary="Change a task",
)
def task_update(request: HttpRequest, id: int, payload: TaskPatch) -> Any:
    task = selectors.task_get(user=request.user, task_id=id, for_write=True)
    with api_field_names(TASK_FIELD_NAMES):
        return services.task_update(actor=request.user, task=task, **payload.service_fields())


@router.delete("/tasks/{id}", response={204: None, **errors(404)}, tags=["tasks"])
def task_delete(request: HttpRequest, id: int) -> Any:
    task = selectors.task_get(user=request.user, task_id=id, for_write=True)
    services.task_delete(actor=request.user, task=task)
    return Status(204, None)


# Plans -----------------------------------------------------------------------------------------

IF_MATCH = Header(None, alias="If-Match", description='The version you edited: 3, "3" or W/"3".')
IF_MATCH_REQUIRED = Header(alias="If-Match", description='The version you edited: 3, "3" or W/"3".')


def _with_etag(response: HttpResponse, plan: Plan) -> Plan:
    """The version a client sends back in If-Match, as HTTP's own header too."""
    response["ETag"] = f'"{plan.version}"'
    return plan


@router.post(
    "/crews/{id}/plans",
    response={202: PlanOut, **errors(404, 422, 429)},
    tags=["plans"],
    summary="Draft a plan for the crew",
    description="Drafting runs in the background: the plan is generating until it is a draft "
    "(or failed). A missing input is a 422 naming it (inputs.topic). 429 with code "
    "daily_budget_spent once the caller's daily cost budget is spent (drafting is paid calls).",
)
def plan_draft(request: HttpRequest, id: int, payload: PlanDraftIn) -> Any:
    crew = selectors.crew_get(user=request.user, crew_id=id, for_write=True)
    return Status(202, plans.plan_draft(actor=request.user, crew=crew, inputs=payload.inputs))


@router.get("/plans/{id}", response={200: PlanOut, **errors(404)}, tags=["plans"])
def plan_get(request: HttpRequest, id: int, response: HttpResponse) -> Any:
    return _with_etag(response, selectors.plan_get(user=request.user, plan_id=id))


@router.put(
    "/plans/{id}",
    response={200: PlanOut, **errors(404, 409, 422)},
    tags=["plans"],
    summary="Save an edit as the next version",
    description="Send the version you edited as If-Match: a stale one is a 409 and saves nothing. "
    "Each task listed gets exactly the steps given (tasks left out keep theirs); a step keeps its "
    "id, a step without one is new.",
)
def plan_update(
    request: HttpRequest,
    id: int,
    payload: PlanEditIn,
    response: HttpResponse,
    if_match: str = IF_MATCH_REQUIRED,
) -> Any:
    plan = selectors.plan_get(user=request.user, plan_id=id, for_write=True)
    version = version_from_if_match(if_match)
    plan = plans.plan_update(
        actor=request.user, plan=plan, expected_version=version, **payload.service_fields()
    )
    return _with_etag(response, plan)


@router.post(
    "/plans/{id}/tasks/{task_id}/regenerate",
    response={202: PlanOut, **errors(404, 409, 422, 429)},
    tags=["plans"],
    summary="Redraft one task's unpinned steps",
    description="Runs in the background; the task is in regenerating_task_ids until a new "
    "version holds its steps. Pinned steps stay where they are. 429 with code "
    "daily_budget_spent once the caller's daily cost budget is spent.",
)
def plan_regenerate(
    request: HttpRequest, id: int, task_id: int, payload: PlanRegenerateIn | None = None
) -> Any:
    plan = selectors.plan_get(user=request.user, plan_id=id, for_write=True)
    task = selectors.task_get(user=request.user, task_id=task_id)
    feedback = payload.feedback if payload is not None else ""
    return Status(
        202, plans.plan_regenerate(actor=request.user, plan=plan, task=task, feedback=feedback)
    )


@router.post(
    "/plans/{id}/approve",
    response={200: PlanOut, **errors(404, 409, 422)},
    tags=["plans"],
    summary="Approve the current version",
    description="Approval binds to the current version (or to If-Match's, which must be it); the "
    "crew's earlier approved plan is superseded. A placeholder step (such as \"...\", an empty step "
    "or a bare \"Step 1\") is a 409 `plan_incomplete` whose detail names the tasks. A task with no "
    "steps is not: its agent plans it when it runs. Only the plan's own tasks are checked.",
)
def plan_approve(
    request: HttpRequest, id: int, response: HttpResponse, if_match: str | None = IF_MATCH
) -> Any:
    plan = selectors.plan_get(user=request.user, plan_id=id, for_write=True)
    version = version_from_if_match(if_match)
    return _with_etag(response, plans.plan_approve(actor=request.user, plan=plan, version=version))


@router.get(
    "/plans/{id}/versions",
    response=list[PlanVersionOut],
    tags=["plans"],
    summary="List the plan's versions, newest first",
)
@paginate(LimitOffset)
def plan_version_list(request: HttpRequest, id: int) -> Any:
    return selectors.plan_versions(plan=selectors.plan_get(user=request.user, plan_id=id))


@router.get(
    "/plans/{id}/versions/{n}",
    response={200: PlanOut, **errors(404)},
    tags=["plans"],
    summary="The plan as it read at version n",
)
def plan_version_get(request: HttpRequest, id: int, n: int) -> Any:
    plan = selectors.plan_get(user=request.user, plan_id=id)
    return selectors.plan_as_of(plan=plan, number=n)


@router.post(
    "/plans/{id}/versions/{n}/restore",
    response={200: PlanOut, **errors(404, 409)},
    tags=["plans"],
    summary="Save version n's steps as the next version",
)
def plan_restore(request: HttpRequest, id: int, n: int, response: HttpResponse) -> Any:
    plan = selectors.plan_get(user=request.user, plan_id=id, for_write=True)
    return _with_etag(response, plans.plan_restore(actor=request.user, plan=plan, number=n))


# Runs ------------------------------------------------------------------------------------------


def _kickoff_plan(user: Any, plan_id: int | None) -> Plan | None:
    # A plan id in the body is input: one the user cannot see is invalid, as a plan that is not
    # approved or of another crew is (the service says so), never a 404 of the crew.
    if plan_id is None:
        return None
    try:
        return selectors.plan_get(user=user, plan_id=plan_id)
    except NotFound:
        raise ValidationError({"plan_id": _("No plan with id %(id)s.") % {"id": plan_id}}) from None


@router.post(
    "/crews/{id}/kickoff",
    response={202: RunOut, **errors(404, 422, 429)},
    tags=["runs"],
    summary="Run the crew",
    description="With plan_id the plan must be approved and belong to this crew: it is used "
    "verbatim. Without it, a crew with planning drafts its plan inside the run. The run starts in "
    "the background; follow it at /api/runs/{id}/events or the websocket. 429 with code "
    "daily_budget_spent (and Retry-After) once the caller's daily cost budget is spent.",
)
def crew_kickoff(request: HttpRequest, id: int, payload: KickoffIn) -> Any:
    crew = selectors.crew_get_for_kickoff(user=request.user, crew_id=id)
    run = runs.run_kickoff(
        actor=request.user,
        crew=crew,
        inputs=payload.inputs,
        plan=_kickoff_plan(request.user, payload.plan_id),
        review_plan=payload.review_plan,
    )
    return Status(202, run)


@router.post(
    "/agents/{id}/kickoff",
    response={202: RunOut, **errors(404, 422, 429)},
    tags=["runs"],
    summary="Ask an agent alone",
    description="A run of that agent with the message as its task (no crew), planning per the "
    "agent's settings. 429 with code daily_budget_spent once the caller's daily cost budget is spent.",
)
def agent_kickoff(request: HttpRequest, id: int, payload: AgentKickoffIn) -> Any:
    agent = agent_get(user=request.user, agent_id=id, for_write=True)
    run = runs.run_kickoff_agent(actor=request.user, agent=agent, message=payload.message)
    return Status(202, run)


@router.get("/runs", response=list[RunOut], tags=["runs"], summary="List runs, newest first")
@paginate(LimitOffset)
def run_list(request: HttpRequest, filters: Query[RunFilters]) -> Any:
    listed = selectors.run_list(user=request.user, crew_id=filters.crew_id, **_history_filters(request, filters))
    return selectors.run_with_plan_tasks(listed).prefetch_related("task_results", "feedback_requests", "approvals")


def _history_filters(request: HttpRequest, filters: RunFilters) -> dict[str, Any]:
    """The run history page's form judges the other filters (a person among those whose runs the
    caller sees, "to" not before "from"), so they mean here what they mean there; what it refuses
    is a 422 under the API's names instead of a filter left out."""
    given = {"status": filters.status, "started_by": filters.started_by, "since": filters.since, "until": filters.until}
    data = QueryDict(mutable=True)
    data.update({name: str(value) for name, value in given.items() if value is not None})
    form = RunFilterForm(data, crews=None, starters=selectors.run_starters(user=request.user))
    if not form.is_valid():
        with api_field_names({"since": "from", "until": "to"}):
            raise ValidationError(form.errors.as_data())
    return form.filters()


@router.get("/runs/{id}", response={200: RunOut, **errors(404)}, tags=["runs"])
def run_get(request: HttpRequest, id: int) -> Any:
    return selectors.run_get(user=request.user, run_id=id)


@router.get(
    "/runs/{id}/events",
    response={200: EventPageOut, **errors(404)},
    tags=["runs"],
    summary="The run's events after a seq",
    description="Oldest first, in the websocket's shape; seq starts at 1 and has no gaps. Ask again "
    "with after=next_after for the rest.",
)
def run_events(request: HttpRequest, id: int, query: Query[RunEventsQuery]) -> Any:
    run = selectors.run_get(user=request.user, run_id=id)
    events = selectors.run_events(run=run, after=query.after, limit=query.limit)
    return {
        "items": [payload_of(event) for event in events],
        "next_after": events[-1].seq if events else query.after,
    }


@router.get(
    "/runs/{id}/llm-calls/{seq}",
    response={200: LLMCallOut, **errors(404)},
    tags=["runs"],
    summary="What an LLM call of the run was sent and got back",
    description="seq is the call's llm.completed or llm.failed event. Keys and anything shaped like "
    "a secret are redacted; very long texts are cut, saying so.",
)
def run_llm_call(request: HttpRequest, id: int, seq: int) -> Any:
    run = selectors.run_get(user=request.user, run_id=id)
    call = selectors.run_llm_call(run=run, seq=seq)
    if call is None:
        raise NotFound(_("What LLM call %(seq)s of run %(run)s sent was not kept.") % {"seq": seq, "run": id})
    return call


@router.post(
    "/runs/{id}/cancel",
    response={202: RunOut, **errors(404, 409)},
    tags=["runs"],
    summary="Stop the run",
    description="Idempotent: the run is cancelling (or cancelled at once if it had not started); "
    "409 once it has finished.",
)
def run_cancel(request: HttpRequest, id: int) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    return Status(202, runs.run_cancel(actor=request.user, run=run))


@router.post(
    "/runs/{id}/approve-plan",
    response={200: PlanOut, **errors(404, 409, 422)},
    tags=["runs"],
    summary="Approve the plan the run drafted (optionally edited first)",
    description="For a run awaiting_approval; it continues with the approved version. Send the "
    "version you reviewed as If-Match (optional): a plan changed since is a 409 and nothing is saved.",
)
def run_approve_plan(
    request: HttpRequest, id: int, payload: RunApprovePlanIn | None = None, if_match: str | None = IF_MATCH
) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    edit = payload.plan.service_fields() if payload is not None and payload.plan else None
    version = version_from_if_match(if_match)
    return runs.run_approve_plan(actor=request.user, run=run, edit=edit, version=version)


@router.post(
    "/runs/{id}/feedback",
    response={200: FeedbackRequestOut, **errors(404, 409, 422)},
    tags=["runs"],
    summary="Answer the run's feedback request",
    description="For a run awaiting_input on a task's answer; an empty text accepts the answer.",
)
def run_feedback(request: HttpRequest, id: int, payload: FeedbackIn) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    return runs.run_feedback(actor=request.user, run=run, text=payload.text)


@router.post(
    "/runs/{id}/approvals/{approval_id}",
    response={200: ToolApprovalOut, **errors(404, 409, 422)},
    tags=["runs"],
    summary="Allow or refuse a tool call",
)
def run_decide_approval(
    request: HttpRequest, id: int, approval_id: str, payload: ApprovalDecisionIn
) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    return runs.run_decide_approval(
        actor=request.user,
        run=run,
        approval_id=approval_id,
        approve=payload.approve,
        note=payload.note,
    )


@router.post(
    "/runs/{id}/rerun",
    response={202: RunOut, **errors(404, 409, 422, 429)},
    tags=["runs"],
    summary="Run again with the same inputs and plan",
    description="From a task: the earlier tasks' outputs are reused and the run starts there.",
)
def run_rerun(request: HttpRequest, id: int, payload: RerunIn | None = None) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    from_task_id = payload.from_task_id if payload is not None else None
    return Status(202, runs.run_rerun(actor=request.user, run=run, from_task_id=from_task_id))


@router.post(
    "/runs/{id}/resume",
    response={202: RunOut, **errors(404, 409)},
    tags=["runs"],
    summary="Resume an interrupted run",
    description="It continues from its first unfinished task; finished outputs are kept.",
)
def run_resume(request: HttpRequest, id: int) -> Any:
    run = selectors.run_get(user=request.user, run_id=id, for_write=True)
    return Status(202, runs.run_resume(actor=request.user, run=run))
