"""A ReAct loop that cannot be followed ends early and says why (issue #14): no format for an agent
without tools, turns counted aloud, rejected replies kept in events, repeats stopped."""

from __future__ import annotations

from typing import Any

import pytest

from agents.engine.agent import AgentError, run_agent
from agents.engine.llm import tool_call_response
from agents.engine.plan_execute import PlanExecuteError, run_plan_execute
from agents.engine.react import AnswerFormatError, build_task_messages, run_react_loop
from agents.engine.react_turns import REPLY_EVENT_LIMIT, reply_key
from agents.engine.runtime import RunContext
from agents.engine.specs import AgentSpec
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task, non_llm_types

TEXT_LLM = make_llm(supports_tools=False)
STUCK_ACTION = 'Thought: I must add.\nAction: calculator\nAction Input: {"expression": "1+1"}'
REASON = "the model did not follow the answer format: it sent the same reply 3 times in a row"


async def react(ctx: RunContext, agent: AgentSpec, *, max_iter: int = 25, **kw: Any) -> Any:
    return await run_react_loop(
        ctx, agent, build_task_messages(ctx, agent, make_task()), max_iter=max_iter, **kw
    )


# --- no tools, no format ------------------------------------------------------------------------


async def test_an_agent_without_tools_gets_no_format_and_its_prose_reply_is_the_answer() -> None:
    ctx, gateway, sink, _ = make_ctx(["It is 4: two and two make four."])

    result = await react(ctx, make_agent(llm=TEXT_LLM))

    assert (result.output, result.outcome, gateway.calls) == ("It is 4: two and two make four.", "completed", 1)
    request = gateway.requests[0]
    assert request.stop is None and request.tools is None
    system = request.messages[0]["content"]
    assert "Final Answer" not in system and "Thought" not in system and "Action" not in system
    assert non_llm_types(sink) == []  # no turns to count, nothing rejected


async def test_an_agent_without_tools_that_writes_final_answer_anyway_gets_the_answer_alone() -> None:
    ctx, gateway, _, _ = make_ctx(["Thought: easy\nFinal Answer: 4"])
    result = await react(ctx, make_agent())
    assert (result.output, gateway.calls) == ("4", 1)


async def test_an_agent_without_tools_is_told_of_an_empty_reply_and_never_of_actions() -> None:
    ctx, gateway, sink, _ = make_ctx(["", "Four."])

    result = await react(ctx, make_agent(llm=TEXT_LLM))

    assert (result.output, gateway.calls) == ("Four.", 2)
    nudge = gateway.requests[1].messages[-1]["content"]
    assert nudge == "your reply was empty."
    assert "Action" not in nudge
    [rejected] = sink.of_type("react.format_error")
    assert rejected.data == {"turn": 1, "max_turns": 25, "error": "your reply was empty.", "reply": "",
                             "reply_chars": 0}


async def test_an_agent_without_tools_that_only_sends_empty_replies_fails_in_four_calls() -> None:
    ctx, gateway, sink, _ = make_ctx(default="")

    with pytest.raises(AnswerFormatError, match=f"^{REASON}$"):
        await react(ctx, make_agent(llm=TEXT_LLM))

    assert gateway.calls == 4
    assert all(r.stop is None for r in gateway.requests)  # no format, no stop word, forced or not
    assert non_llm_types(sink) == ["react.format_error"] * 3 + ["react.stuck", "react.format_error"]


async def test_a_no_tools_agent_answering_prose_succeeds_in_one_call_through_run_agent() -> None:
    ctx, gateway, _, _ = make_ctx(["Lisbon in two days: Alfama, then Belém."])
    result = await run_agent(ctx, make_agent(llm=TEXT_LLM), make_task("Plan a trip"))
    assert (result.output, gateway.calls) == ("Lisbon in two days: Alfama, then Belém.", 1)


# --- turns and format errors --------------------------------------------------------------------


async def test_each_turn_is_announced_with_its_number_and_the_limit() -> None:
    ctx, _, sink, _ = make_ctx([STUCK_ACTION, "Final Answer: 2"])
    await react(ctx, make_agent("calculator", llm=TEXT_LLM), max_iter=7)
    assert [e.data for e in sink.of_type("react.turn")] == [
        {"turn": 1, "max_turns": 7}, {"turn": 2, "max_turns": 7}]
    assert sink.types.index("react.turn") < sink.types.index("llm.started")


async def test_a_format_error_is_an_event_with_the_turn_the_limit_and_the_rejected_reply() -> None:
    ctx, _, sink, _ = make_ctx(["I think <b>it</b> is 4.", "Final Answer: 4"])
    await react(ctx, make_agent("calculator", llm=TEXT_LLM), max_iter=5)
    [rejected] = sink.of_type("react.format_error")
    assert rejected.data == {
        "turn": 1,
        "max_turns": 5,
        "error": "your reply had neither 'Final Answer:' nor an 'Action:' followed by 'Action Input:'.",
        "reply": "I think <b>it</b> is 4.",
        "reply_chars": 23,
    }


async def test_a_long_rejected_reply_is_clipped_in_its_event() -> None:
    ctx, _, sink, _ = make_ctx(["x" * 5000, "Final Answer: 4"])
    await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    data = sink.of_type("react.format_error")[0].data
    assert data["reply"] == "x" * REPLY_EVENT_LIMIT and data["reply_chars"] == 5000


