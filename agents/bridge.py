"""ORM rows of the agents app → engine specs (the engine never sees a model instance)."""

from __future__ import annotations

from agents.engine.specs import AgentSpec, Budget, LLMSpec, PlanningConfigSpec, ToolRef
from agents.models import DEMO_MODEL, LLM, Agent


def _supports_tools(llm: LLM) -> bool:
    if llm.supports_tools is not None:
        return llm.supports_tools
    if llm.model == DEMO_MODEL:
        return True
    from agents.engine.gateway import supports_tools  # imports litellm: worker side only

    return supports_tools(llm.model)


def llm_spec(llm: LLM) -> LLMSpec:
    params = dict(llm.params or {})
    timeout = float(params.pop("timeout", 60))
    max_retries = int(params.pop("max_retries", 3))
    key = llm.get_api_key()
    return LLMSpec(
        key=f"llm-{llm.pk}",
        model=llm.model,
        api_base=llm.api_base or None,
        api_key=key,
        params=params,
        timeout=timeout,
        max_retries=max_retries,
        context_window=llm.context_window,
        supports_tools=_supports_tools(llm),
        rpm=llm.rpm_limit,
        input_price_per_1k=float(llm.input_price_per_1k) if llm.input_price_per_1k is not None else None,
        output_price_per_1k=float(llm.output_price_per_1k) if llm.output_price_per_1k is not None else None,
    )


def planning_spec(agent: Agent, agent_llm: LLMSpec) -> PlanningConfigSpec | None:
    config = getattr(agent, "planning_config", None)
    if config is None:
        return None
    return PlanningConfigSpec(
        reasoning_effort=config.reasoning_effort,
        observe_steps=config.observe_steps,
        max_attempts=config.max_attempts,
        max_steps=config.max_steps,
        max_replans=config.max_replans,
        max_step_iterations=config.max_step_iterations,
        step_timeout=config.step_timeout,
        llm=llm_spec(config.llm) if config.llm_id else None,
        system_prompt=config.system_prompt or None,
        plan_prompt=config.plan_prompt or None,
        refine_prompt=config.refine_prompt or None,
    )


def agent_spec(agent: Agent, *, default_llm: LLM) -> AgentSpec:
    llm = llm_spec(agent.llm or default_llm)
    options = agent.tool_options or {}
    return AgentSpec(
        key=f"agent-{agent.pk}",
        name=agent.name,
        role=agent.role,
        goal=agent.goal,
        backstory=agent.backstory,
        llm=llm,
        tools=tuple(ToolRef(name=name, **(options.get(name) or {})) for name in agent.tools),
        agent_type=agent.agent_type,
        max_iter=agent.max_iter,
        max_rpm=agent.max_rpm,
        max_execution_time=agent.max_execution_time,
        max_retry_limit=agent.max_retry_limit,
        respect_context_window=agent.respect_context_window,
        planning=agent.planning,
        planning_config=planning_spec(agent, llm),
        budget=Budget(
            max_tool_calls=agent.budget_max_tool_calls,
            max_input_tokens=agent.budget_max_input_tokens,
        ),
    )
