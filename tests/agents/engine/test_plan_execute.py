"""The plan-execute agent type: plan a JSON step list, run each step, aggregate the outputs."""

from __future__ import annotations

import pytest

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.events import RecordingSink
from agents.engine.llm import LLMRequest, LLMResponse, tool_call_response
from agents.engine.plan_execute import PlanExecuteError, parse_plan_array, run_plan_execute
from agents.engine.prompts import PromptBook
from agents.engine.runtime import Cancelled, Usage
from agents.engine.specs import Budget
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task

PLAN = (
    "Sure! Here is the plan, as noted in [1]:\n```json\n"
    '[{"step": 1, "action": "Find the top markets"}, {"step": 2, "action": "Write the overview"}]\n'
    "```\nLet me know."
)


def flow(sink: RecordingSink) -> list[str]:
    return [t for t in sink.types if t.startswith(("agent_plan.", "step.", "budget."))]


def text_of(request: LLMRequest) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.messages)


async def test_plan_execute_plans_runs_each_step_with_the_log_and_aggregates() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [PLAN, "Final Answer: Germany, France", "Final Answer: A 600-word overview.", "Merged."]
    )
    agent = make_agent(max_iter=4)

    answer = await run_plan_execute(ctx, agent, make_task("Draft an EV charging overview"))

    assert answer == "Merged."
    assert gateway.purposes() == ["agent_plan", "step", "step", "aggregate"]
    assert flow(sink) == [
        "agent_plan.started",
        "agent_plan.completed",
        "step.started",
        "step.completed",
        "step.started",
        "step.completed",
    ]
    # Phase 1: the agent's own system prompt with the plan instruction appended, the task as user.
    plan_system, plan_user = gateway.requests[0].messages
    book = PromptBook()
    assert plan_system["role"] == "system"
    assert plan_system["content"].startswith("You are Researcher.")
    assert plan_system["content"].endswith(book.render("plan_execute_plan"))
    assert "Draft an EV charging overview" in plan_user["content"]
    # Phase 2: the task, then "Execute step N: action" plus the accumulated log, in a fresh
    # conversation.
    first, second = gateway.requests[1], gateway.requests[2]
    assert first.messages[-1]["content"].endswith(
        "Execute step 1: Find the top markets\n\nContext:\n(none)"
    )
    assert second.messages[-1]["content"].endswith(
        "Execute step 2: Write the overview\n\nContext:\nStep 1 (Find the top markets):\n"
        "Germany, France"
    )
    assert [m["role"] for m in second.messages] == ["system", "user"]
    started = [
        (e.step_id, e.data["number"], e.data["description"]) for e in sink.of_type("step.started")
    ]
    assert started == [
        ("task-1.s1", 1, "Find the top markets"),
        ("task-1.s2", 2, "Write the overview"),
    ]
    assert [e.data["outcome"] for e in sink.of_type("step.completed")] == ["completed", "completed"]
    # Phase 3: one merge of every step's output, keeping artefacts verbatim.
    assert [m["role"] for m in gateway.requests[3].messages] == ["user"]
    aggregate = text_of(gateway.requests[3])
    assert "verbatim" in aggregate
    assert "Step 1 (Find the top markets):\nGermany, France" in aggregate
    assert "Step 2 (Write the overview):\nA 600-word overview." in aggregate


async def test_each_step_sees_the_persona_the_task_its_expected_output_and_its_context() -> None:
    ctx, gateway, _, _ = make_ctx(
        [PLAN, "Final Answer: Germany, France", "Final Answer: An overview.", "Merged."]
    )
    task = make_task(
        "Draft an EV charging overview",
        expected_output="A 600-word overview for investors",
        context=("The research task found: chargers grew 40% in 2024.",),
    )

    await run_plan_execute(ctx, make_agent(max_iter=4), task)

    steps = [r for r in gateway.requests if r.purpose == "step"]
    assert len(steps) == 2
    for request in steps:
        text = text_of(request)
        assert "You are Researcher." in text
        assert "Draft an EV charging overview" in text
        assert "A 600-word overview for investors" in text
        assert "The research task found: chargers grew 40% in 2024." in text
        # The step knows it is one part of a larger plan, and does only that part.
        assert "Do only the step below" in text


def test_the_first_step_array_is_taken_from_fenced_prose() -> None:
    steps = parse_plan_array(PLAN, task_key="t")

    assert [(s.id, s.number, s.action) for s in steps] == [
        ("t.s1", 1, "Find the top markets"),
        ("t.s2", 2, "Write the overview"),
    ]


def test_a_plan_cut_off_mid_array_is_mended_by_json_repair() -> None:
    steps = parse_plan_array('```json\n[{"step": 1, "action": "Find"\n```', task_key="t")

    assert [s.action for s in steps] == ["Find"]


def test_plain_strings_and_trailing_commas_are_tolerated() -> None:
    steps = parse_plan_array('Plan: ["Look up", "Write it up",]', task_key="t")

    assert [s.action for s in steps] == ["Look up", "Write it up"]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("I would rather not plan.", "plan-execute: failed to parse plan"),
        ('```json\n[{"step": 1\n```', "plan-execute: failed to parse plan"),
        ('[{"step": 1}]', "plan-execute: failed to parse plan"),
        ("Nothing to do: []", "plan-execute: planner returned empty plan"),
    ],
)
async def test_an_unreadable_or_empty_plan_fails_the_agent_clearly(
    reply: str, message: str
) -> None:
    ctx, gateway, sink, _ = make_ctx([reply])

    with pytest.raises(PlanExecuteError) as info:
        await run_plan_execute(ctx, make_agent(), make_task())

    assert str(info.value).startswith(message)
    assert gateway.purposes() == ["agent_plan"]
    assert flow(sink) == ["agent_plan.started", "agent_plan.failed"]
    assert sink.of_type("agent_plan.failed")[0].data["error"] == str(info.value)


