"""The prompts the engine sends: what each one tells the model, and that it comes from a template."""

from __future__ import annotations

import inspect

import pytest

from agents.engine import plan_execute, planning, react
from agents.engine.llm import LLMError, LLMRequest
from agents.engine.plan_execute import run_plan_execute
from agents.engine.prompts import DEFAULTS, PromptBook, validate_template
from agents.engine.react import build_task_messages, run_react_loop
from crews.engine import kickoff, planner
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task
from tests.agents.engine.test_planning import LONG_ANSWER, Brain, _text, plan, run, step

TEXT_LLM = make_llm(supports_tools=False)


def requests_for(requests: list[LLMRequest], purpose: str) -> list[str]:
    return [_text(r) for r in requests if r.purpose == purpose]


# --- what the prompts say ---------------------------------------------------------------------


async def test_the_review_sees_the_success_criteria_the_steps_done_and_is_told_to_keep_the_plan() -> (
    None
):
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"), step(2, "Double it", depends_on=[1]))],
        steps={1: "Final Answer: 5", 2: f"Final Answer: {LONG_ANSWER}"},
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(
        ctx, task=make_task(expected_output="The doubled sum, explained"), reasoning_effort="medium"
    )

    first, second = requests_for(gateway.requests, "observe")
    assert "## Expected output\nThe doubled sum, explained" in second
    assert "## Steps done so far\nNone." in first
    assert "## Steps done so far\nStep 1 (Add 2 and 3):\n5" in second
    assert "## Step just executed\nStep 2: Double it\nOutcome: completed" in second
    # Conservative with replans: only when the rest of the plan can no longer reach the goal.
    assert "Be conservative" in second
    assert "can no longer reach the expected output" in second


async def test_a_step_prompt_says_it_is_one_step_whose_result_feeds_the_rest() -> None:
    brain = Brain(plans=[plan(step(1, "Add 2 and 3"))], steps={1: f"Final Answer: {LONG_ANSWER}"})
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="low")

    (text,) = requests_for(gateway.requests, "step")
    assert "This is one step of a larger plan" in text
    assert "Do only this step" in text
    assert "later steps and to the answer of the overall task" in text


async def test_synthesis_writes_the_answer_as_if_in_one_go_without_mentioning_steps() -> None:
    brain = Brain(
        plans=[plan(step(1, "Add 2 and 3"), step(2, "Double it", depends_on=[1]))],
        steps={1: "Final Answer: 5", 2: "Final Answer: 10"},
        synthesis=["Ten."],
    )
    ctx, gateway, _, _ = make_ctx(default=brain)

    await run(ctx, reasoning_effort="low")

    (text,) = requests_for(gateway.requests, "synthesis")
    assert "Do not mention the steps or the plan" in text
    assert "as if you had done the task in one go" in text


async def test_the_plan_execute_aggregate_does_not_list_the_steps() -> None:
    ctx, gateway, _, _ = make_ctx(['[{"step": 1, "action": "Add"}]', "Final Answer: 5", "5"])

    await run_plan_execute(ctx, make_agent(), make_task())

    (text,) = requests_for(gateway.requests, "aggregate")
    assert "Do not list the steps" in text


# --- every text from a template ---------------------------------------------------------------


def test_every_default_template_uses_only_the_placeholders_its_key_offers() -> None:
    for key, definition in DEFAULTS.items():
        validate_template(key, definition.text)


@pytest.mark.parametrize("module", [react, planning, plan_execute, planner, kickoff])
def test_the_engine_code_holds_no_prompt_text_of_its_own(module: object) -> None:
    source = inspect.getsource(module)  # type: ignore[arg-type]
    for phrase in (
        "Plan for this task",
        "context you're working with",
        "matches this JSON schema",
        "Use the tool:",
        "FAILED",
        "No step produced a result",
        "Execute step",
        "The only available tools are",
        "with exactly these arguments",
        "usage limit of",
        "Their note",
        "Not run: an earlier",
        "Receives the output of",
        "Note from the person reviewing",
        "these steps are fixed",
        "Tools: none",
        "Crew Manager",
        "Delegate a task to a coworker",
        "Unknown coworker",
    ):
        assert phrase not in source, f"{phrase!r} belongs in a prompt template"


