"""Running a crew: tasks in order (or through a manager), context passing, async tasks, resume."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.engine.agent import AgentError, AgentResult, run_agent
from agents.engine.calls import BudgetExceeded
from agents.engine.events import task_ref
from agents.engine.llm import LLMError
from agents.engine.prompts import PromptBook
from agents.engine.runtime import Cancelled, RunContext, Usage
from agents.engine.specs import AgentSpec, ApprovedStep, OnStepFailure, TaskSpec, ToolRef
from agents.engine.tools import Tool, ToolRegistry, default_registry
from crews.engine.knowledge import KnowledgeBase, TaskNotes, learn, noting, recall
from crews.engine.specs import CrewSpec, CrewTaskSpec

TaskStatus = Literal["done", "failed", "skipped"]


@dataclass
class TaskOutcome:
    key: str
    status: TaskStatus
    output: str = ""
    error: str = ""
    usage: Usage = field(default_factory=Usage)
    output_json: Any = None  # the answer's value when the task has an output schema


@dataclass
class CrewResult:
    output: str
    tasks: dict[str, TaskOutcome]
    failed: bool = False
    error: str = ""


def task_spec(
    task: CrewTaskSpec,
    *,
    context: Sequence[str],
    plan_steps: Sequence[ApprovedStep | str] = (),
    on_step_failure: OnStepFailure = "continue",
) -> TaskSpec:
    """The agent's view of a crew task; the approved plan binds it, never changes its record."""
    return TaskSpec.model_validate({
        "key": task.key,
        "number": task.number,
        "name": task.name,
        "description": task.description,
        "expected_output": task.expected_output,
        "context": tuple(context),
        "plan_steps": tuple(plan_steps),
        "on_step_failure": on_step_failure,
        "human_input": task.human_input,
        "output_json_schema": task.output_schema,
        "guardrails": task.guardrails,
        "guardrail_max_retries": task.guardrail_max_retries,
    })


def _context_for(task: CrewTaskSpec, crew: CrewSpec, outputs: Mapping[str, str]) -> list[str]:
    if task.context_keys:
        return [outputs[k] for k in task.context_keys if k in outputs]
    # Like CrewAI: with no explicit context a task sees every earlier task's output.
    earlier = [t.key for t in crew.tasks if t.number < task.number]
    return [outputs[k] for k in earlier if k in outputs]


def _failed(exc: Exception) -> dict[str, Any]:
    """``task.failed``'s data: the error, and its kind of provider failure when an LLM call failed."""
    data: dict[str, Any] = {"error": str(exc)}
    cause: BaseException | None = exc  # an agent's error names the LLM error it gave up on as its cause
    while cause is not None and not isinstance(cause, LLMError):
        cause = cause.__cause__
    if isinstance(cause, LLMError):
        data["kind"] = cause.kind
    return data


async def _run_one(
    ctx: RunContext, crew: CrewSpec, task: CrewTaskSpec, agent: AgentSpec, spec: TaskSpec,
    knowledge: KnowledgeBase | None = None,
) -> TaskOutcome:
    task_ctx = ctx.for_task(task.key)
    await task_ctx.emit("task.started", {"task_id": task_ref(task.key), "agent": agent.role, "number": task.number})
    notes = TaskNotes()
    if knowledge is not None:
        # Passages and memories come first in the task's context (issue #19); its steps search
        # again for their own text.
        recalled = await recall(task_ctx, knowledge, task, agent.key)
        if recalled.blocks:
            spec = spec.model_copy(update={"context": (*recalled.blocks, *spec.context)})
        task_ctx.knowledge = recalled.knowledge
        if knowledge.remembers:
            task_ctx = noting(task_ctx, notes)
    try:
        result: AgentResult = await run_agent(task_ctx, agent, spec)
    except (Cancelled, BudgetExceeded):
        raise
    except (AgentError, LLMError) as exc:
        await task_ctx.emit("task.failed", _failed(exc))
        return TaskOutcome(key=task.key, status="failed", error=str(exc))
    data: dict[str, Any] = {
        "output": result.output,
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "cost_usd": round(result.usage.cost_usd, 6),
        "llm_calls": result.usage.llm_calls,
    }
    if task.output_schema is not None:
        data["output_json"] = result.output_json
    await task_ctx.emit("task.completed", data)
    if knowledge is not None and knowledge.remembers:
        await learn(task_ctx, knowledge, agent.llm, task, result.output, notes)
    return TaskOutcome(
        key=task.key, status="done", output=result.output, usage=result.usage, output_json=result.output_json
    )


