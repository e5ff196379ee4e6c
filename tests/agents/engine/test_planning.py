"""Plan-and-Act: plan, refine, execute in isolation, observe, decide, replan and answer."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from agents.engine.calls import BudgetExceeded
from agents.engine.events import RecordingSink
from agents.engine.llm import (
    DeltaCallback,
    FormUnsupportedError,
    LLMError,
    LLMRequest,
    LLMResponse,
    ScriptedGateway,
    ToolsUnsupportedError,
    tool_call_response,
)
from agents.engine.planning import (
    MAX_PARALLEL_STEPS,
    OBSERVATION_SCHEMA,
    PLAN_TOOL,
    PlanStep,
    is_full_answer,
    parse_observation,
    parse_plan_text,
    read_verdict,
    run_plan_and_act,
)
from agents.engine.prompts import PromptBook
from agents.engine.runtime import Cancelled, RunContext
from agents.engine.specs import AgentSpec, Budget, PlanningConfigSpec, TaskSpec, ToolRef
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task

LONG_ANSWER = (
    "Two plus three is five. I added the numbers, checked the result against the task and "
    "wrote it out in full so that the reader does not need anything else to understand it, "
    "which is what the expected output asks for."
)
Reply = LLMResponse | str | Exception | Callable[[LLMRequest], "LLMResponse | str"]


# --- scripting ------------------------------------------------------------------------------


def step(
    number: int, description: str, *, tool: str | None = None, depends_on: Sequence[int] = ()
) -> dict[str, Any]:
    return {
        "number": number,
        "description": description,
        "tool": tool,
        "depends_on": list(depends_on),
    }


def plan(*steps: dict[str, Any], ready: bool = True, text: str = "The plan") -> LLMResponse:
    """A native ``create_plan`` tool call, as a tool-capable planner answers."""
    return tool_call_response("create_plan", {"plan": text, "steps": list(steps), "ready": ready})


def review(**fields: Any) -> str:
    values = {
        "success": True,
        "learned": "",
        "plan_valid": True,
        "refinements": [],
        "needs_replan": False,
        "replan_reason": "",
        "goal_achieved": False,
    }
    values.update(fields)
    return json.dumps(values)


def _text(request: LLMRequest) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.messages)


class Brain:
    """Answers by purpose, and steps and reviews by step number, so parallel order cannot matter.

    ``plans`` serves agent_plan, refine and replan calls in order; ``steps[n]`` serves step n's
    turns in order; ``reviews[n]`` its review (default: success); a missing answer fails the test.
    """

    def __init__(
        self,
        *,
        plans: Sequence[Reply] = (),
        steps: dict[int, Reply | list[Reply]] | None = None,
        reviews: dict[int, Reply] | None = None,
        synthesis: Sequence[Reply] = (),
        react: Sequence[Reply] = (),
    ) -> None:
        self.plans = list(plans)
        self.steps = {n: v if isinstance(v, list) else [v] for n, v in (steps or {}).items()}
        self.reviews = dict(reviews or {})
        self.synthesis = list(synthesis)
        self.react = list(react)

    def __call__(self, request: LLMRequest) -> LLMResponse | str:
        purpose = request.purpose
        if purpose in ("agent_plan", "refine", "replan"):
            item = self._pop(self.plans, purpose)
        elif purpose == "step":
            number = _number(r"## Your current step\nStep (\d+):", request)
            item = self._pop(self.steps.get(number, []), f"step {number}")
        elif purpose == "observe":
            number = _number(r"## Step just executed\nStep (\d+):", request)
            item = self.reviews.pop(number, review())
        elif purpose == "synthesis":
            item = self._pop(self.synthesis, purpose)
        elif purpose == "react":
            item = self._pop(self.react, purpose)
        else:
            raise AssertionError(f"unexpected purpose {purpose}")
        if isinstance(item, Exception):
            raise item
        if callable(item) and not isinstance(item, LLMResponse):
            return item(request)
        return item

    @staticmethod
    def _pop(queue: list[Reply], what: str) -> Reply:
        if not queue:
            raise AssertionError(f"no scripted answer left for {what}")
        return queue.pop(0)


def _number(pattern: str, request: LLMRequest) -> int:
    match = re.search(pattern, _text(request))
    assert match, f"no step number in a {request.purpose} request"
    return int(match.group(1))


def flow(sink: RecordingSink) -> list[str]:
    """What Plan-and-Act itself reported: plan and step events, without LLM and tool noise."""
    return [t for t in sink.types if t.startswith(("agent_plan.", "step.", "budget."))]


def data(sink: RecordingSink, type_: str) -> list[dict[str, Any]]:
    return [e.data for e in sink.of_type(type_)]


def config(**kw: Any) -> PlanningConfigSpec:
    return PlanningConfigSpec(**kw)


async def run(
    ctx: RunContext,
    *,
    agent: AgentSpec | None = None,
    task: TaskSpec | None = None,
    **config_kw: Any,
) -> str:
    agent = agent or make_agent()
    cfg = config(**config_kw) if config_kw else agent.effective_planning or config()
    return await run_plan_and_act(ctx, agent, task or make_task(), cfg)


STEP_EVENTS = ["step.started", "step.completed", "step.observed"]


# --- planning -------------------------------------------------------------------------------


async def test_a_tool_call_plan_runs_its_steps_and_returns_a_full_last_answer() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"), step(2, "Explain the sum", depends_on=[1]))],
        steps={1: "Final Answer: 5", 2: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)
    agent = make_agent(planning=True)

    answer = await run(ctx, agent=agent)

    assert answer == LONG_ANSWER
    assert gateway.purposes() == ["agent_plan", "step", "step"]  # no review at low, no synthesis
    assert flow(sink) == ["agent_plan.started", "agent_plan.completed", *STEP_EVENTS, *STEP_EVENTS]
    plan_request = gateway.requests[0]
    assert plan_request.tools == [PLAN_TOOL]
    assert plan_request.tool_choice == {"type": "function", "function": {"name": "create_plan"}}
    assert data(sink, "agent_plan.started") == [{"attempt": 1}]
    assert data(sink, "agent_plan.completed") == [
        {
            "attempt": 1,
            "plan": "The plan",
            "ready": True,
            "steps": [
                {
                    "step_id": "task-1.s1",
                    "number": 1,
                    "description": "Add 2 and 3",
                    "tool": None,
                    "depends_on": [],
                },
                {
                    "step_id": "task-1.s2",
                    "number": 2,
                    "description": "Explain the sum",
                    "tool": None,
                    "depends_on": [1],
                },
            ],
        }
    ]
    started = sink.of_type("step.started")
    assert [(e.step_id, e.data["number"], e.data["description"]) for e in started] == [
        ("task-1.s1", 1, "Add 2 and 3"),
        ("task-1.s2", 2, "Explain the sum"),
    ]
    first_done = data(sink, "step.completed")[0]
    assert {k: first_done[k] for k in ("outcome", "result", "error")} == {
        "outcome": "completed",
        "result": "5",
        "error": None,
    }


async def test_planning_uses_the_planning_llm_and_steps_and_synthesis_use_the_agents() -> None:
    planner = make_llm(key="planner", model="test/planner")
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"))],
        steps={1: "Final Answer: 5"},
        synthesis=["The sum is 5."],
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    answer = await run(ctx, llm=planner)

    assert answer == "The sum is 5."
    assert [(r.purpose, r.llm.key) for r in gateway.requests] == [
        ("agent_plan", "planner"),
        ("step", "test-llm"),
        ("observe", "planner"),
        ("synthesis", "test-llm"),
    ]


async def test_the_system_prompt_is_used_verbatim_and_custom_plan_prompt_is_rendered() -> None:
    brain = Brain(plans=[plan(step(1, "Add"))], steps={1: "Final Answer: 5"}, synthesis=["5"])
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(
        ctx,
        reasoning_effort="low",
        system_prompt="Plan like {nobody}.",
        plan_prompt="As {role}, plan: {description} (max {max_steps}); literal {{x}}",
    )

    messages = gateway.requests[0].messages
    assert messages[0] == {"role": "system", "content": "Plan like {nobody}."}
    assert messages[1]["content"] == "As Researcher, plan: Add two numbers (max 20); literal {x}"


async def test_a_prose_plan_falls_back_to_react_with_the_plan_text_in_the_prompt() -> None:
    prose = "First look the numbers up, then add them together.\n\nREADY"
    brain = Brain(plans=[prose], react=["Final Answer: 5"])
    ctx, gateway, sink, _ = make_ctx(default=brain)
    agent = make_agent(llm=make_llm(supports_tools=False))

    answer = await run(ctx, agent=agent, reasoning_effort="low")

    assert answer == "5"
    assert gateway.purposes() == ["agent_plan", "react"]
    plan_request = gateway.requests[0]
    assert plan_request.tools is None
    assert '"depends_on"' in plan_request.messages[-1]["content"]  # asked for JSON in text
    assert f"Plan:\n{prose}" in _text(gateway.requests[1])
    assert data(sink, "agent_plan.completed")[0]["ready"] is True
    assert data(sink, "agent_plan.completed")[0]["steps"] == []
    assert not sink.of_type("step.started")


async def test_a_text_plan_in_fenced_json_with_prose_is_parsed() -> None:
    reply = (
        "Here is my plan.\n```json\n"
        '{"plan": "Add", "steps": [{"number": 1, "description": "Add 2 and 3", "tool": null, '
        '"depends_on": []},], "ready": true}\n```\nI am ready to execute it.'
    )
    brain = Brain(plans=[reply], steps={1: f"Final Answer: {LONG_ANSWER}"})
    ctx, gateway, _, _ = make_ctx(default=brain)
    agent = make_agent(llm=make_llm(supports_tools=False))

    assert await run(ctx, agent=agent, reasoning_effort="low") == LONG_ANSWER
    assert gateway.purposes() == ["agent_plan", "step"]


async def test_a_provider_refusing_tools_downgrades_planning_to_text() -> None:
    text_plan = '{"plan": "Add", "steps": ["Add 2 and 3"], "ready": true}'
    brain = Brain(
        plans=[ToolsUnsupportedError("tools are not supported"), text_plan],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="low") == LONG_ANSWER
    assert [r.tools is None for r in gateway.requests[:2]] == [False, True]


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("READY", True),
        ("I am ready to execute the task.", True),
        ("Ready: yes", True),
        ("NOT READY: I need the file", False),
        ("I'm not ready yet", False),
        ("This isn't ready.", False),
        ("not yet ready", False),
        ("NOT_READY", False),
        ("READY. Actually, NOT READY.", False),  # NOT READY wins
        ("Here are the steps.", None),
        ("It is already done", None),
    ],
)
def test_ready_and_not_ready_are_read_in_any_phrasing(text: str, verdict: bool | None) -> None:
    assert read_verdict(text) is verdict


def test_not_ready_prose_outweighs_a_ready_flag_in_the_json() -> None:
    draft = parse_plan_text('{"plan": "x", "steps": ["a"], "ready": true}\nNOT READY: missing data')

    assert draft.ready is False
    assert [s.description for s in draft.steps] == ["a"]


async def test_not_ready_plans_are_refined_up_to_max_attempts_then_fall_back() -> None:
    brain = Brain(
        plans=[
            plan(step(1, "Guess"), ready=False, text="draft 1"),
            plan(step(1, "Guess better"), ready=False, text="draft 2"),
            plan(step(1, "Guess best"), ready=False, text="draft 3"),
        ],
        react=["Final Answer: 5"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, max_attempts=3) == "5"

    assert gateway.purposes() == ["agent_plan", "refine", "refine", "react"]
    assert flow(sink) == [
        "agent_plan.started",
        "agent_plan.completed",
        "agent_plan.started",
        "agent_plan.completed",
        "agent_plan.started",
        "agent_plan.completed",
        "agent_plan.warning",
    ]
    assert [d["attempt"] for d in data(sink, "agent_plan.completed")] == [1, 2, 3]
    refine = gateway.requests[1].messages
    assert refine[2] == {"role": "assistant", "content": "draft 1\n\n1. Guess"}
    assert "Here is your previous plan:\n\ndraft 1\n\n1. Guess" in refine[3]["content"]
    # The last draft is not thrown away: the fallback sees it (ours).
    assert "Plan:\ndraft 3\n\n1. Guess best" in _text(gateway.requests[3])


async def test_max_attempts_none_stops_refining_at_ten() -> None:
    guesses = [plan(step(1, f"Guess {n}"), ready=False) for n in range(10)]
    brain = Brain(plans=guesses, react=["Final Answer: 5"])
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(ctx)

    assert gateway.purposes() == ["agent_plan"] + ["refine"] * 9 + ["react"]


async def test_refining_stops_when_a_refinement_returns_the_same_plan() -> None:
    brain = Brain(plans=[plan(step(1, "Guess"), ready=False)] * 10, react=["Final Answer: 5"])
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx) == "5"

    assert gateway.purposes() == ["agent_plan", "refine", "react"]
    warnings = [w["message"] for w in data(sink, "agent_plan.warning")]
    assert "refining stopped: the planner returned the same plan again" in warnings


def refusing_json_schema(answer: str) -> Any:
    """A reply as llama-cpp-python's server gives it: a json_schema response format is refused."""

    def reply(request: LLMRequest) -> str:
        if request.response_schema is not None and request.response_form == "json_schema":
            raise FormUnsupportedError("Input should be 'text' or 'json_object'", form="json_schema")
        return answer

    return reply