def test_the_task_message_is_assembled_from_templates() -> None:
    book = PromptBook(
        {
            "task_plan": "{description}\n\nAPPROVED STEPS\n{steps}",
            "task_context": "EARLIER WORK\n{context}",
            "task_output_schema": "ANSWER AS {schema}",
        }
    )
    ctx, _, _, _ = make_ctx(prompts=book)
    task = make_task(
        plan_steps=("Look it up",), context=("A said x",), output_json_schema={"type": "object"}
    )

    _system, user = build_task_messages(ctx, make_agent(), task)

    content = str(user["content"])
    assert "Add two numbers\n\nAPPROVED STEPS\n1. Look it up" in content
    assert "EARLIER WORK\nA said x" in content
    assert 'ANSWER AS {"type": "object"}' in content


async def test_tool_observations_and_format_errors_come_from_templates() -> None:
    book = PromptBook(
        {
            "tool_unknown": "NO TOOL {name}; USE {tools}",
            "format_error_unreadable": "UNREADABLE",
        }
    )
    ctx, gateway, _, _ = make_ctx(
        ["I think it is 4.", "Action: web_search\nAction Input: {}", "Final Answer: 4"],
        prompts=book,
    )
    agent = make_agent("calculator", llm=TEXT_LLM)

    await run_react_loop(ctx, agent, build_task_messages(ctx, agent, make_task()), max_iter=5)

    second, third = gateway.requests[1], gateway.requests[2]
    assert "UNREADABLE" in str(second.messages[-1]["content"])
    assert third.messages[-1]["content"] == "Observation: NO TOOL web_search; USE calculator"


async def test_step_listings_and_results_come_from_templates() -> None:
    book = PromptBook(
        {
            "step_current": "NOW {number}) {description}",
            "step_dependency_failed": "BROKEN {number} {description} ({error}): {result}",
            "step_result": "R{number} {description} = {result}",
            "step_result_failed": "F{number} {description} ({error}) = {result}",
            "nothing": "NIL",
            "none": "ZERO",
            "no_result": "NORESULT",
        }
    )
    ctx, gateway, _, _ = make_ctx(
        [
            plan(step(1, "Fetch"), step(2, "Use it", depends_on=[1])),
            LLMError("fetch broke"),
            "Final Answer: 10",
            "Ten.",
        ],
        prompts=book,
    )

    assert await run(ctx, reasoning_effort="low") == "Ten."

    second_step = requests_for(gateway.requests, "step")[1]
    assert "NOW 2) Use it" in second_step
    assert "BROKEN 1 Fetch (fetch broke): NIL" in second_step
    assert "## Context from earlier tasks\nZERO" in second_step
    (synthesis,) = requests_for(gateway.requests, "synthesis")
    assert "F1 Fetch (fetch broke) = NORESULT\n\nR2 Use it = 10" in synthesis


async def test_a_plan_shown_back_to_the_model_is_listed_with_templates() -> None:
    book = PromptBook(
        {
            "plan_step_tool": "[uses {tool}]",
            "plan_step_after": "[after {steps}]",
            "fallback_plan": "DRAFT\n{plan}",
        }
    )
    not_ready = plan(
        step(1, "Add", tool="calculator"), step(2, "Double", depends_on=[1]), ready=False
    )
    ctx, gateway, _, _ = make_ctx([not_ready, not_ready, "Final Answer: done"], prompts=book)

    await run(ctx, agent=make_agent("calculator"), reasoning_effort="low", max_attempts=2)

    (fallback,) = requests_for(gateway.requests, "react")
    assert "DRAFT\nThe plan\n\n1. Add [uses calculator]\n2. Double [after 1]" in fallback


async def test_the_plan_execute_log_comes_from_templates() -> None:
    book = PromptBook({"step_result": "R{number} {description} = {result}", "nothing": "NIL"})
    ctx, gateway, _, _ = make_ctx(
        ['["Add", "Double"]', "Final Answer: 5", "Final Answer: 10", "10"], prompts=book
    )

    await run_plan_execute(ctx, make_agent(), make_task())

    first, second = requests_for(gateway.requests, "step")
    assert first.endswith("Context:\nNIL")
    assert second.endswith("Context:\nR1 Add = 5")
    (aggregate,) = requests_for(gateway.requests, "aggregate")
    assert "R1 Add = 5\n\nR2 Double = 10" in aggregate
