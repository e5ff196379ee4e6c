"""Running a crew: approved plans verbatim, context, resume, failures, async tasks, a manager."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents.engine.calls import BudgetExceeded
from agents.engine.llm import LLMError, LLMRequest, LLMResponse, ScriptedGateway, tool_call_response
from agents.engine.prompts import PromptBook
from agents.engine.runtime import Cancelled
from agents.engine.specs import Budget
from crews.engine.kickoff import run_crew
from tests.agents.engine.helpers import make_ctx, make_llm, non_llm_types
from tests.crews.engine.helpers import make_crew


def answer(text: str) -> str:
    return f"Thought: done\nFinal Answer: {text}"


def user_prompt(request: LLMRequest) -> str:
    return next(m["content"] for m in request.messages if m["role"] == "user")


async def test_tasks_run_in_order_each_approved_step_as_a_step_of_its_own() -> None:
    crew = make_crew(tasks=2).interpolated({"topic": "AI"})
    before = crew.model_dump()
    replies = [answer("news"), answer("ten bullets"), answer("outline"), answer("the report")]
    ctx, gateway, sink, _ = make_ctx(replies)
    plan = {"11": ["Search the news", "List ten facts"], "12": ["Outline", "Write"]}
    result = await run_crew(ctx, crew, plan=plan)
    assert result.output == "the report" and not result.failed
    # No planning call; a ReAct agent answers in its last step, as in its one loop before.
    assert gateway.purposes() == ["step", "step"] * 2
    prompts = [user_prompt(r) for r in gateway.requests]
    assert "## Your current step\nStep 1: Search the news" in prompts[0]
    assert "## Your current step\nStep 2: List ten facts" in prompts[1]
    assert "news" in prompts[1]  # the earlier step's result is carried
    assert "Plan for this task:\n1. Outline\n2. Write" in prompts[2]  # the whole plan as context
    assert "ten bullets" in prompts[2]  # context from task 1
    assert "final answer to the overall task" in prompts[1] and "final answer" not in prompts[0]
    assert crew.model_dump() == before  # nothing on the crew was changed
    assert non_llm_types(sink) == [
        "task.started", "agent_plan.bound", "step.started", "step.completed", "step.observed",
        "step.started", "step.completed", "step.observed", "task.completed",
    ] * 2
    assert [e.step_id for e in sink.of_type("step.started")] == ["11.p1", "11.p2", "12.p1", "12.p2"]


async def test_resuming_skips_finished_tasks_and_feeds_their_output_as_context() -> None:
    crew = make_crew(tasks=2).interpolated({"topic": "AI"})
    ctx, gateway, sink, _ = make_ctx([answer("the report")])
    result = await run_crew(ctx, crew, done={"11": "saved bullets"})
    assert gateway.calls == 1
    assert "saved bullets" in user_prompt(gateway.requests[0])
    assert result.tasks["11"].output == "saved bullets" and result.output == "the report"
    assert [e.task_id for e in sink.of_type("task.started")] == ["12"]


async def test_a_failed_task_stops_the_crew_and_skips_the_rest() -> None:
    crew = make_crew(tasks=3).interpolated({"topic": "AI"})
    ctx, gateway, sink, _ = make_ctx([LLMError("provider says no")] * 3)
    result = await run_crew(ctx, crew)
    assert result.failed and result.error.startswith("Research failed:")
    assert [result.tasks[k].status for k in ("11", "12", "13")] == ["failed", "skipped", "skipped"]
    assert non_llm_types(sink) == ["task.started", "task.failed", "task.skipped", "task.skipped"]


async def test_cancellation_and_budgets_propagate_to_the_caller() -> None:
    crew = make_crew().interpolated({"topic": "AI"})
    ctx, gateway, _sink, _ = make_ctx([answer("one")])
    ctx.cancel.cancel("stop")
    with pytest.raises(Cancelled):
        await run_crew(ctx, crew)
    assert gateway.calls == 0
    ctx, gateway, sink, _ = make_ctx([LLMResponse(content=answer("x"), prompt_tokens=990, completion_tokens=20)], budget=Budget(max_tokens=1000))
    with pytest.raises(BudgetExceeded):
        await run_crew(ctx, crew)
    assert gateway.calls == 1 and sink.types[-1] == "budget.exceeded"


class SlowGateway(ScriptedGateway):
    """Answers after a real delay and records how many calls were in flight at once."""

    def __init__(self) -> None:
        super().__init__(default=answer("ok"))
        self.active = 0
        self.peak = 0

    async def complete(self, request: LLMRequest, **kw: Any) -> LLMResponse:
        self.active += 1
        self.peak = max(self.peak, self.active)
        await asyncio.sleep(0.02)
        self.active -= 1
        return await super().complete(request, **kw)


async def test_async_tasks_run_alongside_and_the_next_dependent_task_waits_for_them() -> None:
    crew = make_crew(tasks=3)
    tasks = list(crew.tasks)
    tasks[0] = tasks[0].model_copy(update={"async_execution": True})
    tasks[1] = tasks[1].model_copy(update={"async_execution": True, "context_keys": ()})
    crew = crew.model_copy(update={"tasks": tuple(tasks)}).interpolated({"topic": "AI"})
    gateway = SlowGateway()
    ctx, _gw, _sink, _ = make_ctx(gateway=gateway)
    result = await run_crew(ctx, crew)
    assert not result.failed
    assert gateway.peak == 2  # tasks 1 and 2 in flight together, task 3 after both


async def test_a_hierarchical_manager_delegates_to_a_coworker() -> None:
    crew = make_crew(tasks=1, process="hierarchical", manager_llm=make_llm(key="boss", supports_tools=True))
    crew = crew.interpolated({"topic": "AI"})
    ctx, gateway, sink, _ = make_ctx([
        tool_call_response("delegate_work_to_coworker", {"task": "Research AI", "coworker": "AI Researcher"}),
        answer("bullets from the researcher"),
        answer("Checked: bullets from the researcher"),
    ])
    result = await run_crew(ctx, crew)
    assert result.output == "Checked: bullets from the researcher"
    assert sink.of_type("task.delegated")[0].data["coworker"] == "AI Researcher"
    assert "Research AI" in user_prompt(gateway.requests[1])
    assert sink.of_type("task.started")[0].data["agent"] == "Crew Manager"


async def test_a_crew_runs_end_to_end_on_the_offline_demo_model() -> None:
    from agents.engine.demo import DemoGateway
    from crews.engine.planner import draft_crew_plan

    demo = make_llm(key="demo", model="demo/offline")
    crew = make_crew(planning_llm=demo, agents=tuple(a.model_copy(update={"llm": demo}) for a in make_crew().agents))
    crew = crew.interpolated({"topic": "AI"})
    ctx, _gw, _sink, _ = make_ctx(gateway=DemoGateway())  # type: ignore[arg-type]
    draft = await draft_crew_plan(ctx, crew, llm=demo)
    result = await run_crew(ctx, crew, plan=draft.steps)
    assert not result.failed and "demo model" in result.output


async def test_the_managers_persona_and_delegation_tools_come_from_the_prompt_templates() -> None:
    book = PromptBook(
        {
            "manager_role": "Head of research",
            "manager_goal": "Ship a sound answer",
            "manager": "You lead these people:\n{agents}",
            "manager_delegate_tool": "Hand work to one of: {coworkers}.",
            "manager_ask_tool": "Ask one of: {coworkers}.",
        }
    )
    crew = make_crew(tasks=1, process="hierarchical", manager_llm=make_llm(key="boss", supports_tools=True))
    crew = crew.interpolated({"topic": "AI"})
    ctx, gateway, sink, _ = make_ctx([answer("done")], prompts=book)
    await run_crew(ctx, crew)
    request = gateway.requests[0]
    system = request.messages[0]["content"]
    assert "You are Head of research." in system and "Ship a sound answer" in system
    assert "You lead these people:\n- AI Researcher: Find facts on AI\n- Writer: Write reports" in system
    assert request.tools is not None
    descriptions = {t["function"]["name"]: t["function"]["description"] for t in request.tools}
    assert descriptions == {
        "delegate_work_to_coworker": "Hand work to one of: AI Researcher, Writer.",
        "ask_question_to_coworker": "Ask one of: AI Researcher, Writer.",
    }
    assert sink.of_type("task.started")[0].data["agent"] == "Head of research"
