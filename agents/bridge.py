"""ORM rows of the agents app → engine specs; agents are snapshotted as plain data at kickoff."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.db.models import Q

from agents.engine.specs import AgentSpec, Budget, LLMSpec, PlanningConfigSpec, ToolRef
from agents.models import DEMO_MODEL, LLM, TIMEOUT_PARAMS, Agent, PlanningConfig, valid_timeout
from planner_site.prepared import STAND_IN_ID, Prepared

PLANNING_SNAPSHOT_FIELDS = (
    "reasoning_effort", "observe_steps", "max_attempts", "max_steps", "max_replans",
    "max_step_iterations", "step_timeout", "llm_id", "system_prompt", "plan_prompt", "refine_prompt",
)
AGENT_SNAPSHOT_FIELDS = (
    "id", "name", "role", "goal", "backstory", "llm_id", "tools", "tool_options", "agent_type",
    "max_iter", "max_rpm", "max_execution_time", "max_retry_limit", "respect_context_window",
    "planning", "budget_max_tool_calls", "budget_max_input_tokens",
)


def _supports_tools(llm: LLM) -> bool:
    if llm.supports_tools is not None:
        return llm.supports_tools
    if llm.accepts("tools") is not None:  # what Test connection found beats a guess
        return bool(llm.accepts("tools"))
    if llm.model == DEMO_MODEL:
        return True
    from agents.engine.gateway import supports_tools  # imports litellm: worker side only

    return supports_tools(llm.model)


def _no_key(llm: LLM) -> str | None:
    """OpenAI's client refuses to send without a key; local servers (Ollama, llama.cpp, vLLM,
    LM Studio) want none, so an ``openai/`` model with its own address gets a stand-in."""
    return "no-key" if llm.api_base and llm.model.startswith("openai/") else None


def llm_spec(llm: LLM) -> LLMSpec:
    params = dict(llm.params if isinstance(llm.params, dict) else {})
    # Seconds; missing keys keep ``LLMSpec``'s defaults (connect 10, first token 60, total 600).
    # So do values a row stored before they were checked (0, negative, text): an old row never
    # fails a page or a run.
    timeouts = {key: float(value) for key in TIMEOUT_PARAMS
                if valid_timeout(value := params.pop(key, None))}
    retries = params.pop("max_retries", 3)
    max_retries = min(retries, 10) if isinstance(retries, int) and not isinstance(retries, bool) and retries >= 0 else 3
    return LLMSpec(
        key=f"llm-{llm.pk}",
        model=llm.model,
        api_base=llm.api_base or None,
        api_key=llm.get_api_key() or _no_key(llm),
        params=params,
        **timeouts,
        max_retries=max_retries,
        context_window=llm.context_window,
        supports_tools=_supports_tools(llm),
        rpm=llm.rpm_limit,
        input_price_per_1k=float(llm.input_price_per_1k) if llm.input_price_per_1k is not None else None,
        output_price_per_1k=float(llm.output_price_per_1k) if llm.output_price_per_1k is not None else None,
        refuses=llm.refused_forms,
    )


def agent_snapshot(agent: Agent) -> dict[str, Any]:
    """The agent as plain JSON data (no secrets: LLMs are referenced by id)."""
    data = {field: getattr(agent, field) for field in AGENT_SNAPSHOT_FIELDS}
    try:
        config = agent.planning_config  # no query when the agent came with select_related
    except PlanningConfig.DoesNotExist:
        config = None
    data["planning_config"] = (
        {field: getattr(config, field) for field in PLANNING_SNAPSHOT_FIELDS} if config else None
    )
    return data


LLMLookup = Callable[[int | None], LLMSpec]


def snapshot_llm_ids(agents: Iterable[dict[str, Any]], *more: int | None) -> set[int]:
    """The LLM ids snapshotted agents (and ``more``: a crew's planning or manager LLM) use."""
    ids = {a["llm_id"] for a in agents} | {(a.get("planning_config") or {}).get("llm_id") for a in agents}
    return {i for i in ids | set(more) if i is not None}


def llm_rows(ids: Iterable[int]) -> tuple[LLM | None, dict[int, LLM]]:
    """The site default LLM (None if there is none) and the LLMs with ``ids``, in one query.

    Read fresh for every run: an admin's new key, model or default holds from the next run on.
    """
    wanted = sorted(set(ids))
    rows = _llm_rows_read(len(wanted)).all(LLM, **{f"llm{n}": pk for n, pk in enumerate(wanted)})
    return next((r for r in rows if r.is_default), None), {r.pk: r for r in rows}


@functools.cache
def _llm_rows_read(count: int) -> Prepared:
    """``llm_rows``' read for ``count`` ids, compiled once (planner_site.prepared): compiling
    the OR of the default and the ids was most of the 0.3 ms every run's start paid for it."""
    return Prepared(lambda **ids: LLM.objects.filter(Q(is_default=True) | Q(pk__in=list(ids.values()))),
                    **{f"llm{n}": STAND_IN_ID + n for n in range(count)})


def llm_lookup(*, default: LLM, rows: Mapping[int, LLM] | None = None) -> LLMLookup:
    """Resolve an LLM id (None = the site default) to a spec, reading each row once.

    ``rows`` are LLMs read already (``llm_rows``): an id among them costs no query.
    """
    cache: dict[int | None, LLMSpec] = {}
    known = rows or {}

    def lookup(llm_id: int | None) -> LLMSpec:
        if llm_id not in cache:
            if llm_id is None:
                row = default
            elif llm_id in known:
                row = known[llm_id]
            else:
                row = LLM.objects.filter(pk=llm_id).first()
            if row is None:
                raise LookupError(f"LLM {llm_id} no longer exists")
            cache[llm_id] = llm_spec(row)
        return cache[llm_id]

    return lookup


def agent_spec(data: dict[str, Any], *, llms: LLMLookup, cache_tools: bool = True) -> AgentSpec:
    llm = llms(data["llm_id"])
    options = data.get("tool_options") or {}
    config = data.get("planning_config")
    planning = None
    if config:
        values = {k: v for k, v in config.items() if k != "llm_id"}
        for key in ("system_prompt", "plan_prompt", "refine_prompt"):
            values[key] = values.get(key) or None
        planning = PlanningConfigSpec(**values, llm=llms(config["llm_id"]) if config.get("llm_id") else None)
    return AgentSpec(
        key=str(data["id"]),
        name=data["name"],
        role=data["role"],
        goal=data["goal"],
        backstory=data["backstory"],
        llm=llm,
        tools=tuple(ToolRef(name=name, **(options.get(name) or {})) for name in data["tools"]),
        agent_type=data["agent_type"],
        max_iter=data["max_iter"],
        max_rpm=data["max_rpm"],
        max_execution_time=data["max_execution_time"],
        max_retry_limit=data["max_retry_limit"],
        respect_context_window=data["respect_context_window"],
        planning=data["planning"],
        planning_config=planning,
        budget=Budget(
            max_tool_calls=data["budget_max_tool_calls"],
            max_input_tokens=data["budget_max_input_tokens"],
        ),
        cache_tools=cache_tools,
    )