async def test_a_review_refused_as_json_schema_is_asked_again_in_json_mode() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"))],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
        reviews={1: refusing_json_schema(review())},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="medium") == LONG_ANSWER

    observe = [r for r in gateway.requests if r.purpose == "observe"]
    assert [r.response_form for r in observe] == ["json_schema", "json_object"]
    seen = data(sink, "step.observed")[0]
    assert seen["reviewed"] and not seen["review_failed"] and seen["success"]


async def test_a_structured_answer_refused_as_json_schema_comes_in_json_mode_with_the_schema_in_words() -> None:
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}}
    brain = Brain(
        plans=[plan(step(1, "Add"))],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
        synthesis=[refusing_json_schema('{"sum": 5}')] * 2,
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    answer = await run(ctx, task=make_task(output_json_schema=schema), reasoning_effort="low")

    assert answer == '{"sum": 5}'
    last = gateway.requests[-1]
    assert (last.purpose, last.response_form, last.response_schema) == ("synthesis", "json_object", schema)
    assert 'matches this JSON schema:\n{"type": "object"' in _text(last)


async def test_a_prose_planner_is_not_asked_to_refine_more_than_once() -> None:
    musings = [f"Musing number {n} on how to do it; not ready yet." for n in range(10)]
    brain = Brain(plans=musings, react=["Final Answer: 5"])
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, llm=make_llm(supports_tools=False)) == "5"

    assert gateway.purposes() == ["agent_plan", "refine", "react"]
    warnings = [w["message"] for w in data(sink, "agent_plan.warning")]
    assert "refining stopped: the planner gave no steps twice in a row" in warnings


