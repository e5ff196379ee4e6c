"""REST operations of the agents app: LLMs, prompt templates, tools, agents."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate
from ninja.responses import Status

from agents import selectors, services
from agents.schemas import (
    AgentIn,
    AgentOut,
    AgentPatch,
    LLMIn,
    LLMOut,
    LLMPatch,
    LLMTestOut,
    PromptIn,
    PromptOut,
    PromptVersionOut,
    ToolOut,
    capabilities_out,
)
from agents.tools import catalogue
from planner_site.apiutils import LimitOffset, api_field_names
from planner_site.schemas import errors

router = Router(tags=["agents"])

# Model field → API field, for the errors services raise.
AGENT_FIELD_NAMES = {
    "llm": "llm_id",
    "budget_max_tool_calls": "budget.max_tool_calls",
    "budget_max_input_tokens": "budget.max_input_tokens",
    "planning_config.llm": "planning_config.llm_id",
}


# LLMs ------------------------------------------------------------------------------------------


@router.get("/llms", response=list[LLMOut], tags=["llms"], summary="List LLMs")
@paginate(LimitOffset)
def llm_list(request: HttpRequest) -> Any:
    return selectors.llm_list()


@router.post("/llms", response={201: LLMOut, **errors(422)}, tags=["llms"], summary="Add an LLM")
def llm_create(request: HttpRequest, payload: LLMIn) -> Any:
    return Status(201, services.llm_create(actor=request.user, **payload.service_fields()))


@router.get("/llms/{id}", response={200: LLMOut, **errors(404)}, tags=["llms"])
def llm_get(request: HttpRequest, id: int) -> Any:
    return selectors.llm_get(llm_id=id)


@router.patch(
    "/llms/{id}",
    response={200: LLMOut, **errors(404, 422)},
    tags=["llms"],
    summary="Change an LLM",
    description='Omitting api_key keeps the stored key; "api_key": "" clears it.',
)
def llm_update(request: HttpRequest, id: int, payload: LLMPatch) -> Any:
    llm = selectors.llm_get(llm_id=id)
    return services.llm_update(actor=request.user, llm=llm, **payload.service_fields())


@router.delete(
    "/llms/{id}",
    response={204: None, **errors(404, 409)},
    tags=["llms"],
    summary="Delete an LLM",
    description="409 while an agent, crew or planning config uses it.",
)
def llm_delete(request: HttpRequest, id: int) -> Any:
    services.llm_delete(actor=request.user, llm=selectors.llm_get(llm_id=id))
    return Status(204, None)


@router.post(
    "/llms/{id}/test",
    response={200: LLMTestOut, **errors(404)},
    tags=["llms"],
    summary="Test an LLM: what it accepts and its server's context window",
    description="Tiny real completions (plain, streamed, native tools, json_schema, json_object) "
    "in parallel, plus the server's own context window where it publishes one; stored on the LLM. "
    "ok is false when the plain completion fails (error says why).",
)
def llm_test(request: HttpRequest, id: int) -> Any:
    llm = selectors.llm_get(llm_id=id)
    result = services.llm_test(actor=request.user, llm=llm)
    return {**result, "capabilities": capabilities_out(llm)}


# Prompt templates ------------------------------------------------------------------------------


@router.get("/prompts", response=list[PromptOut], tags=["prompts"], summary="List prompts")
@paginate(LimitOffset)
def prompt_list(request: HttpRequest) -> Any:
    return [version for _template, version in selectors.prompt_list() if version is not None]


@router.get("/prompts/{key}", response={200: PromptOut, **errors(404)}, tags=["prompts"])
def prompt_get(request: HttpRequest, key: str) -> Any:
    _template, version = selectors.prompt_get(key=key)
    return version


@router.put(
    "/prompts/{key}",
    response={200: PromptOut, **errors(404, 422)},
    tags=["prompts"],
    summary="Save a new version of a prompt",
    description="422 for a placeholder this prompt does not offer, or an unbalanced brace.",
)
def prompt_update(request: HttpRequest, key: str, payload: PromptIn) -> Any:
    return services.prompt_update(actor=request.user, key=key, text=payload.text)


@router.get("/prompts/{key}/versions", response=list[PromptVersionOut], tags=["prompts"])
@paginate(LimitOffset)
def prompt_versions(request: HttpRequest, key: str) -> Any:
    return selectors.prompt_versions(key=key).select_related("created_by")


@router.post(
    "/prompts/{key}/versions/{n}/restore",
    response={200: PromptOut, **errors(404)},
    tags=["prompts"],
    summary="Restore an earlier version (saved as a new version)",
)
def prompt_restore(request: HttpRequest, key: str, n: int) -> Any:
    return services.prompt_restore(actor=request.user, key=key, number=n)


# Tools -----------------------------------------------------------------------------------------


@router.get("/tools", response=list[ToolOut], tags=["tools"], summary="The built-in tools")
@paginate(LimitOffset)
def tool_list(request: HttpRequest) -> Any:
    return catalogue()


# Agents ----------------------------------------------------------------------------------------


@router.get("/agents", response=list[AgentOut], summary="List agents")
@paginate(LimitOffset)
def agent_list(request: HttpRequest) -> Any:
    return selectors.agent_list(user=request.user)


@router.post("/agents", response={201: AgentOut, **errors(422)}, summary="Create an agent")
def agent_create(request: HttpRequest, payload: AgentIn) -> Any:
    with api_field_names(AGENT_FIELD_NAMES):
        agent = services.agent_create(actor=request.user, **payload.service_fields())
    return Status(201, agent)


@router.get("/agents/{id}", response={200: AgentOut, **errors(404)})
def agent_get(request: HttpRequest, id: int) -> Any:
    return selectors.agent_get(user=request.user, agent_id=id)


@router.patch(
    "/agents/{id}", response={200: AgentOut, **errors(404, 422)}, summary="Change an agent"
)
def agent_update(request: HttpRequest, id: int, payload: AgentPatch) -> Any:
    agent = selectors.agent_get(user=request.user, agent_id=id, for_write=True)
    with api_field_names(AGENT_FIELD_NAMES):
        return services.agent_update(actor=request.user, agent=agent, **payload.service_fields())


@router.delete(
    "/agents/{id}",
    response={204: None, **errors(404, 409)},
    description="409 while one of its runs works: stop the run first.",
)
def agent_delete(request: HttpRequest, id: int) -> Any:
    agent = selectors.agent_get(user=request.user, agent_id=id, for_write=True)
    services.agent_delete(actor=request.user, agent=agent)
    return Status(204, None)