async def run_crew(
    ctx: RunContext,
    crew: CrewSpec,
    *,
    plan: Mapping[str, Sequence[ApprovedStep | str]] | None = None,
    done: Mapping[str, str] | None = None,
    knowledge: KnowledgeBase | None = None,
) -> CrewResult:
    """Run every task not already in ``done`` (task key -> output, from a run being resumed).

    A failed task stops the crew: later tasks are skipped (``task.skipped``). Cancellation and
    an exceeded budget propagate to the caller, which records the partial results it has.
    """
    plan = plan or {}
    outputs: dict[str, str] = dict(done or {})
    outcomes: dict[str, TaskOutcome] = {
        key: TaskOutcome(key=key, status="done", output=out) for key, out in outputs.items()
    }
    pending: list[tuple[CrewTaskSpec, asyncio.Task[TaskOutcome]]] = []
    manager = _Manager(ctx, crew, knowledge) if crew.process == "hierarchical" else None
    failure: TaskOutcome | None = None

    async def settle() -> None:
        nonlocal failure
        for task, running in pending:
            outcome = await running
            outcomes[task.key] = outcome
            if outcome.status == "done":
                outputs[task.key] = outcome.output
            elif failure is None:
                failure = outcome
        pending.clear()

    try:
        for task in crew.tasks:
            if task.key in outputs:
                continue
            if failure is not None:
                break
            # Like CrewAI: a task that runs in line waits for every async task before it; an
            # async one waits only for the async tasks it names as context.
            waits = not task.async_execution or set(task.context_keys) & {t.key for t, _ in pending}
            if pending and waits:
                await settle()
                if failure is not None:
                    break
            spec = task_spec(
                task,
                context=_context_for(task, crew, outputs),
                plan_steps=plan.get(task.key, ()),
                on_step_failure=crew.on_step_failure,
            )
            if manager is not None:
                work = manager.run(task, spec)
            else:
                agent = crew.agent(task.agent_key)
                assert agent is not None  # CrewSpec validation guarantees it for sequential crews
                work = _run_one(ctx, crew, task, agent, spec, knowledge)
            if task.async_execution:
                pending.append((task, asyncio.ensure_future(work)))
                continue
            outcome = await work
            outcomes[task.key] = outcome
            if outcome.status == "done":
                outputs[task.key] = outcome.output
            else:
                failure = outcome
        await settle()
    except BaseException:
        for _task, running in pending:
            running.cancel()
        await asyncio.gather(*(r for _t, r in pending), return_exceptions=True)
        raise

    for task in crew.tasks:
        if task.key not in outcomes:
            outcomes[task.key] = TaskOutcome(key=task.key, status="skipped")
            await ctx.for_task(task.key).emit("task.skipped", {"reason": "an earlier task failed"})
    if failure is not None:
        name = next((t.name or f"task {t.number}" for t in crew.tasks if t.key == failure.key), "a task")
        return CrewResult(output="", tasks=outcomes, failed=True, error=f"{name} failed: {failure.error}")
    last = crew.tasks[-1].key if crew.tasks else None
    return CrewResult(output=outputs.get(last, "") if last else "", tasks=outcomes)