async def test_a_step_out_of_iterations_fails_the_agent_and_skips_the_rest() -> None:
    looping = [tool_call_response("calculator", {"expression": f"{n}+1"}) for n in range(2)]
    ctx, gateway, sink, _ = make_ctx([PLAN, *looping])
    agent = make_agent("calculator", max_iter=2)

    with pytest.raises(PlanExecuteError) as info:
        await run_plan_execute(ctx, agent, make_task())

    assert str(info.value) == (
        "plan-execute: step 1 failed: the step used all 2 iterations without a final answer"
    )
    assert gateway.purposes() == ["agent_plan", "step", "step"]  # no forced answer, no aggregate
    assert flow(sink) == [
        "agent_plan.started",
        "agent_plan.completed",
        "step.started",
        "step.completed",
        "step.skipped",
    ]
    assert sink.of_type("step.completed")[0].data["outcome"] == "iteration_exhausted"


async def test_a_step_llm_error_fails_the_agent() -> None:
    from agents.engine.llm import LLMError

    ctx, gateway, sink, _ = make_ctx([PLAN, LLMError("provider refused")])

    with pytest.raises(PlanExecuteError, match="plan-execute: step 1 failed: provider refused"):
        await run_plan_execute(ctx, make_agent(), make_task())

    assert gateway.purposes() == ["agent_plan", "step"]
    assert sink.of_type("step.completed")[0].data["outcome"] == "failed"


async def test_steps_may_use_tools_and_the_aggregate_keeps_a_structured_output() -> None:
    schema = {"type": "object", "properties": {"total": {"type": "integer"}}}
    ctx, gateway, sink, _ = make_ctx(
        [
            '[{"step": 1, "action": "Add 2 and 3"}]',
            tool_call_response("calculator", {"expression": "2+3"}),
            "The total is 5.",
            '{"total": 5}',
        ]
    )

    answer = await run_plan_execute(
        ctx, make_agent("calculator"), make_task(output_json_schema=schema)
    )

    assert answer == '{"total": 5}'
    assert gateway.requests[-1].response_schema == schema
    assert "tool.completed" in sink.types


async def test_the_tool_call_budget_applies_across_steps_and_stops_with_budget_exceeded() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [
            PLAN,
            tool_call_response("calculator", {"expression": "1+1"}),
            "Final Answer: two",
            tool_call_response("calculator", {"expression": "2+2"}),
        ]
    )
    scope = BudgetScope(Budget(max_tool_calls=1), Usage(), "agent")

    with pytest.raises(BudgetExceeded) as info:
        await run_plan_execute(ctx, make_agent("calculator"), make_task(), scope=scope)

    assert info.value.limit == "max_tool_calls"
    assert gateway.purposes() == ["agent_plan", "step", "step", "step"]
    # Step 2 was stopped midway by the budget: it ends skipped, not silently.
    assert flow(sink)[-2:] == ["budget.exceeded", "step.skipped"]
    assert sink.of_type("budget.exceeded")[0].data["limit"] == "max_tool_calls"


async def test_the_input_token_budget_covers_the_aggregate_phase() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [
            LLMResponse(content='[{"step": 1, "action": "Find"}]', prompt_tokens=100),
            LLMResponse(content="Final Answer: found", prompt_tokens=1000),
        ]
    )
    agent = make_agent(budget=Budget(max_input_tokens=1050))

    # No scope from a caller: the agent's own budget still applies.
    with pytest.raises(BudgetExceeded) as info:
        await run_plan_execute(ctx, agent, make_task())

    assert info.value.limit == "max_input_tokens"
    assert gateway.purposes() == ["agent_plan", "step"]
    assert flow(sink)[-1] == "budget.exceeded"


async def test_cancelling_during_a_step_sends_nothing_more() -> None:
    ctx, gateway, sink, _ = make_ctx()

    def cancel_then_answer(request: LLMRequest) -> str:
        ctx.cancel.cancel("stop")
        return "Final Answer: found"

    gateway.script = [PLAN, cancel_then_answer]

    with pytest.raises(Cancelled):
        await run_plan_execute(ctx, make_agent(), make_task())

    assert gateway.purposes() == ["agent_plan", "step"]
    assert flow(sink)[2:] == ["step.started", "step.completed", "step.started", "step.skipped"]
    assert sink.of_type("step.skipped")[0].data == {
        "step_id": "task-1.s2",
        "number": 2,
        "reason": "cancelled",
    }


async def test_a_text_mode_agent_gets_the_tool_protocol_in_its_step_prompt() -> None:
    ctx, gateway, _, _ = make_ctx(
        ['[{"step": 1, "action": "Add"}]', "Thought: done\nFinal Answer: 5", "5"]
    )
    agent = make_agent("calculator", llm=make_llm(supports_tools=False))

    assert await run_plan_execute(ctx, agent, make_task()) == "5"
    assert "Action Input" in gateway.requests[1].messages[0]["content"]


@pytest.mark.parametrize("native", [False, True])
async def test_the_plan_call_names_the_agents_tools_without_the_react_format(native: bool) -> None:
    ctx, gateway, _, _ = make_ctx(
        ['[{"step": 1, "action": "Add with the calculator"}]', "Final Answer: 5", "5"]
    )
    agent = make_agent("calculator", llm=make_llm(supports_tools=native))

    await run_plan_execute(ctx, agent, make_task())

    plan_system = gateway.requests[0].messages[0]["content"]
    assert gateway.requests[0].purpose == "agent_plan"
    assert "- calculator:" in plan_system and '"expression"' in plan_system
    assert "Action Input" not in plan_system and "Final Answer" not in plan_system