async def test_a_refined_plan_that_becomes_ready_is_executed() -> None:
    brain = Brain(
        plans=[plan(step(1, "Guess"), ready=False), plan(step(1, "Add 2 and 3"))],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="low", max_attempts=2) == LONG_ANSWER
    assert gateway.purposes() == ["agent_plan", "refine", "step"]


async def test_a_plan_without_steps_falls_back_to_react() -> None:
    brain = Brain(plans=[plan(text="Just answer it")], react=["Final Answer: 5"])
    ctx, gateway, _, _ = make_ctx(default=brain)

    assert await run(ctx) == "5"
    assert gateway.purposes() == ["agent_plan", "react"]
    assert "Plan:\nJust answer it" in _text(gateway.requests[1])


async def test_a_planner_error_fails_planning_and_the_task_runs_without_a_plan() -> None:
    brain = Brain(plans=[LLMError("the provider said no")], react=["Final Answer: 5"])
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx) == "5"
    assert flow(sink) == ["agent_plan.started", "agent_plan.failed"]
    assert "the provider said no" in data(sink, "agent_plan.failed")[0]["error"]
    assert "Plan:" not in _text(gateway.requests[1])


async def test_an_unknown_placeholder_in_an_edited_template_fails_planning_but_not_the_task() -> (
    None
):
    prompts = PromptBook({"agent_plan": "Plan {description} by {deadline}"})
    ctx, gateway, sink, _ = make_ctx(default=Brain(react=["Final Answer: 5"]), prompts=prompts)

    assert await run(ctx) == "5"

    assert gateway.purposes() == ["react"]
    assert flow(sink) == ["agent_plan.failed"]
    assert "{deadline}" in data(sink, "agent_plan.failed")[0]["error"]