class _Manager:
    """Hierarchical process: a manager LLM delegates each task through two built-in tools."""

    DELEGATE = "delegate_work_to_coworker"
    ASK = "ask_question_to_coworker"

    def __init__(self, ctx: RunContext, crew: CrewSpec, knowledge: KnowledgeBase | None = None) -> None:
        assert crew.manager_llm is not None
        self.ctx = ctx
        self.crew = crew
        self.knowledge = knowledge
        self.book = ctx.prompts if ctx.prompts is not None else PromptBook()
        self.coworkers = {a.role: a for a in crew.agents}
        # Who does what: the manager picks a coworker by role, so it needs their goals too.
        team = "\n".join(f"- {a.role}: {a.goal}" for a in crew.agents) or self.book.render("none")
        self.agent = AgentSpec(
            key=f"{crew.key}.manager",
            name="Manager",
            role=self.book.render("manager_role"),
            goal=self.book.render("manager_goal"),
            backstory=self.book.render("manager", agents=team),
            llm=crew.manager_llm,
            tools=(ToolRef(name=self.DELEGATE), ToolRef(name=self.ASK)),
            max_iter=15,
        )

    def _tools(self, task: CrewTaskSpec) -> ToolRegistry:
        base = self.ctx.tools if isinstance(self.ctx.tools, ToolRegistry) else default_registry()
        names = list(self.coworkers)
        coworkers = ", ".join(names)
        schema = {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the coworker should do or answer."},
                "context": {"type": "string", "description": "Everything the coworker needs to know."},
                "coworker": {"type": "string", "enum": names, "description": "The coworker's role."},
            },
            "required": ["task", "coworker"],
        }

        def make(kind: str) -> Any:
            async def run(args: dict[str, Any]) -> str:
                agent = self.coworkers.get(args.get("coworker", ""))
                if agent is None:
                    return self.book.render("manager_unknown_coworker", coworkers=coworkers)
                spec = TaskSpec(
                    key=task.key,
                    number=task.number,
                    description=args["task"],
                    expected_output=(
                        self.book.render("manager_ask_expected_output")
                        if kind == "ask"
                        else task.expected_output
                    ),
                    context=(args["context"],) if args.get("context") else (),
                )
                sub = self.ctx.for_task(task.key)
                await sub.emit("task.delegated", {"coworker": agent.role, "kind": kind, "task": args["task"]})
                if self.knowledge is not None:
                    # The coworker reads its own and the crew's sources for the work handed to it;
                    # the crew's memories went to the manager.
                    query = "\n".join(p for p in (args["task"], args.get("context")) if p)
                    recalled = await recall(sub, self.knowledge, task, agent.key, query=query, memories=False)
                    spec = spec.model_copy(update={"context": (*recalled.blocks, *spec.context)})
                    sub.knowledge = recalled.knowledge
                result = await run_agent(sub, agent, spec)
                return result.output

            return run

        delegate = self.book.render("manager_delegate_tool", coworkers=coworkers)
        ask = self.book.render("manager_ask_tool", coworkers=coworkers)
        return base.with_tools(
            Tool(name=self.DELEGATE, description=delegate, args_schema=schema, run=make("delegate")),
            Tool(name=self.ASK, description=ask, args_schema=schema, run=make("ask")),
        )

    async def run(self, task: CrewTaskSpec, spec: TaskSpec) -> TaskOutcome:
        task_ctx = self.ctx.for_task(task.key)
        task_ctx.tools = self._tools(task)
        agent_name = self.agent.role
        await task_ctx.emit("task.started", {"task_id": task_ref(task.key), "agent": agent_name, "number": task.number})
        notes = TaskNotes()
        if self.knowledge is not None:
            # The manager hands work to whoever holds the right documents: it sees every
            # source's title (a coworker's own named with its role) and the crew's passages.
            recalled = await recall(task_ctx, self.knowledge, task, None, titles=await self._titles())
            if recalled.blocks:
                spec = spec.model_copy(update={"context": (*recalled.blocks, *spec.context)})
            task_ctx.knowledge = recalled.knowledge
            if self.knowledge.remembers:
                task_ctx = noting(task_ctx, notes)
        try:
            result = await run_agent(task_ctx, self.agent, spec)
        except (Cancelled, BudgetExceeded):
            raise
        except (AgentError, LLMError) as exc:
            await task_ctx.emit("task.failed", _failed(exc))
            return TaskOutcome(key=task.key, status="failed", error=str(exc))
        data: dict[str, Any] = {"output": result.output, "llm_calls": result.usage.llm_calls}
        if task.output_schema is not None:
            data["output_json"] = result.output_json
        await task_ctx.emit("task.completed", data)
        if self.knowledge is not None and self.knowledge.remembers:
            await learn(task_ctx, self.knowledge, self.agent.llm, task, result.output, notes)
        return TaskOutcome(
            key=task.key, status="done", output=result.output, usage=result.usage, output_json=result.output_json
        )

    async def _titles(self) -> list[str]:
        """Every source title the crew's agents read: the crew's, then each coworker's own as
        "title (role)"."""
        assert self.knowledge is not None
        crew = list(await self.knowledge.titles(agent_key=None))
        titles = list(crew)
        for agent in self.crew.agents:
            own = [t for t in await self.knowledge.titles(agent_key=agent.key) if t not in crew]
            titles += [f"{t} ({agent.role})" for t in own]
        return titles
