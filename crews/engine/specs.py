"""Pydantic specs of a crew as the crew runtime sees it (already resolved from the database)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.engine.specs import AgentSpec, Budget, GuardrailSpec, LLMSpec, OnStepFailure
from crews.engine.interpolate import find_placeholders, interpolate

Process = Literal["sequential", "hierarchical"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CrewTaskSpec(_Spec):
    key: str  # the task's id as text: events carry it as task_id
    number: int = Field(ge=1)  # 1-based position, what the crew planner refers to
    name: str = ""
    description: str
    expected_output: str
    agent_key: str | None = None
    context_keys: tuple[str, ...] = ()  # earlier tasks whose output this one receives
    async_execution: bool = False
    human_input: bool = False
    output_schema: dict[str, Any] | None = None  # the JSON the answer must be (issue #18)
    guardrails: GuardrailSpec = GuardrailSpec()  # checks the answer must pass
    guardrail_max_retries: int = Field(default=3, ge=0, le=10)


class CrewSpec(_Spec):
    key: str
    name: str = ""
    process: Process = "sequential"
    agents: tuple[AgentSpec, ...] = ()
    tasks: tuple[CrewTaskSpec, ...] = ()
    planning: bool = False
    planning_llm: LLMSpec | None = None
    manager_llm: LLMSpec | None = None
    budget: Budget = Budget()
    max_rpm: int | None = Field(default=None, ge=1)
    run_without_plan_on_failure: bool = False
    on_step_failure: OnStepFailure = "continue"  # how far an agent may depart from approved steps

    @model_validator(mode="after")
    def _check_references(self) -> CrewSpec:
        agents = {a.key for a in self.agents}
        seen: set[str] = set()
        for task in self.tasks:
            if task.agent_key is not None and task.agent_key not in agents:
                raise ValueError(f"task {task.number} names unknown agent {task.agent_key}")
            if self.process == "sequential" and task.agent_key is None:
                raise ValueError(f"task {task.number} has no agent")
            unknown = [k for k in task.context_keys if k not in seen]
            if unknown:
                raise ValueError(f"task {task.number} uses the output of a later or unknown task")
            seen.add(task.key)
        if self.process == "hierarchical" and self.manager_llm is None:
            raise ValueError("a hierarchical crew needs a manager LLM")
        return self

    def agent(self, key: str | None) -> AgentSpec | None:
        return next((a for a in self.agents if a.key == key), None)

    def input_names(self) -> list[str]:
        texts: list[str] = []
        for agent in self.agents:
            texts += [agent.role, agent.goal, agent.backstory]
        for task in self.tasks:
            texts += [task.description, task.expected_output]
        return find_placeholders(texts)

    def interpolated(self, inputs: dict[str, Any]) -> CrewSpec:
        """The crew with every ``{name}`` filled; raises ``MissingInput`` naming all gaps."""
        from crews.engine.interpolate import MissingInput

        missing = [n for n in self.input_names() if n not in inputs]
        if missing:
            raise MissingInput(missing)
        agents = tuple(
            a.model_copy(
                update={
                    "role": interpolate(a.role, inputs),
                    "goal": interpolate(a.goal, inputs),
                    "backstory": interpolate(a.backstory, inputs),
                }
            )
            for a in self.agents
        )
        tasks = tuple(
            t.model_copy(
                update={
                    "description": interpolate(t.description, inputs),
                    "expected_output": interpolate(t.expected_output, inputs),
                }
            )
            for t in self.tasks
        )
        return self.model_copy(update={"agents": agents, "tasks": tasks})
