"""API schemas of the agents app: LLMs, prompt templates, tools, agents and planning configs.

``XIn`` bodies create, ``XPatch`` bodies change only the fields they carry, ``XOut`` is what the
API returns. Bodies refuse unknown fields, so a misspelt name is a 422 rather than silently
ignored. Ranges mirror the models (ENGINE.md §2) so the OpenAPI document shows them; the models
still validate everything on save.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import ConfigDict, StringConstraints

from agents.models import LLM, Agent, PlanningConfig, PromptTemplateVersion
from planner_site.schemas import Id, model_text

AgentType = Literal["react", "plan_execute"]
ReasoningEffort = Literal["low", "medium", "high"]
Price = Decimal | None  # a JSON number or a string of one (strict=False on each price field)
LLMName = model_text(LLM, "name", trim=True)
LLMModel = model_text(LLM, "model", trim=True)
LLMApiBase = model_text(LLM, "api_base")
# A key goes into an HTTP header: surrounding spaces are dropped (as the form does) and a line
# break or other control character is refused here, with its field, not by the first call.
LLMApiKey = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[^\x00-\x1f\x7f]*$")]
AgentName = model_text(Agent, "name", trim=True)
AgentRole = model_text(Agent, "role")
AgentGoal = model_text(Agent, "goal")
AgentBackstory = model_text(Agent, "backstory")
SystemPrompt = model_text(PlanningConfig, "system_prompt")
PlanPrompt = model_text(PlanningConfig, "plan_prompt")
RefinePrompt = model_text(PlanningConfig, "refine_prompt")
PromptText = model_text(PromptTemplateVersion, "text")


class _Body(Schema):
    # strict: "max_tool_calls": false or "planning": 0 is a 422, not quietly converted (issue #16).
    model_config = ConfigDict(extra="forbid", strict=True)

    def service_fields(self) -> dict[str, Any]:
        """The fields the client sent, named as the services take them."""
        return self.model_dump(exclude_unset=True)


# LLMs ------------------------------------------------------------------------------------------

SUPPORTS_TOOLS = (
    "Whether the model takes native tool calls. null: decided automatically (the demo model "
    "does; other models from litellm's model map, which says no for unknown openai/<name> models)."
)


class LLMCapabilitiesOut(Schema):
    forms: dict[str, bool | None] = Field(
        description="stream, tools, json_schema, json_object: true accepted, false refused "
        "(never sent again), null unknown."
    )
    context_window: int | None = Field(description="The context window the server says it runs.")
    context_source: str | None = Field(description="Which server said so (llama.cpp, vLLM, ...).")
    context_window_too_large: bool = Field(
        description="The LLM's own context_window is larger than the server's."
    )
    tested_at: datetime | None
    learned_at: datetime | None = Field(description="When a run last learned a refusal.")


def capabilities_out(llm: LLM) -> dict[str, Any]:
    caps = llm.capabilities or {}
    return {
        "forms": {form: llm.accepts(form) for form in ("stream", "tools", "json_schema", "json_object")},
        "context_window": llm.server_context_window,
        "context_source": caps.get("context_source"),
        "context_window_too_large": llm.context_window_too_large,
        "tested_at": caps.get("tested_at"),
        "learned_at": caps.get("learned_at"),
    }


class LLMOut(Schema):
    id: int
    name: str
    model: str = Field(description="litellm model string, e.g. openai/gpt-4o-mini.")
    api_base: str
    api_key_set: bool = Field(description="A key is stored. The key itself is never returned.")
    api_key_tail: str | None = Field(
        description="The key's last four characters, or null (no key, or too short to show any)."
    )
    is_default: bool
    supports_tools: bool | None = Field(description=SUPPORTS_TOOLS)
    params: dict[str, Any]
    builtin: bool = Field(description="The offline demo model: cannot be deleted.")
    context_window: int
    rpm_limit: int | None
    input_price_per_1k: float | None
    output_price_per_1k: float | None
    capabilities: LLMCapabilitiesOut = Field(
        description="What Test connection found and runs learned: accepted forms and the server's window."
    )
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_capabilities(obj: LLM) -> dict[str, Any]:
        return capabilities_out(obj)

    @staticmethod
    def resolve_api_key_tail(obj: LLM) -> str | None:
        return obj.api_key_tail or None


class LLMIn(_Body):
    name: LLMName
    model: LLMModel = Field(description="litellm model string, e.g. openai/gpt-4o-mini.")
    api_base: LLMApiBase = Field("", description="For self-hosted or OpenAI-compatible servers.")
    api_key: LLMApiKey | None = Field(None, description="Write-only; stored encrypted.")
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="temperature, max_tokens, top_p, seed, max_retries; timeout, connect_timeout, "
        "first_token_timeout (seconds).",
    )
    supports_tools: bool | None = Field(None, description=SUPPORTS_TOOLS)
    is_default: bool = False
    context_window: int = Field(128_000, ge=256)
    rpm_limit: int | None = Field(None, ge=1)
    input_price_per_1k: Price = Field(None, ge=0, strict=False, description="USD; overrides litellm's price.")
    output_price_per_1k: Price = Field(None, ge=0, strict=False, description="USD; overrides litellm's price.")


class LLMPatch(_Body):
    """Only the fields sent change. Fields that cannot be empty refuse null."""

    name: LLMName = Field(None)
    model: LLMModel = Field(None)
    api_base: LLMApiBase = Field(None)
    api_key: LLMApiKey | None = Field(
        None, description='Omit to keep the stored key; "" (or null) clears it.'
    )
    params: dict[str, Any] = Field(None)
    supports_tools: bool | None = Field(None, description=SUPPORTS_TOOLS)
    is_default: bool = Field(None)
    context_window: int = Field(None, ge=256)
    rpm_limit: int | None = Field(None, ge=1)
    input_price_per_1k: Price = Field(None, ge=0, strict=False)
    output_price_per_1k: Price = Field(None, ge=0, strict=False)


class LLMTestOut(Schema):
    ok: bool
    latency_ms: int
    error: str | None = Field(description="Why the plain completion failed, in plain words.")
    capabilities: LLMCapabilitiesOut = Field(description="What the test found (stored on the LLM).")


# Prompt templates ------------------------------------------------------------------------------


class PromptOut(Schema):
    key: str
    title: str = Field(
        description="In the request's language (the language cookie, else Accept-Language), as the "
        "pages show it."
    )
    version: int = Field(description="The current version's number.")
    text: str
    placeholders: list[str] = Field(description="The {names} this prompt may use.")
    updated_at: datetime

    @staticmethod
    def resolve_key(obj: PromptTemplateVersion) -> str:
        return obj.template.key

    @staticmethod
    def resolve_title(obj: PromptTemplateVersion) -> str:
        # The stored title is the English seed; LocaleMiddleware has activated the request's language.
        return obj.template.display_title

    @staticmethod
    def resolve_version(obj: PromptTemplateVersion) -> int:
        return obj.number

    @staticmethod
    def resolve_placeholders(obj: PromptTemplateVersion) -> list[str]:
        return list(obj.template.placeholders)

    @staticmethod
    def resolve_updated_at(obj: PromptTemplateVersion) -> datetime:
        return obj.created_at


class PromptVersionOut(Schema):
    version: int
    text: str
    created_at: datetime
    created_by: str | None = Field(description="Username, or null for the built-in text.")

    @staticmethod
    def resolve_version(obj: PromptTemplateVersion) -> int:
        return obj.number

    @staticmethod
    def resolve_created_by(obj: PromptTemplateVersion) -> str | None:
        return obj.created_by.get_username() if obj.created_by else None


class PromptIn(_Body):
    text: PromptText = Field(description="{name} placeholders from this prompt's list; {{ }} for braces.")


# Tools -----------------------------------------------------------------------------------------


class ToolOut(Schema):
    name: str
    description: str
    args_schema: dict[str, Any] = Field(description="JSON schema of the tool's arguments.")


# Agents ----------------------------------------------------------------------------------------


class PlanningConfigIn(_Body):
    """CrewAI's PlanningConfig (ENGINE.md §2). In a PATCH, only the fields sent change."""

    reasoning_effort: ReasoningEffort = "medium"
    observe_steps: bool | None = Field(None, description="null: decided by the effort.")
    max_attempts: int | None = Field(None, ge=1, description="null: until ready, at most 10.")
    max_steps: int = Field(20, ge=1)
    max_replans: int = Field(3, ge=0)
    max_step_iterations: int = Field(15, ge=1)
    step_timeout: int | None = Field(None, ge=1, description="Seconds; null: no limit.")
    llm_id: Id | None = Field(None, description="Planning LLM; null: the agent's.")
    system_prompt: SystemPrompt | None = Field(None, description="Used verbatim; null: the template.")
    plan_prompt: PlanPrompt | None = Field(
        None,
        description="Placeholders: {role} {goal} {backstory} {description} {expected_output} "
        "{tools} {max_steps}. null: the template.",
    )
    refine_prompt: RefinePrompt | None = Field(
        None,
        description="Placeholders: {role} {goal} {backstory} {current_plan} {max_steps}. "
        "null: the template.",
    )


