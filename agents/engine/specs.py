"""Pydantic specs that describe what the engine runs: LLMs, tools, agents, planning, tasks."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

ReasoningEffort = Literal["low", "medium", "high"]
AgentType = Literal["react", "plan_execute"]
# What an agent bound to an approved crew plan does when a step fails (ENGINE.md §2b).
OnStepFailure = Literal["continue", "ask", "adapt"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LLMSpec(_Spec):
    """One configured model. ``key`` names it for rate limiting and usage roll-ups."""

    key: str = Field(description="Stable identity of this LLM (its database id, or a name).")
    model: str = Field(description="litellm model string, e.g. openai/gpt-4o-mini.")
    api_base: str | None = None
    api_key: SecretStr | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, ...
    # Seconds: to open the connection, to the answer's first token, and for the whole call
    # (a streamed answer's between-chunk stalls count against the first-token limit too).
    connect_timeout: float = Field(default=10.0, gt=0)
    first_token_timeout: float = Field(default=60.0, gt=0)
    timeout: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    context_window: int = Field(default=128_000, ge=256)
    supports_tools: bool = True
    rpm: int | None = Field(default=None, ge=1)
    input_price_per_1k: float | None = Field(default=None, ge=0)
    output_price_per_1k: float | None = Field(default=None, ge=0)
    stream: bool = True
    # Request forms this LLM is known to refuse (``agents.engine.capabilities.FORMS``): learned by
    # a connection test or a refusal during a run, and never sent again.
    refuses: frozenset[str] = frozenset()


class Budget(_Spec):
    """Limits checked before every LLM or tool call; ``None`` means unlimited."""

    max_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_input_tokens: int | None = Field(default=None, ge=1)


PLAN_PROMPT_PLACEHOLDERS = frozenset(
    {"role", "goal", "backstory", "description", "expected_output", "tools", "max_steps"}
)
REFINE_PROMPT_PLACEHOLDERS = frozenset({"role", "goal", "backstory", "current_plan", "max_steps"})


class PlanningConfigSpec(_Spec):
    """CrewAI's ``PlanningConfig`` (ENGINE.md §2), with our bounds."""

    reasoning_effort: ReasoningEffort = "medium"
    observe_steps: bool | None = None
    max_attempts: int | None = Field(default=None, ge=1)
    max_steps: int = Field(default=20, ge=1)
    max_replans: int = Field(default=3, ge=0)
    max_step_iterations: int = Field(default=15, ge=1)
    step_timeout: float | None = Field(default=None, gt=0)
    llm: LLMSpec | None = None
    system_prompt: str | None = None
    plan_prompt: str | None = None
    refine_prompt: str | None = None

    @model_validator(mode="after")
    def _check_placeholders(self) -> PlanningConfigSpec:
        from agents.engine.prompts import unknown_placeholders

        for field, allowed in (
            ("plan_prompt", PLAN_PROMPT_PLACEHOLDERS),
            ("refine_prompt", REFINE_PROMPT_PLACEHOLDERS),
        ):
            text = getattr(self, field)
            if text is None:
                continue
            bad = unknown_placeholders(text, allowed)
            if bad:
                raise ValueError(
                    f"{field} uses unknown placeholder(s) {', '.join('{' + b + '}' for b in bad)}; "
                    f"allowed: {', '.join('{' + a + '}' for a in sorted(allowed))}"
                )
        return self

    @property
    def max_attempts_effective(self) -> int:
        """``None`` keeps refining until ready, but never more than 10 attempts (ours)."""
        return self.max_attempts if self.max_attempts is not None else 10

    @property
    def llm_observes(self) -> bool:
        if self.observe_steps is not None:
            return self.observe_steps
        return self.reasoning_effort in ("medium", "high")


class ToolRef(_Spec):
    """A catalogue tool as an agent uses it."""

    name: str
    needs_approval: bool = False
    max_usage: int | None = Field(default=None, ge=1)
    result_as_answer: bool = False


