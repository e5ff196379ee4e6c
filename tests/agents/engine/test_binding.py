"""An approved crew plan binds every agent kind (ENGINE.md §2b): no planning call, each approved
step a step of its own, and ``on_step_failure`` deciding how far an agent may depart from it."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agents.engine.agent import run_agent
from agents.engine.calls import BudgetExceeded
from agents.engine.llm import LLMError, LLMRequest, LLMResponse
from agents.engine.runtime import Cancelled
from agents.engine.specs import Budget, PlanningConfigSpec, TaskSpec
from tests.agents.engine.helpers import ScriptedHuman, make_agent, make_ctx
from tests.agents.engine.test_planning import LONG_ANSWER, Brain, plan, review, step

APPROVED = ("Read the tide tables", "Compare spring and neap tides", "Write the report")


def bound_task(*steps: str, policy: str = "continue", **kw: Any) -> TaskSpec:
    return TaskSpec.model_validate({
        "key": "7", "description": "Explain the tides", "expected_output": "A short report",
        "plan_steps": [{"id": f"7.p{10 + i}", "text": s} for i, s in enumerate(steps or APPROVED)],
        "on_step_failure": policy, **kw,
    })


def current_step(request: LLMRequest) -> str | None:
    text = "\n".join(str(m.get("content") or "") for m in request.messages)
    match = re.search(r"## Your current step\nStep \d+: (.+)", text)
    return match.group(1) if match else None


def flow(sink: Any) -> list[tuple[str, str | None]]:
    return [(e.type, e.step_id) for e in sink.events if e.type.startswith(("step.", "agent_plan.", "crew_plan."))]


KINDS = {
    "react": {},
    "plan_and_act": {"planning_config": PlanningConfigSpec(reasoning_effort="medium")},
    "planning_shortcut": {"planning": True},
    "plan_execute": {"agent_type": "plan_execute"},
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_no_agent_plans_over_the_approved_steps_each_runs_as_its_own_step(kind: str) -> None:
    brain = Brain(steps={1: "Final Answer: tables read", 2: "Final Answer: compared", 3: f"Final Answer: {LONG_ANSWER}"})
    ctx, gateway, sink, _ = make_ctx(default=brain)

    result = await run_agent(ctx, make_agent(**KINDS[kind]), bound_task())

    assert result.output == LONG_ANSWER
    purposes = gateway.purposes()
    assert "agent_plan" not in purposes and "refine" not in purposes and "synthesis" not in purposes
    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == list(APPROVED)
    ids = ["7.p10", "7.p11", "7.p12"]
    events = [(t, s) for t, s in flow(sink) if t in ("step.started", "step.completed")]
    assert events == [(t, i) for i in ids for t in ("step.started", "step.completed")]
    # Every step sees the results of the steps before it.
    last = next(r for r in gateway.requests if current_step(r) == APPROVED[2])
    assert "tables read" in str(last.messages) and "compared" in str(last.messages)


async def test_a_react_agent_answers_in_its_last_step_without_a_synthesis_call() -> None:
    ctx, gateway, _, _ = make_ctx(["Final Answer: a", "Final Answer: b", "Final Answer: the report"])

    result = await run_agent(ctx, make_agent(), bound_task())

    assert result.output == "the report" and gateway.purposes() == ["step"] * 3
    assert "final answer to the overall task" in str(gateway.requests[2].messages)
    assert "final answer to the overall task" not in str(gateway.requests[0].messages)


async def test_continue_marks_the_failure_ignores_a_review_asking_to_replan_and_runs_every_step() -> None:
    brain = Brain(
        steps={1: LLMError("no tables"), 2: "Final Answer: compared", 3: "Final Answer: report"},
        reviews={2: review(success=True, needs_replan=True, goal_achieved=True,
                           refinements=[{"number": 3, "text": "Rewrite"}])},
        synthesis=["the report"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)
    agent = make_agent(planning_config=PlanningConfigSpec(reasoning_effort="high"))

    await run_agent(ctx, agent, bound_task(policy="continue"))

    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == list(APPROVED)
    outcomes = [e.data["outcome"] for e in sink.of_type("step.completed")]
    assert outcomes == ["failed", "completed", "completed"]
    assert "replan" not in gateway.purposes()
    assert not sink.of_type("crew_plan.deviated") and not sink.of_type("agent_plan.refined")


async def test_adapt_replans_after_a_failure_and_reports_the_deviation_before_and_after() -> None:
    brain = Brain(
        plans=[plan(step(1, "Estimate from the moon"), step(2, "Write it up", depends_on=[1]))],
        steps={1: LLMError("no tables"), 2: "Final Answer: estimated", 3: "Final Answer: written"},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)
    # The replanned steps are numbered after the approved ones: 4 and 5 (Brain keys by number).
    brain.steps = {1: [LLMError("no tables")], 4: ["Final Answer: estimated"], 5: [f"Final Answer: {LONG_ANSWER}"]}

    result = await run_agent(ctx, make_agent(), bound_task(policy="adapt"))

    assert result.output == LONG_ANSWER
    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == [
        "Read the tide tables", "Estimate from the moon", "Write it up",
    ]  # fmt: skip
    (deviated,) = [e.data for e in sink.of_type("crew_plan.deviated")]
    assert deviated["before"] == list(APPROVED[1:])
    assert deviated["after"] == ["Estimate from the moon", "Write it up"]
    assert "step 1" in deviated["reason"] and deviated["approved_by_person"] is False
    skipped = [e.step_id for e in sink.of_type("step.skipped")]
    assert skipped == ["7.p11", "7.p12"]
    # The new steps ran one after the other, the second seeing the first's result and step 1's.
    assert [e.step_id for e in sink.of_type("step.started") + sink.of_type("step.completed")] == [
        "7.p10", "7.s4", "7.s5", "7.p10", "7.s4", "7.s5"]
    order = [(e.type, e.step_id) for e in sink.events if e.type in ("step.started", "step.completed")]
    assert order.index(("step.completed", "7.s4")) < order.index(("step.started", "7.s5"))
    last = next(r for r in gateway.requests if current_step(r) == "Write it up")
    assert "estimated" in str(last.messages)
    # Later prompts show the plan as it stands, not the approved steps it replaced.
    assert "Estimate from the moon" in str(last.messages) and "Compare spring" not in str(last.messages)


async def test_adapt_takes_refinements_and_an_early_goal_as_deviations() -> None:
    brain = Brain(
        steps={1: "Final Answer: read", 2: "Final Answer: done early"},
        reviews={1: review(refinements=[{"number": 2, "text": "Compare only spring tides"}]),
                 2: review(goal_achieved=True)},
        synthesis=["the report"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)
    agent = make_agent(planning_config=PlanningConfigSpec(reasoning_effort="high"))

    await run_agent(ctx, agent, bound_task(policy="adapt"))

    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == [
        "Read the tide tables", "Compare only spring tides",
    ]  # fmt: skip
    refined, early = [e.data for e in sink.of_type("crew_plan.deviated")]
    assert (refined["before"], refined["after"]) == (list(APPROVED[1:]), ["Compare only spring tides", APPROVED[2]])
    assert (early["before"], early["after"]) == ([APPROVED[2]], [])


async def test_ask_hands_the_proposal_to_a_person_and_goes_on_with_what_they_approved() -> None:
    brain = Brain(
        plans=[plan(step(1, "The agent's idea"))],
        # The proposal's step is number 4 (never run), the person's is 5.
        steps={1: LLMError("no tables"), 5: f"Final Answer: {LONG_ANSWER}"},
    )
    human = ScriptedHuman(plan_changes=[["The person's fix"]])
    ctx, gateway, sink, _ = make_ctx(default=brain, human=human)

    result = await run_agent(ctx, make_agent(), bound_task(policy="ask"))

    assert result.output == LONG_ANSWER
    (asked,) = human.plan_change_requests
    # Step 1 failed: nothing completed is kept (a person may rewrite the failed step to run again).
    assert asked["proposed"] == ["The agent's idea"] and asked["done"] == [] and asked["task_key"] == "7"
    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == [
        "Read the tide tables", "The person's fix",
    ]  # fmt: skip
    (deviated,) = [e.data for e in sink.of_type("crew_plan.deviated")]
    assert deviated["after"] == ["The person's fix"] and deviated["approved_by_person"] is True
    assert [s["step_id"] for s in deviated["steps"]] == ["7.p101"] and deviated["version"] == 2
    assert sink.of_type("step.started")[-1].step_id == "7.p101"  # the approved step's own id
    # The agent's proposal never runs: its step ends skipped, not "to do" for good.
    skipped = {e.step_id: e.data["reason"] for e in sink.of_type("step.skipped")}
    assert skipped["7.s4"] == "not approved as proposed"


async def test_ask_respects_max_replans_and_then_goes_on_with_the_approved_steps() -> None:
    brain = Brain(steps={1: LLMError("x"), 2: LLMError("y"), 3: "Final Answer: z"}, synthesis=["the report"])
    human = ScriptedHuman()
    ctx, gateway, sink, _ = make_ctx(default=brain, human=human)
    agent = make_agent(planning_config=PlanningConfigSpec(reasoning_effort="low", max_replans=0))

    await run_agent(ctx, agent, bound_task(policy="ask"))

    assert human.plan_change_requests == []
    assert [current_step(r) for r in gateway.requests if r.purpose == "step"] == list(APPROVED)
    assert any("max_replans" in e.data["message"] for e in sink.of_type("agent_plan.warning"))


async def test_a_stop_mid_plan_skips_the_approved_steps_left() -> None:
    ctx, gateway, sink, _ = make_ctx()

    def first_then_stop(request: LLMRequest) -> LLMResponse:
        ctx.cancel.cancel("stop")
        return LLMResponse(content="Final Answer: a")

    gateway.default = first_then_stop
    with pytest.raises(Cancelled):
        await run_agent(ctx, make_agent(), bound_task())

    assert gateway.calls == 1
    assert [e.step_id for e in sink.of_type("step.skipped")] == ["7.p11", "7.p12"]


async def test_a_budget_stops_a_bound_plan_and_says_so() -> None:
    ctx, gateway, sink, _ = make_ctx(
        default=LLMResponse(content="Final Answer: a", prompt_tokens=990, completion_tokens=10),
        budget=Budget(max_tokens=1000),
    )
    with pytest.raises(BudgetExceeded):
        await run_agent(ctx, make_agent(), bound_task())
    assert gateway.calls == 1 and sink.of_type("budget.exceeded")