class PlanningConfigOut(Schema):
    reasoning_effort: ReasoningEffort
    observe_steps: bool | None
    max_attempts: int | None
    max_steps: int
    max_replans: int
    max_step_iterations: int
    step_timeout: int | None
    llm_id: int | None
    system_prompt: str | None
    plan_prompt: str | None
    refine_prompt: str | None

    @staticmethod
    def resolve_system_prompt(obj: Any) -> str | None:
        return obj.system_prompt or None

    @staticmethod
    def resolve_plan_prompt(obj: Any) -> str | None:
        return obj.plan_prompt or None

    @staticmethod
    def resolve_refine_prompt(obj: Any) -> str | None:
        return obj.refine_prompt or None


class AgentBudgetIn(_Body):
    max_tool_calls: int | None = Field(None, ge=0, description="null: unlimited.")
    max_input_tokens: int | None = Field(None, ge=1, description="null: unlimited.")


class AgentBudgetOut(Schema):
    max_tool_calls: int | None
    max_input_tokens: int | None


class ToolOptionsIn(_Body):
    needs_approval: bool = Field(False, description="Pause for a person before each call.")
    max_usage: int | None = Field(None, ge=1, description="Calls allowed per task.")
    result_as_answer: bool = Field(False, description="The tool's output is the final answer.")