class AgentSpec(_Spec):
    key: str
    name: str = ""
    role: str
    goal: str
    backstory: str = ""
    llm: LLMSpec
    tools: tuple[ToolRef, ...] = ()
    agent_type: AgentType = "react"
    max_iter: int = Field(default=25, ge=1)
    max_rpm: int | None = Field(default=None, ge=1)
    max_execution_time: float | None = Field(default=None, gt=0)
    max_retry_limit: int = Field(default=2, ge=0)
    respect_context_window: bool = True
    planning: bool = False
    planning_config: PlanningConfigSpec | None = None
    budget: Budget = Budget()
    cache_tools: bool = True

    @property
    def effective_planning(self) -> PlanningConfigSpec | None:
        """An explicit config wins; ``planning=True`` alone means low effort, one attempt."""
        if self.planning_config is not None:
            return self.planning_config
        if self.planning:
            return PlanningConfigSpec(reasoning_effort="low", max_attempts=1)
        return None


class ApprovedStep(_Spec):
    """One step of an approved crew plan: its stable id (events carry it) and its text."""

    id: str
    text: str


class GuardrailSpec(_Spec):
    """What a task's answer is checked against before a later task takes it (issue #18).

    Built-in checks cost no LLM call; ``criteria`` are plain-language checks an LLM judges.
    ``must_contain`` / ``must_not_contain`` compare without regard to case; ``pattern`` is a
    regular expression searched anywhere in the answer.
    """

    criteria: tuple[str, ...] = ()
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=1)
    must_contain: tuple[str, ...] = ()
    must_not_contain: tuple[str, ...] = ()
    pattern: str | None = None

    @model_validator(mode="after")
    def _check(self) -> GuardrailSpec:
        from agents.engine.patterns import compile_error  # the engine the pattern runs on

        if self.min_chars is not None and self.max_chars is not None and self.min_chars > self.max_chars:
            raise ValueError("min_chars is more than max_chars")
        error = compile_error(self.pattern) if self.pattern else None
        if error is not None:
            raise ValueError(f"pattern is not a valid regular expression: {error}")
        return self

    @property
    def active(self) -> bool:
        return any(
            (self.criteria, self.min_chars is not None, self.max_chars is not None,
             self.must_contain, self.must_not_contain, self.pattern)
        )


class TaskSpec(_Spec):
    """One unit of work for one agent, already interpolated.

    ``plan_steps`` is the approved crew plan for the task: when it is set, it IS the agent's plan
    whatever the agent kind (ENGINE.md §2b), and ``on_step_failure`` says how far the agent may
    deviate from it. Plain strings are accepted and numbered ``<key>.p<n>``.
    """

    key: str
    number: int = Field(default=1, ge=1)
    name: str = ""
    description: str
    expected_output: str = "Complete the task successfully"
    context: tuple[str, ...] = ()  # outputs of earlier tasks this task depends on
    plan_steps: tuple[ApprovedStep, ...] = ()  # an approved crew plan for this task, binding
    on_step_failure: OnStepFailure = "continue"
    human_input: bool = False
    output_json_schema: dict[str, Any] | None = None
    guardrails: GuardrailSpec = GuardrailSpec()
    guardrail_max_retries: int = Field(default=3, ge=0, le=10)

    @model_validator(mode="before")
    @classmethod
    def _steps_from_text(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(isinstance(s, str) for s in data.get("plan_steps") or ()):
            key = data.get("key", "task")
            data = {
                **data,
                "plan_steps": tuple(
                    {"id": f"{key}.p{n}", "text": s} if isinstance(s, str) else s
                    for n, s in enumerate(data["plan_steps"], start=1)
                ),
            }
        return data

    @property
    def plan_texts(self) -> tuple[str, ...]:
        return tuple(s.text for s in self.plan_steps)

    @classmethod
    def from_message(cls, message: str, *, key: str = "kickoff") -> TaskSpec:
        """An agent kicked off directly treats the message as its task (ENGINE.md §3)."""
        return cls(key=key, description=message, expected_output="Complete the task successfully")