# --- a loop that repeats itself -----------------------------------------------------------------


async def test_a_model_repeating_the_same_action_fails_in_four_calls_with_the_plain_reason() -> None:
    ctx, gateway, sink, _ = make_ctx(default=STUCK_ACTION)

    with pytest.raises(AnswerFormatError, match=f"^{REASON}$"):
        await react(ctx, make_agent("calculator", llm=TEXT_LLM))

    assert gateway.calls == 4  # three turns, then the forced answer, which is the action again
    assert non_llm_types(sink) == ["tool.started", "tool.completed", "react.stuck", "react.format_error"]
    stuck = sink.of_type("react.stuck")[0].data
    assert stuck == {"turn": 3, "max_turns": 25, "repeats": 3, "reason": REASON, "reply": STUCK_ACTION,
                     "reply_chars": len(STUCK_ACTION)}
    forced = sink.of_type("react.format_error")[0].data
    assert (forced["turn"], forced["reply"], forced["error"]) == (4, STUCK_ACTION, REASON)


async def test_the_same_action_with_another_thought_is_still_the_same_reply() -> None:
    replies = [f"Thought: try {n}\nAction: calculator\nAction Input: {{ \"expression\":\"1+1\" }}" for n in range(4)]
    ctx, gateway, _, _ = make_ctx(replies)
    with pytest.raises(AnswerFormatError):
        await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    assert gateway.calls == 4


async def test_a_stuck_agent_fails_at_once_without_retrying_the_task() -> None:
    ctx, gateway, _, _ = make_ctx(default=STUCK_ACTION)
    agent = make_agent("calculator", llm=TEXT_LLM, max_retry_limit=2)

    with pytest.raises(AgentError) as info:
        await run_agent(ctx, agent, make_task())

    assert str(info.value) == f"Agent 'Researcher' failed: {REASON}"
    assert gateway.calls == 4


async def test_without_a_forced_answer_a_stuck_loop_ends_failed_after_three_calls() -> None:
    ctx, gateway, sink, _ = make_ctx(default=STUCK_ACTION)
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM), force_final_answer=False)
    assert (result.outcome, result.error, gateway.calls) == ("failed", REASON, 3)
    assert non_llm_types(sink)[-1] == "react.stuck"


async def test_the_same_prose_three_times_ends_with_a_visible_forced_answer() -> None:
    ctx, gateway, sink, _ = make_ctx(default="The sum is 4.")

    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))

    assert (result.output, result.outcome, gateway.calls) == ("The sum is 4.", "completed", 4)
    assert non_llm_types(sink) == ["react.format_error"] * 3 + ["react.stuck", "react.forced_answer"]
    assert [e.data["turn"] for e in sink.of_type("react.format_error")] == [1, 2, 3]
    assert sink.of_type("react.forced_answer")[0].data == {"reason": "repeated", "turn": 4, "max_turns": 25}


async def test_the_same_native_tool_call_three_times_stops_the_loop() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [tool_call_response("calculator", {"expression": "1+1"}, call_id=f"c{n}") for n in range(3)]
        + ["It is 2."]
    )
    result = await react(ctx, make_agent("calculator"))
    assert (result.output, gateway.calls) == ("It is 2.", 4)
    assert gateway.requests[3].tools is None
    assert sink.of_type("react.stuck")[0].data["reply"] == 'calculator({"expression": "1+1"})'


async def test_different_replies_are_not_a_repeat() -> None:
    ctx, gateway, sink, _ = make_ctx(["one", "two", "one", "Final Answer: done"])
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    assert (result.output, gateway.calls) == ("done", 4)
    assert "react.stuck" not in sink.types


def test_replies_are_the_same_by_their_action_or_their_text_whitespace_aside() -> None:
    assert reply_key("a  b\n") == reply_key("a b")
    assert reply_key("x", action=("calc", '{"a": 1, "b": 2}')) == reply_key("y", action=("calc", '{"b":2,"a":1}'))
    assert reply_key("", calls=[("calc", '{"a": 1}')]) != reply_key("", calls=[("calc", '{"a": 2}')])


# --- plan-execute -------------------------------------------------------------------------------


async def test_the_plan_execute_plan_call_asks_for_the_json_array_only() -> None:
    ctx, gateway, _, _ = make_ctx(['[{"step": 1, "action": "Add"}]', "Final Answer: 5", "5"])
    agent = make_agent("calculator", llm=TEXT_LLM)

    await run_plan_execute(ctx, agent, make_task())

    plan_system = gateway.requests[0].messages[0]["content"]
    assert "JSON array" in plan_system
    assert "Final Answer" not in plan_system and "Action Input" not in plan_system


async def test_a_plan_execute_step_stuck_on_one_action_fails_with_the_plain_reason() -> None:
    ctx, gateway, sink, _ = make_ctx(['[{"step": 1, "action": "Add"}, {"step": 2, "action": "Say"}]'],
                                     default=STUCK_ACTION)

    with pytest.raises(PlanExecuteError, match=f"step 1 failed: {REASON}"):
        await run_plan_execute(ctx, make_agent("calculator", llm=TEXT_LLM), make_task())

    assert gateway.calls == 4  # the plan, then three turns of step 1
    completed = sink.of_type("step.completed")[0].data
    assert (completed["outcome"], completed["error"]) == ("failed", REASON)