class ToolOptionsOut(Schema):
    needs_approval: bool = False
    max_usage: int | None = None
    result_as_answer: bool = False


class _AgentBody(_Body):
    def service_fields(self) -> dict[str, Any]:
        fields = super().service_fields()
        budget = fields.pop("budget", None) or {}
        fields.update({f"budget_{key}": value for key, value in budget.items()})
        return fields


class AgentIn(_AgentBody):
    name: AgentName
    role: AgentRole
    goal: AgentGoal
    backstory: AgentBackstory = ""
    llm_id: Id | None = Field(None, description="null: the site's default LLM.")
    tools: list[str] = Field(default_factory=list, description="Names from GET /api/tools.")
    tool_options: dict[str, ToolOptionsIn] = Field(
        default_factory=dict, description="Per tool name."
    )
    agent_type: AgentType = "react"
    max_iter: int = Field(25, ge=1)
    max_rpm: int | None = Field(None, ge=1)
    max_execution_time: int | None = Field(None, ge=1, description="Seconds.")
    max_retry_limit: int = Field(2, ge=0)
    respect_context_window: bool = True
    planning: bool = Field(
        False, description="Plan before acting, as planning_config low effort, one attempt."
    )
    planning_config: PlanningConfigIn | None = Field(
        None, description="null: no explicit config; when given it wins over planning."
    )
    budget: AgentBudgetIn = Field(default_factory=AgentBudgetIn)


class AgentPatch(_AgentBody):
    """Only the fields sent change. Fields that cannot be empty refuse null."""

    name: AgentName = Field(None)
    role: AgentRole = Field(None)
    goal: AgentGoal = Field(None)
    backstory: AgentBackstory = Field(None)
    llm_id: Id | None = Field(None, description="null: the site's default LLM.")
    tools: list[str] = Field(None)
    tool_options: dict[str, ToolOptionsIn] = Field(None)
    agent_type: AgentType = Field(None)
    max_iter: int = Field(None, ge=1)
    max_rpm: int | None = Field(None, ge=1)
    max_execution_time: int | None = Field(None, ge=1)
    max_retry_limit: int = Field(None, ge=0)
    respect_context_window: bool = Field(None)
    planning: bool = Field(None)
    planning_config: PlanningConfigIn | None = Field(
        None, description="null removes the config; an object changes only the fields it has."
    )
    budget: AgentBudgetIn = Field(None, description="Changes only the limits it has.")


class AgentOut(Schema):
    id: int
    name: str
    role: str
    goal: str
    backstory: str
    llm_id: int | None = Field(description="null: the site's default LLM.")
    tools: list[str]
    tool_options: dict[str, ToolOptionsOut]
    agent_type: AgentType
    max_iter: int
    max_rpm: int | None
    max_execution_time: int | None
    max_retry_limit: int
    respect_context_window: bool
    planning: bool
    planning_config: PlanningConfigOut | None
    budget: AgentBudgetOut
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_planning_config(obj: Agent) -> Any:
        return getattr(obj, "planning_config", None)

    @staticmethod
    def resolve_budget(obj: Agent) -> dict[str, int | None]:
        return {
            "max_tool_calls": obj.budget_max_tool_calls,
            "max_input_tokens": obj.budget_max_input_tokens,
        }