async def test_an_unknown_placeholder_in_a_config_prompt_is_caught_at_run_time() -> None:
    # Saved before validation existed (or built without it): the run must still not crash.
    cfg = PlanningConfigSpec.model_construct(plan_prompt="Plan {description} for {audience}")
    ctx, gateway, sink, _ = make_ctx(default=Brain(react=["Final Answer: 5"]))

    assert await run_plan_and_act(ctx, make_agent(), make_task(), cfg) == "5"
    assert gateway.purposes() == ["react"]
    assert "{audience}" in data(sink, "agent_plan.failed")[0]["error"]


async def test_an_unknown_placeholder_in_the_refine_prompt_keeps_the_first_plan_text() -> None:
    cfg = PlanningConfigSpec.model_construct(refine_prompt="Refine {current_plan} by {when}")
    brain = Brain(
        plans=[plan(step(1, "Guess"), ready=False, text="draft")], react=["Final Answer: 5"]
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run_plan_and_act(ctx, make_agent(), make_task(), cfg) == "5"
    assert gateway.purposes() == ["agent_plan", "react"]
    assert "{when}" in data(sink, "agent_plan.failed")[0]["error"]
    assert "Plan:\ndraft\n\n1. Guess" in _text(gateway.requests[1])


async def test_max_steps_is_enforced_with_a_warning() -> None:
    steps = [step(n, f"Do part {n}") for n in range(1, 6)]
    brain = Brain(
        plans=[plan(*steps)],
        steps={1: "Final Answer: one", 2: "Final Answer: two", 3: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="low", max_steps=3)

    assert "only the first 3 (max_steps)" in data(sink, "agent_plan.warning")[0]["message"]
    assert [s["number"] for s in data(sink, "agent_plan.completed")[0]["steps"]] == [1, 2, 3]
    assert gateway.purposes().count("step") == 3


# --- dependencies and step context ------------------------------------------------------------


async def test_unknown_and_cyclic_dependencies_are_dropped_with_warnings() -> None:
    brain = Brain(
        plans=[
            plan(
                step(1, "One", depends_on=[7]),
                step(2, "Two", depends_on=[3]),
                step(3, "Three", depends_on=[2]),
            )
        ],
        steps={1: "Final Answer: 1", 2: "Final Answer: 2", 3: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="low")

    steps = data(sink, "agent_plan.completed")[0]["steps"]
    assert [s["depends_on"] for s in steps] == [[], [], [2]]
    warnings = [w["message"] for w in data(sink, "agent_plan.warning")]
    assert warnings == [
        "step 1 depends on unknown step 7: dropped",
        "step 2 depends on step 3, which does not come before it (a cycle or a forward "
        "reference): dropped",
    ]


async def test_a_failed_dependency_unblocks_its_dependent_which_sees_the_failure() -> None:
    brain = Brain(
        plans=[plan(step(1, "Fetch"), step(2, "Use it", depends_on=[1]))],
        steps={1: LLMError("fetch broke"), 2: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="low") == LONG_ANSWER

    outcomes = [(d["number"], d["outcome"], d["error"]) for d in data(sink, "step.completed")]
    assert outcomes == [(1, "failed", "fetch broke"), (2, "completed", None)]
    second = _text(gateway.requests[-1])
    assert "Step 1 (Fetch) — FAILED: fetch broke" in second


async def test_each_step_runs_in_a_fresh_conversation_with_its_dependencies_and_task_context() -> (
    None
):
    brain = Brain(
        plans=[
            plan(
                step(1, "Count apples"),
                step(2, "Count pears"),
                step(3, "Add them", depends_on=[1, 2]),
            )
        ],
        steps={1: "Final Answer: 4 apples", 2: "Final Answer: 3 pears", 3: "Final Answer: 7"},
        synthesis=["7 fruits."],
    )
    ctx, gateway, _, _ = make_ctx(default=brain)
    task = make_task("Count the fruit", context=("Task A said: the basket is on the left.",))

    await run(ctx, task=task, reasoning_effort="low")

    by_step = {
        _number(r"## Your current step\nStep (\d+):", r): r
        for r in gateway.requests
        if r.purpose == "step"
    }
    third = by_step[3]
    assert [m["role"] for m in third.messages] == [m["role"] for m in by_step[1].messages]
    assert not any(m["role"] == "assistant" for m in third.messages)
    text = _text(third)
    assert "Step 1 (Count apples):\n4 apples" in text
    assert "Step 2 (Count pears):\n3 pears" in text
    assert "Task A said: the basket is on the left." in text
    assert "Count the fruit" in text
    assert "You are Researcher." in text
    assert "Task A said" in _text(by_step[1])
    assert "3 pears" not in _text(by_step[1])


async def test_a_step_that_never_calls_its_planned_tool_fails() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3", tool="calculator"))],
        steps={1: "Final Answer: 5, in my head"},
        synthesis=["5"],
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low")

    done = data(sink, "step.completed")[0]
    assert done["outcome"] == "failed"
    assert done["error"] == "expected tool 'calculator' was not called for step 1"
    assert data(sink, "step.observed")[0]["success"] is False


async def test_a_step_that_calls_its_planned_tool_completes() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3", tool="Calculator"))],
        steps={1: [tool_call_response("calculator", {"expression": "2+3"}), "Final Answer: 5"]},
        synthesis=["5"],
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low")

    # The planner's spelling is matched to the agent's tool name.
    assert data(sink, "agent_plan.completed")[0]["steps"][0]["tool"] == "calculator"
    assert data(sink, "step.completed")[0]["outcome"] == "completed"


async def test_a_step_past_its_timeout_ends_timed_out() -> None:
    ctx, _, sink, clock = make_ctx()

    def slow_tool_turn(request: LLMRequest) -> LLMResponse:
        clock.advance(30)
        return tool_call_response("calculator", {"expression": "2+3"})

    ctx.llm.gateway.default = Brain(
        plans=[plan(step(1, "Add", tool="calculator"))],
        steps={1: [slow_tool_turn]},
        synthesis=["5"],
    )

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low", step_timeout=10)

    done = data(sink, "step.completed")[0]
    assert (done["outcome"], done["error"]) == ("timed_out", "step timed out after 10s")
    assert data(sink, "step.observed")[0]["success"] is False


async def test_a_step_out_of_iterations_ends_iteration_exhausted() -> None:
    turns: list[Reply] = [
        tool_call_response("calculator", {"expression": f"{n}+1"}) for n in range(2)
    ]
    brain = Brain(
        plans=[plan(step(1, "Add", tool="calculator"))], steps={1: turns}, synthesis=["2"]
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low", max_step_iterations=2)

    assert gateway.purposes().count("step") == 2  # no forced final answer inside a step
    done = data(sink, "step.completed")[0]
    assert done["outcome"] == "iteration_exhausted"
    assert "all 2 iterations" in done["error"]


# --- observation and decisions ------------------------------------------------------------------

FAILS = LLMError("step broke")


@pytest.mark.parametrize(
    ("effort", "observe_steps", "first_step", "first_review", "observe_calls", "replans"),
    [
        # low: the step's own outcome, never a replan of its own accord...
        ("low", None, FAILS, None, 0, 0),
        ("low", True, FAILS, review(success=False), 2, 0),
        # ...but with observe_steps=True a review that says a failed step needs a new plan
        # replans (seed 002)
        ("low", True, FAILS, review(success=False, needs_replan=True), 2, 1),
        # medium: replan only when the step failed and the review asks for it
        ("medium", None, "Final Answer: one", review(success=False, needs_replan=True), 2, 1),
        ("medium", None, "Final Answer: one", review(success=False), 2, 0),
        ("medium", None, "Final Answer: one", review(success=True, needs_replan=True), 2, 0),
        ("medium", False, FAILS, None, 0, 0),
        # high: any failure or a replan request replans
        ("high", None, "Final Answer: one", review(success=False), 2, 1),
        ("high", None, "Final Answer: one", review(success=True, needs_replan=True), 2, 1),
        ("high", False, FAILS, None, 0, 1),
        ("high", None, "Final Answer: one", review(success=True), 2, 0),
    ],
)
async def test_observation_and_decision_follow_the_effort_table(
    effort: str,
    observe_steps: bool | None,
    first_step: Reply,
    first_review: str | None,
    observe_calls: int,
    replans: int,
) -> None:
    brain = Brain(
        plans=[
            plan(step(1, "First"), step(2, "Second", depends_on=[1])),
            plan(step(1, "Retry differently")),
        ],
        steps={1: first_step, 2: "Final Answer: two", 3: "Final Answer: retried"},
        reviews={1: first_review} if first_review else {},
        synthesis=["done"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort=effort, observe_steps=observe_steps)

    purposes = gateway.purposes()
    assert purposes.count("observe") == observe_calls
    assert purposes.count("replan") == replans
    assert len(sink.of_type("agent_plan.replanned")) == replans
    executed = [d["number"] for d in data(sink, "step.started")]
    assert executed == ([1, 3] if replans else [1, 2])
    if replans:
        assert data(sink, "step.skipped") == [
            {"step_id": "task-1.s2", "number": 2, "reason": "replaced by a new plan"}
        ]


async def test_an_unparseable_review_counts_as_a_failure_with_the_raw_text() -> None:
    brain = Brain(
        plans=[plan(step(1, "First"), step(2, "Second", depends_on=[1]))],
        steps={1: "Final Answer: one", 2: "Final Answer: two"},
        reviews={1: "Looks fine to me!"},
        synthesis=["done"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="medium")

    observed = data(sink, "step.observed")[0]
    assert observed["success"] is False
    assert observed["plan_valid"] is False
    assert observed["needs_replan"] is False
    assert observed["learned"] == "Looks fine to me!"
    assert gateway.purposes().count("replan") == 0  # medium: no replan without the flag
    observe_request = next(r for r in gateway.requests if r.purpose == "observe")
    assert observe_request.response_schema == OBSERVATION_SCHEMA


async def test_a_review_call_error_assumes_success_and_says_so() -> None:
    brain = Brain(
        plans=[plan(step(1, "First"))],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
        reviews={1: LLMError("reviewer unavailable")},
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="high") == LONG_ANSWER

    observed = data(sink, "step.observed")[0]
    assert observed["success"] is True
    assert observed["review_failed"] is True
    assert observed["learned"] == "review failed: reviewer unavailable"
    assert not sink.of_type("agent_plan.replanned")


def test_reviews_are_read_from_fenced_json_and_upstream_field_names() -> None:
    seen = parse_observation(
        'Sure:\n```json\n{"step_completed_successfully": false, "key_information_learned": "x", '
        '"needs_full_replan": true, "suggested_refinements": {"step_number": 3, '
        '"new_description": "y"}}\n```'
    )

    assert seen is not None
    assert (seen.success, seen.learned, seen.needs_replan) == (False, "x", True)
    assert seen.refinements == [{"number": 3, "text": "y"}]
    assert parse_observation('{"learned": "no verdict"}') is None


async def test_the_replan_cap_finishes_with_what_exists() -> None:
    brain = Brain(
        plans=[
            plan(step(1, "First"), step(2, "Second", depends_on=[1])),
            plan(step(1, "Again")),
        ],
        steps={1: FAILS, 3: FAILS},
        synthesis=["partial"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="high", observe_steps=False, max_replans=1) == "partial"

    assert gateway.purposes() == ["agent_plan", "step", "replan", "step", "synthesis"]
    assert [d["count"] for d in data(sink, "agent_plan.replanned")] == [1]
    assert "max_replans (1) is reached" in data(sink, "agent_plan.warning")[-1]["message"]


async def test_max_replans_zero_never_replans() -> None:
    brain = Brain(
        plans=[plan(step(1, "First"), step(2, "Second", depends_on=[1]))],
        steps={1: FAILS},
        synthesis=["partial"],
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="high", observe_steps=False, max_replans=0)

    assert gateway.purposes() == ["agent_plan", "step", "synthesis"]
    assert data(sink, "step.skipped") == [
        {"step_id": "task-1.s2", "number": 2, "reason": "max_replans reached"}
    ]


async def test_replanned_steps_get_new_numbers_and_ids_after_the_highest_used() -> None:
    brain = Brain(
        plans=[
            plan(step(1, "Fetch"), step(2, "Summarise", depends_on=[1])),
            # The new plan restarts at 1, as upstream's planner does: nothing may collide.
            plan(step(1, "Fetch from the mirror"), step(2, "Summarise it", depends_on=[1])),
        ],
        steps={
            1: "Final Answer: nothing",
            3: "Final Answer: data",
            4: f"Final Answer: {LONG_ANSWER}",
        },
        reviews={
            1: review(success=False, needs_replan=True, replan_reason="the main site is down")
        },
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="medium") == LONG_ANSWER

    assert data(sink, "agent_plan.replanned") == [
        {
            "reason": "the main site is down",
            "count": 1,
            "kept_steps": 0,
            "kept_step_ids": ["task-1.s1"],
        }
    ]
    replanned = data(sink, "agent_plan.completed")[1]
    assert replanned["replan"] == 1
    assert [(s["step_id"], s["number"], s["depends_on"]) for s in replanned["steps"]] == [
        ("task-1.s3", 3, []),
        ("task-1.s4", 4, [3]),
    ]
    ids = [e.step_id for e in sink.of_type("step.started")]
    assert ids == ["task-1.s1", "task-1.s3", "task-1.s4"]
    assert len(set(ids)) == len(ids)
    replan_request = next(r for r in gateway.requests if r.purpose == "replan")
    assert "the main site is down" in _text(replan_request)
    assert "Step 1 (Fetch) [failed:" in _text(replan_request)
    last_step = [r for r in gateway.requests if r.purpose == "step"][-1]
    assert "Step 3 (Fetch from the mirror):\ndata" in _text(last_step)


async def test_the_goal_achieved_early_at_high_effort_skips_the_rest() -> None:
    brain = Brain(
        plans=[
            plan(
                step(1, "Answer"),
                step(2, "Polish", depends_on=[1]),
                step(3, "Check", depends_on=[2]),
            )
        ],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
        reviews={1: review(goal_achieved=True)},
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="high") == LONG_ANSWER

    assert gateway.purposes() == ["agent_plan", "step", "observe"]
    assert flow(sink) == [
        "agent_plan.started",
        "agent_plan.completed",
        *STEP_EVENTS,
        "agent_plan.goal_achieved",
        "step.skipped",
        "step.skipped",
    ]
    assert data(sink, "agent_plan.goal_achieved") == [{"steps_done": 1, "steps_left": 2}]
    assert {d["reason"] for d in data(sink, "step.skipped")} == {"the goal was already achieved"}


async def test_goal_achieved_is_ignored_at_medium_effort() -> None:
    brain = Brain(
        plans=[plan(step(1, "Answer"), step(2, "Polish", depends_on=[1]))],
        steps={1: "Final Answer: one", 2: f"Final Answer: {LONG_ANSWER}"},
        reviews={1: review(goal_achieved=True)},
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="medium")

    assert gateway.purposes().count("step") == 2


async def test_refinements_rewrite_only_pending_steps_without_an_llm_call() -> None:
    brain = Brain(
        plans=[
            plan(
                step(1, "Draft"),
                step(2, "Edit", depends_on=[1]),
                step(3, "Publish", depends_on=[2]),
            )
        ],
        steps={
            1: "Final Answer: draft",
            2: "Final Answer: edited",
            3: f"Final Answer: {LONG_ANSWER}",
        },
        reviews={
            1: review(
                refinements=[
                    {"number": 1, "text": "Rewrite history"},
                    {"number": 3, "text": "Publish as PDF"},
                ]
            )
        },
    )
    ctx, gateway, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="high")

    assert gateway.purposes() == [
        "agent_plan",
        "step",
        "observe",
        "step",
        "observe",
        "step",
        "observe",
    ]
    assert data(sink, "agent_plan.refined") == [
        {
            "refinements": [{"step_id": "task-1.s3", "number": 3, "text": "Publish as PDF"}],
            "after_step": 1,
        }
    ]
    assert [d["description"] for d in data(sink, "step.started")] == [
        "Draft",
        "Edit",
        "Publish as PDF",
    ]
    assert flow(sink).index("agent_plan.refined") == flow(sink).index("step.observed") + 1


async def test_refinements_are_ignored_below_high_effort() -> None:
    brain = Brain(
        plans=[plan(step(1, "Draft"), step(2, "Publish", depends_on=[1]))],
        steps={1: "Final Answer: draft", 2: f"Final Answer: {LONG_ANSWER}"},
        reviews={1: review(refinements=[{"number": 2, "text": "Publish as PDF"}])},
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="medium")

    assert not sink.of_type("agent_plan.refined")
    assert data(sink, "step.started")[1]["description"] == "Publish"


# --- the answer -------------------------------------------------------------------------------


async def test_a_short_last_result_is_synthesised_from_all_step_results() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"), step(2, "Double it", depends_on=[1]))],
        steps={1: "Final Answer: 5", 2: "Final Answer: 10"},
        synthesis=["The answer is 10."],
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="low") == "The answer is 10."

    request = gateway.requests[-1]
    assert request.purpose == "synthesis"
    assert request.response_schema is None
    assert "Step 1 (Add 2 and 3):\n5\n\nStep 2 (Double it):\n10" in _text(request)


async def test_a_structured_output_is_always_produced_by_synthesis() -> None:
    schema = {"type": "object", "properties": {"sum": {"type": "integer"}}}
    brain = Brain(
        plans=[plan(step(1, "Add"))],
        steps={1: f"Final Answer: {LONG_ANSWER}"},
        synthesis=['{"sum": 5}'],
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    assert (
        await run(ctx, task=make_task(output_json_schema=schema), reasoning_effort="low")
        == '{"sum": 5}'
    )
    assert gateway.requests[-1].response_schema == schema


async def test_a_failed_synthesis_returns_the_step_results() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add"))], steps={1: "Final Answer: 5"}, synthesis=[LLMError("nope")]
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    assert await run(ctx, reasoning_effort="low") == "Step 1 (Add):\n5"
    assert "synthesis failed" in data(sink, "agent_plan.warning")[0]["message"]


@pytest.mark.parametrize(
    ("result", "tool", "error", "full"),
    [
        (LONG_ANSWER, None, None, True),
        ("word " * 29 + "end.", None, None, True),  # 30 words
        ("Short but done.", None, None, False),
        (LONG_ANSWER.rstrip("."), None, None, False),  # no closing punctuation
        (LONG_ANSWER + ")", None, None, True),
        ("Error: " + LONG_ANSWER, None, None, False),
        (LONG_ANSWER, "calculator", None, False),
        (LONG_ANSWER, None, "expected tool", False),
    ],
)
def test_the_skip_synthesis_rule(
    result: str, tool: str | None, error: str | None, full: bool
) -> None:
    candidate = PlanStep(
        id="t.s1", number=1, description="x", tool=tool, result=result, error=error
    )

    assert is_full_answer(candidate) is full


# --- parallel steps -----------------------------------------------------------------------------


class SlowGateway(ScriptedGateway):
    """Holds each step call for a few loop turns and records how many run at once."""

    def __init__(self, brain: Brain) -> None:
        super().__init__(default=brain)
        self.running = 0
        self.peak = 0

    async def complete(
        self, request: LLMRequest, *, on_delta: DeltaCallback | None = None
    ) -> LLMResponse:
        if request.purpose != "step":
            return await super().complete(request, on_delta=on_delta)
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            for _ in range(5):
                await asyncio.sleep(0)
            return await super().complete(request, on_delta=on_delta)
        finally:
            self.running -= 1


async def test_independent_steps_run_in_parallel_at_most_four_at_a_time() -> None:
    count = 7
    brain = Brain(
        plans=[plan(*(step(n, f"Part {n}") for n in range(1, count + 1)))],
        steps={n: f"Final Answer: part {n}" for n in range(1, count + 1)},
        synthesis=["all parts"],
    )
    ctx, _, sink, _ = make_ctx()
    gateway = SlowGateway(brain)
    ctx.llm.gateway = gateway

    assert await run(ctx, reasoning_effort="low") == "all parts"

    assert gateway.peak == MAX_PARALLEL_STEPS
    for n in range(1, count + 1):
        mine = [
            e.type
            for e in sink.events
            if e.step_id == f"task-1.s{n}" and e.type.startswith("step.")
        ]
        assert mine == STEP_EVENTS
    assert sink.types.count("step.completed") == count


async def test_a_step_whose_tool_has_a_usage_cap_runs_alone() -> None:
    brain = Brain(
        plans=[plan(step(1, "Calculate", tool="calculator"), step(2, "Write"), step(3, "Read"))],
        steps={
            1: [tool_call_response("calculator", {"expression": "1+1"}), "Final Answer: 2"],
            2: "Final Answer: written",
            3: "Final Answer: read",
        },
        synthesis=["ok"],
    )
    ctx, _, sink, _ = make_ctx()
    gateway = SlowGateway(brain)
    ctx.llm.gateway = gateway
    agent = make_agent(ToolRef(name="calculator", max_usage=3))

    await run(ctx, agent=agent, reasoning_effort="low")

    # Step 1 shares its cap with nobody; steps 2 and 3 then run side by side.
    assert [(e.type, e.step_id) for e in sink.events if e.type.startswith("step.")][:3] == [
        ("step.started", "task-1.s1"),
        ("step.completed", "task-1.s1"),
        ("step.observed", "task-1.s1"),
    ]
    assert gateway.peak == 2


# --- limits -----------------------------------------------------------------------------------


async def test_cancelling_during_a_step_stops_every_later_llm_call() -> None:
    ctx, gateway, sink, _ = make_ctx()

    def cancel_then_answer(request: LLMRequest) -> str:
        ctx.cancel.cancel("user stopped the run")
        return "Final Answer: one"

    gateway.default = Brain(
        plans=[plan(step(1, "First"), step(2, "Second", depends_on=[1]))],
        steps={1: cancel_then_answer, 2: "Final Answer: two"},
    )

    with pytest.raises(Cancelled):
        await run(ctx, reasoning_effort="high")

    assert gateway.purposes() == ["agent_plan", "step"]
    assert data(sink, "step.skipped") == [
        {"step_id": "task-1.s2", "number": 2, "reason": "cancelled"}
    ]


async def test_an_exceeded_budget_stops_the_plan_and_reports_it() -> None:
    brain = Brain(
        plans=[plan(step(1, "First"), step(2, "Second", depends_on=[1]))],
        steps={
            1: LLMResponse(content="Final Answer: one", prompt_tokens=10_000),
            2: "Final Answer: two",
        },
    )
    ctx, gateway, sink, _ = make_ctx(default=brain, budget=Budget(max_tokens=5_000))

    with pytest.raises(BudgetExceeded):
        await run(ctx, reasoning_effort="low")

    assert gateway.purposes() == ["agent_plan", "step"]
    assert flow(sink)[-2:] == ["budget.exceeded", "step.skipped"]



async def test_a_step_stuck_on_one_reply_fails_with_the_loops_plain_reason() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3", tool="calculator"))],
        steps={1: [tool_call_response("calculator", {"expression": "2 + 3"})] * 5},
        synthesis=["5"],
    )
    ctx, _, sink, _ = make_ctx(default=brain)

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low")

    done = data(sink, "step.completed")[0]
    assert done["outcome"] == "failed"
    assert "the model did not follow the answer format" in done["error"]
