"""The ReAct executor: both tool paths, the parser, tool policies, context window, limits."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agents.engine.calls import BudgetExceeded, BudgetScope
from agents.engine.llm import (
    ContextLengthError,
    LLMRequest,
    LLMResponse,
    ToolCall,
    ToolsUnsupportedError,
    tool_call_response,
)
from agents.engine.prompts import PromptBook
from agents.engine.react import (
    STOP_WORDS,
    Action,
    FinalAnswer,
    FormatError,
    build_task_messages,
    parse_react,
    run_react_loop,
)
from agents.engine.runtime import ApprovalDecision, Cancelled, RunContext, Usage
from agents.engine.specs import AgentSpec, Budget, ToolRef
from agents.engine.tools import Tool, ToolError, ToolRegistry
from tests.agents.engine.helpers import (
    ScriptedHuman,
    make_agent,
    make_ctx,
    make_llm,
    make_task,
    non_llm_types,
)

PROMPTS = PromptBook()
TEXT_LLM = make_llm(supports_tools=False)


def calc(expression: str, call_id: str = "call_1") -> LLMResponse:
    return tool_call_response("calculator", {"expression": expression}, call_id=call_id)


def text_action(tool: str, tool_input: str) -> str:
    return f"Thought: I need a tool.\nAction: {tool}\nAction Input: {tool_input}"


def calls(*items: tuple[str, dict[str, Any] | str]) -> LLMResponse:
    """One response with several native tool calls, ids call_1, call_2, ..."""
    return LLMResponse(
        tool_calls=[
            ToolCall(
                id=f"call_{i}",
                name=name,
                arguments=args if isinstance(args, str) else json.dumps(args),
            )
            for i, (name, args) in enumerate(items, 1)
        ],
        finish_reason="tool_calls",
    )


async def react(ctx: RunContext, agent: AgentSpec, *, max_iter: int = 10, **kw: Any) -> Any:
    return await run_react_loop(
        ctx, agent, build_task_messages(ctx, agent, make_task()), max_iter=max_iter, **kw
    )


def tool_messages(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "tool"]


# --- the basic paths ----------------------------------------------------------------------------


async def test_native_tool_call_then_text_answer_emits_the_exact_event_sequence() -> None:
    ctx, gateway, sink, _ = make_ctx([calc("6 * 7"), "The answer is 42."])
    result = await react(ctx, make_agent("calculator"), step_id="s1")

    assert result.output == "The answer is 42."
    assert result.outcome == "completed"
    assert result.iterations == 2
    assert result.tools_used == ["calculator"]
    assert sink.types == [
        "react.turn",
        "llm.started",
        "llm.completed",
        "tool.started",
        "tool.completed",
        "react.turn",
        "llm.started",
        "llm.completed",
    ]
    assert {e.step_id for e in sink.events} == {"s1"}
    assert [e.data for e in sink.of_type("react.turn")] == [
        {"turn": 1, "max_turns": 10},
        {"turn": 2, "max_turns": 10},
    ]
    assert sink.events[3].data == {"name": "calculator", "args": {"expression": "6 * 7"}}
    assert sink.events[4].data == {"name": "calculator", "output": "42", "from_cache": False}
    first, second = gateway.requests
    assert [t["function"]["name"] for t in first.tools or []] == ["calculator"]
    assert first.stop is None and first.purpose == "react"
    assert second.messages[-2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert second.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    assert ctx.usage.tool_calls == 1


async def test_text_protocol_runs_the_action_and_sends_the_observation() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [
            text_action("calculator", '{"expression": "2 + 2"}') + "\nObservation: 5 (invented)",
            "Thought: I now know the final answer\nFinal Answer: 4",
        ]
    )
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))

    assert result.output == "4"
    assert non_llm_types(sink) == ["tool.started", "tool.completed"]
    first, second = gateway.requests
    assert first.tools is None and first.stop == STOP_WORDS
    assert "Action Input" in first.messages[0]["content"]  # text mode explains the protocol
    # What the model invented after "Observation:" is dropped; the real observation follows.
    assert second.messages[-2]["content"].endswith('Action Input: {"expression": "2 + 2"}')
    assert second.messages[-1] == {"role": "user", "content": "Observation: 4"}


async def test_native_reply_with_a_final_answer_prefix_is_cleaned() -> None:
    ctx, _, _, _ = make_ctx(["Thought: done\nFinal Answer: Lisbon"])
    assert (await react(ctx, make_agent("calculator"))).output == "Lisbon"


async def test_agent_without_tools_sends_no_tools_and_the_no_tools_prompt() -> None:
    ctx, gateway, _, _ = make_ctx(["Final Answer: hi"])
    agent = make_agent()
    result = await react(ctx, agent)
    assert result.output == "hi"
    request = gateway.requests[0]
    assert request.tools is None
    assert request.messages[0]["content"] == PROMPTS.render(
        "react_system_no_tools", role=agent.role, goal=agent.goal, backstory=agent.backstory
    )


async def test_caller_messages_are_not_changed() -> None:
    ctx, _, _, _ = make_ctx([calc("1+1"), "2"])
    agent = make_agent("calculator")
    messages = build_task_messages(ctx, agent, make_task())
    before = [dict(m) for m in messages]
    result = await run_react_loop(ctx, agent, messages, max_iter=5)
    assert messages == before
    assert len(result.messages) == 5


# --- max_iter -----------------------------------------------------------------------------------


async def test_max_iter_one_with_a_model_that_keeps_calling_tools_makes_exactly_two_calls() -> None:
    ctx, gateway, sink, _ = make_ctx(default=calc("1 + 1"))
    result = await react(ctx, make_agent("calculator"), max_iter=1)

    assert gateway.calls == 2
    assert result.outcome == "completed"
    assert result.iterations == 2
    # The forced reply carried no text, so the best answer available is the last result.
    assert result.output == "2"
    forced = gateway.requests[1]
    assert forced.tools is None
    assert forced.messages[-1] == {"role": "user", "content": PROMPTS.render("forced_final_answer")}
    # A request without tools carries no native tool messages: they are flattened to text.
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in forced.messages)
    assert any(m["content"] == "Observation: 2" for m in forced.messages)
    # The answer says it was forced: the page shows the warning.
    assert non_llm_types(sink) == ["tool.started", "tool.completed", "react.forced_answer"]
    assert sink.of_type("react.forced_answer")[0].data == {
        "reason": "max_turns", "turn": 2, "max_turns": 1}


async def test_forced_final_answer_text_is_the_answer_whatever_its_format() -> None:
    ctx, gateway, _, _ = make_ctx(
        [text_action("calculator", '{"expression": "3*3"}'), "It is nine, I think."]
    )
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM), max_iter=1)
    assert gateway.calls == 2
    assert result.output == "It is nine, I think."


async def test_without_force_final_answer_max_iter_ends_as_iteration_exhausted() -> None:
    ctx, gateway, _, _ = make_ctx([calc("1+1", "a"), calc("2+2", "b")])
    result = await react(ctx, make_agent("calculator"), max_iter=2, force_final_answer=False)
    assert gateway.calls == 2
    assert result.outcome == "iteration_exhausted"
    assert result.output == "4"  # the last thing the loop learned
    assert result.tools_used == ["calculator", "calculator"]


# --- the parser ---------------------------------------------------------------------------------


def test_parser_final_answer_wins_and_takes_the_text_after_the_last_one() -> None:
    text = (
        'Action: calculator\nAction Input: {"expression": "1"}\n'
        "Final Answer: draft\nFinal Answer: the real one"
    )
    assert parse_react(text) == FinalAnswer("the real one")


def test_parser_handles_markdown_markers_and_dangling_fences() -> None:
    assert parse_react("**Final Answer:** Done.") == FinalAnswer("Done.")
    assert parse_react("```\nFinal Answer: x = 1\n```") == FinalAnswer("x = 1")
    assert parse_react("Final Answer:\n* one\n* two") == FinalAnswer("* one\n* two")
    assert parse_react('**Action:** calculator\n**Action Input:** {"a": 1}') == Action(
        "calculator", '{"a": 1}'
    )


def test_parser_explains_a_missing_action_input() -> None:
    parsed = parse_react("Thought: hmm\nAction: calculator")
    assert isinstance(parsed, FormatError)
    assert "no 'Action Input:'" in parsed.error


async def test_final_answer_wins_over_an_action_in_the_same_reply() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [text_action("calculator", '{"expression": "1+1"}') + "\nFinal Answer: 2"]
    )
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    assert result.output == "2"
    assert gateway.calls == 1
    assert non_llm_types(sink) == []


async def test_format_error_is_sent_back_as_a_user_message_and_counts_as_an_iteration() -> None:
    ctx, gateway, _, _ = make_ctx(["I believe it is 4.", "Final Answer: 4"])
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))

    assert result.output == "4"
    assert result.iterations == 2
    retry = gateway.requests[1].messages
    assert retry[-2] == {"role": "assistant", "content": "I believe it is 4."}
    assert retry[-1] == {
        "role": "user",
        "content": PROMPTS.render(
            "format_error",
            error="your reply had neither 'Final Answer:' nor an 'Action:' followed by "
            "'Action Input:'.",
            tool_names="calculator",
        ),
    }


async def test_format_errors_use_up_iterations_until_the_forced_answer() -> None:
    ctx, gateway, sink, _ = make_ctx(["rambling", "more rambling", "Final answer text"])
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM), max_iter=2)
    assert gateway.calls == 3
    assert result.output == "Final answer text"
    assert non_llm_types(sink) == ["react.format_error", "react.format_error", "react.forced_answer"]


# --- tool selection and arguments ---------------------------------------------------------------


async def test_tool_names_are_matched_ignoring_case_and_by_similarity() -> None:
    ctx, _, sink, _ = make_ctx(
        [
            text_action("Calculater", '{"expression": "5*5"}'),
            "Final Answer: 25",
        ]
    )
    result = await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    assert result.tools_used == ["calculator"]
    assert sink.of_type("tool.completed")[0].data["output"] == "25"


async def test_unknown_tool_gets_an_observation_listing_the_valid_names() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [tool_call_response("web_search", {"q": "x"}), "Final Answer: ok"]
    )
    result = await react(ctx, make_agent("calculator", "text_stats"))
    observation = tool_messages(result.messages)[0]
    assert observation == (
        "Tool 'web_search' does not exist. The only available tools are: calculator, "
        "text_stats. Use one of these exact names, or give your Final Answer."
    )
    assert non_llm_types(sink) == ["tool.failed"]
    assert result.tools_used == []
    assert ctx.usage.tool_calls == 0


async def test_invalid_arguments_come_back_as_the_observation() -> None:
    ctx, _, sink, _ = make_ctx([tool_call_response("calculator", {"expr": "1+1"}), "done"])
    result = await react(ctx, make_agent("calculator"))
    observation = tool_messages(result.messages)[0]
    assert observation.startswith(
        "Error: invalid arguments for 'calculator': 'expression' is a required property."
    )
    assert '"required": ["expression"]' in observation  # the schema, so the model can fix it
    assert non_llm_types(sink) == ["tool.failed"]
    assert ctx.usage.tool_calls == 0


async def test_unparseable_native_arguments_come_back_as_the_observation() -> None:
    ctx, _, _, _ = make_ctx([tool_call_response("text_stats", "{:"), "done"])
    result = await react(ctx, make_agent("text_stats"))
    assert tool_messages(result.messages)[0].startswith(
        "Error: invalid arguments for 'text_stats': the input is not valid JSON"
    )


async def test_lenient_arguments_are_repaired_and_bare_text_fills_a_single_argument() -> None:
    ctx, _, sink, _ = make_ctx(
        [
            text_action("calculator", "{'expression': '2*3',}"),
            text_action("calculator", "7 * 6"),
            "Final Answer: done",
        ]
    )
    await react(ctx, make_agent("calculator", llm=TEXT_LLM))
    assert [e.data["output"] for e in sink.of_type("tool.completed")] == ["6", "42"]


async def test_the_same_call_twice_in_a_row_is_not_run_again() -> None:
    ctx, _, sink, _ = make_ctx([calc("2+2", "a"), calc("2+2", "b"), calc("3+3", "c"), "done"])
    result = await react(ctx, make_agent("calculator", cache_tools=False))
    assert result.tools_used == ["calculator", "calculator"]
    assert len(sink.of_type("tool.started")) == 2
    observations = tool_messages(result.messages)
    assert observations[0] == "4"
    assert observations[1].startswith("I already used 'calculator' with exactly these arguments")
    assert observations[2] == "6"


# --- tool execution policies --------------------------------------------------------------------


def flaky_tool(failures: int, *, retryable_error: bool = False) -> tuple[Tool, list[int]]:
    attempts: list[int] = []

    def run(args: dict[str, Any]) -> str:
        attempts.append(1)
        if len(attempts) <= failures:
            if retryable_error:
                raise ToolError("upstream busy", retryable=True)
            raise RuntimeError("connection reset")
        return "fine"

    tool = Tool(
        name="flaky", description="Sometimes fails.", args_schema={"type": "object"}, run=run
    )
    return tool, attempts


async def test_tool_errors_are_retried_up_to_three_attempts() -> None:
    tool, attempts = flaky_tool(2)
    ctx, _, sink, _ = make_ctx(
        [tool_call_response("flaky", {}), "done"], tools=ToolRegistry([tool])
    )
    result = await react(ctx, make_agent("flaky"))
    assert len(attempts) == 3
    assert tool_messages(result.messages) == ["fine"]
    assert non_llm_types(sink) == ["tool.started", "tool.completed"]
    assert ctx.usage.tool_calls == 1  # one call for the budget, however many attempts


async def test_a_tool_that_keeps_failing_reports_the_error_as_the_observation() -> None:
    tool, attempts = flaky_tool(10, retryable_error=True)
    ctx, _, sink, _ = make_ctx(
        [tool_call_response("flaky", {}), "done"], tools=ToolRegistry([tool])
    )
    result = await react(ctx, make_agent("flaky"))
    assert len(attempts) == 3
    assert tool_messages(result.messages) == [
        "Error: the tool 'flaky' failed (tried 3 times): upstream busy"
    ]
    assert non_llm_types(sink) == ["tool.started", "tool.failed"]
    assert sink.of_type("tool.failed")[0].data == {
        "name": "flaky",
        "error": "upstream busy",
        "attempts": 3,
    }


async def test_bad_input_errors_are_not_retried() -> None:
    ctx, _, _, _ = make_ctx([calc("1/0"), "done"])
    result = await react(ctx, make_agent("calculator"))
    assert tool_messages(result.messages) == [
        "Error: the tool 'calculator' failed: division by zero"
    ]


async def test_usage_cap_stops_a_tool_after_max_usage_calls() -> None:
    ctx, _, sink, _ = make_ctx([calc("1+1", "a"), calc("2+2", "b"), "done"])
    agent = make_agent(ToolRef(name="calculator", max_usage=1))
    result = await react(ctx, agent)
    assert tool_messages(result.messages) == [
        "2",
        "Tool 'calculator' has reached its usage limit of 1 times and cannot be used anymore.",
    ]
    assert non_llm_types(sink) == ["tool.started", "tool.completed", "tool.failed"]


async def test_result_as_answer_tool_ends_the_turn_with_its_output() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [calls(("text_stats", {"text": "One two."}), ("calculator", {"expression": "1+1"}))]
    )
    agent = make_agent(ToolRef(name="text_stats", result_as_answer=True), "calculator")
    result = await react(ctx, agent)

    assert gateway.calls == 1
    assert result.output.startswith('{"characters": 8')
    assert result.tools_used == ["text_stats"]  # the second call never ran
    assert non_llm_types(sink) == ["tool.started", "tool.completed"]
    second = tool_messages(result.messages)[1]
    assert second == "Not run: an earlier tool call already produced the final answer."


async def test_result_as_answer_in_text_mode() -> None:
    ctx, gateway, _, _ = make_ctx([text_action("calculator", '{"expression": "9*9"}')])
    agent = make_agent(ToolRef(name="calculator", result_as_answer=True), llm=TEXT_LLM)
    result = await react(ctx, agent)
    assert (result.output, gateway.calls) == ("81", 1)


async def test_a_failed_result_as_answer_tool_does_not_end_the_turn() -> None:
    ctx, gateway, _, _ = make_ctx([calc("1/0"), "Final Answer: cannot divide by zero"])
    agent = make_agent(ToolRef(name="calculator", result_as_answer=True))
    result = await react(ctx, agent)
    assert (result.output, gateway.calls) == ("cannot divide by zero", 2)


def gated_tools() -> tuple[ToolRegistry, list[str]]:
    """'slow' finishes only after 'fast' has: it can only succeed if both run at once."""
    fast_done = asyncio.Event()
    finished: list[str] = []

    async def slow(args: dict[str, Any]) -> str:
        await asyncio.wait_for(fast_done.wait(), timeout=2)
        await asyncio.sleep(0.01)
        finished.append("slow")
        return "slow result"

    async def fast(args: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        finished.append("fast")
        fast_done.set()
        return "fast result"

    schema: dict[str, Any] = {"type": "object"}
    registry = ToolRegistry(
        [
            Tool(name="slow", description="Slow.", args_schema=schema, run=slow),
            Tool(name="fast", description="Fast.", args_schema=schema, run=fast),
        ]
    )
    return registry, finished


async def test_native_calls_in_one_response_run_in_parallel_and_keep_call_order() -> None:
    registry, finished = gated_tools()
    ctx, _, sink, _ = make_ctx([calls(("slow", {}), ("fast", {})), "done"], tools=registry)
    result = await react(ctx, make_agent("slow", "fast"))

    assert finished == ["fast", "slow"]  # fast finished first...
    assert tool_messages(result.messages) == ["slow result", "fast result"]  # ...order kept
    assert [m["tool_call_id"] for m in result.messages if m["role"] == "tool"] == [
        "call_1",
        "call_2",
    ]
    assert [e.data["name"] for e in sink.of_type("tool.completed")] == ["fast", "slow"]


async def test_a_usage_capped_tool_makes_the_batch_sequential() -> None:
    registry, finished = gated_tools()
    ctx, _, _, _ = make_ctx([calls(("fast", {}), ("slow", {})), "done"], tools=registry)
    result = await react(ctx, make_agent(ToolRef(name="slow", max_usage=5), "fast"))
    assert finished == ["fast", "slow"]  # in call order: slow waits for fast, which ran first
    assert tool_messages(result.messages) == ["fast result", "slow result"]


async def test_tool_results_are_cached_per_run_when_the_agent_caches() -> None:
    ctx, _, sink, _ = make_ctx([calc("1+1", "a"), calc("2+2", "b"), calc("1+1", "c"), "done"])
    result = await react(ctx, make_agent("calculator"))

    completed = [(e.data["output"], e.data["from_cache"]) for e in sink.of_type("tool.completed")]
    assert completed == [("2", False), ("4", False), ("2", True)]
    assert result.tools_used == ["calculator"] * 3
    assert ctx.usage.tool_calls == 2  # a cache hit calls nothing
    assert ctx.tool_cache == {
        ("calculator", '{"expression": "1+1"}'): "2",
        ("calculator", '{"expression": "2+2"}'): "4",
    }


async def test_an_agent_with_caching_off_runs_the_tool_again() -> None:
    ctx, _, sink, _ = make_ctx([calc("1+1", "a"), calc("2+2", "b"), calc("1+1", "c"), "done"])
    await react(ctx, make_agent("calculator", cache_tools=False))
    assert [e.data["from_cache"] for e in sink.of_type("tool.completed")] == [False] * 3
    assert ctx.tool_cache == {}


# --- approval -----------------------------------------------------------------------------------


async def test_a_tool_that_needs_approval_runs_once_approved() -> None:
    human = ScriptedHuman(approvals=[True])
    ctx, _, sink, _ = make_ctx([calc("2*21"), "42"], human=human)
    result = await react(ctx, make_agent(ToolRef(name="calculator", needs_approval=True)))

    assert result.output == "42"
    assert non_llm_types(sink) == [
        "approval.requested",
        "approval.resolved",
        "tool.started",
        "tool.completed",
    ]
    requested = sink.of_type("approval.requested")[0].data
    assert requested["tool"] == "calculator"
    assert requested["args"] == {"expression": "2*21"}
    assert human.approval_requests == [
        (requested["approval_id"], "calculator", {"expression": "2*21"})
    ]
    assert sink.of_type("approval.resolved")[0].data["approve"] is True


async def test_a_denied_tool_call_reaches_the_agent_as_the_observation() -> None:
    human = ScriptedHuman(approvals=[ApprovalDecision(approve=False, note="not on prod")])
    ctx, gateway, sink, _ = make_ctx([calc("2*21"), "I could not compute it."], human=human)
    result = await react(ctx, make_agent(ToolRef(name="calculator", needs_approval=True)))

    assert non_llm_types(sink) == ["approval.requested", "approval.resolved"]
    assert sink.of_type("approval.resolved")[0].data["approve"] is False
    denial = gateway.requests[1].messages[-1]["content"]
    assert denial == (
        "The person supervising this run denied the use of 'calculator' with these arguments. "
        "Their note: not on prod Do not try it again; continue without it."
    )
    assert result.tools_used == []
    assert ctx.usage.tool_calls == 0


# --- budgets, cancellation, deadline ------------------------------------------------------------


async def test_tool_calls_count_against_the_agent_budget() -> None:
    ctx, gateway, sink, _ = make_ctx([calc("1+1", "a"), calc("2+2", "b")])
    scope = BudgetScope(Budget(max_tool_calls=1), Usage(), "agent")
    with pytest.raises(BudgetExceeded):
        await react(ctx, make_agent("calculator"), scope=scope)
    assert gateway.calls == 2
    assert scope.usage.tool_calls == 1
    assert sink.types[-1] == "budget.exceeded"
    assert sink.of_type("budget.exceeded")[0].data["limit"] == "max_tool_calls"


async def test_cancel_during_a_tool_means_no_further_llm_call() -> None:
    ctx, gateway, sink, _ = make_ctx([tool_call_response("stop_button", {}), "never sent"])

    async def stop_button(args: dict[str, Any]) -> str:
        ctx.cancel.cancel("user pressed stop")
        return "stopping"

    ctx.tools = ToolRegistry(
        [
            Tool(
                name="stop_button",
                description="Stops.",
                args_schema={"type": "object"},
                run=stop_button,
            )
        ]
    )
    with pytest.raises(Cancelled, match="user pressed stop"):
        await react(ctx, make_agent("stop_button"))
    assert gateway.calls == 1


async def test_a_cancelled_run_makes_no_llm_call() -> None:
    ctx, gateway, sink, _ = make_ctx(["Final Answer: x"])
    ctx.cancel.cancel()
    with pytest.raises(Cancelled):
        await react(ctx, make_agent("calculator"))
    assert gateway.calls == 0
    assert sink.events == []


async def test_cancel_abandons_a_tool_in_flight() -> None:
    started = asyncio.Event()

    async def forever(args: dict[str, Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    registry = ToolRegistry(
        [Tool(name="forever", description="Hangs.", args_schema={"type": "object"}, run=forever)]
    )
    ctx, gateway, _, _ = make_ctx([tool_call_response("forever", {})], tools=registry)
    run = asyncio.create_task(react(ctx, make_agent("forever")))
    await asyncio.wait_for(started.wait(), timeout=2)
    ctx.cancel.cancel()
    with pytest.raises(Cancelled):
        await asyncio.wait_for(run, timeout=2)
    assert gateway.calls == 1


async def test_past_the_deadline_the_loop_stops_as_timed_out_without_calling() -> None:
    ctx, gateway, _, clock = make_ctx()

    def slow_tool_call(request: LLMRequest) -> LLMResponse:
        clock.advance(10)
        return calc("5+5")

    gateway.script = [slow_tool_call, "never sent"]
    result = await react(ctx, make_agent("calculator"), deadline=5.0)
    assert result.outcome == "timed_out"
    assert gateway.calls == 1
    assert result.output == "10"  # the last thing the loop learned


async def test_a_deadline_already_past_makes_no_call() -> None:
    ctx, gateway, _, clock = make_ctx(["Final Answer: x"])
    clock.advance(100)
    result = await react(ctx, make_agent(), deadline=50.0)
    assert (result.outcome, result.iterations, gateway.calls) == ("timed_out", 0, 0)


# --- downgrade and context window ---------------------------------------------------------------


async def test_a_provider_that_rejects_tools_downgrades_the_same_conversation_to_text() -> None:
    ctx, gateway, sink, _ = make_ctx(
        [
            ToolsUnsupportedError("this model does not support tools"),
            text_action("calculator", '{"expression": "1+1"}'),
            "Final Answer: 2",
        ]
    )
    result = await react(ctx, make_agent("calculator"))

    assert result.output == "2"
    assert result.iterations == 2  # the refused call is not a turn
    rejected, downgraded, last = gateway.requests
    assert rejected.tools is not None
    assert downgraded.tools is None and downgraded.stop == STOP_WORDS
    assert downgraded.messages[:2] == rejected.messages  # same conversation...
    assert downgraded.messages[-1]["role"] == "user"  # ...plus the text protocol
    assert "Action Input" in downgraded.messages[-1]["content"]
    assert last.tools is None
    assert non_llm_types(sink) == ["tool.started", "tool.completed"]


async def test_a_tools_refusal_is_learned_so_the_next_loop_sends_no_tools() -> None:
    ctx, gateway, _, _ = make_ctx(
        [
            ToolsUnsupportedError("this model does not support tools"),
            "Final Answer: 2",
            "Final Answer: 3",
        ]
    )
    agent = make_agent("calculator")
    await react(ctx, agent)
    assert ctx.llm.capabilities.refuses(agent.llm, "tools")

    result = await react(ctx, agent)  # a second loop with the same caller

    assert result.output == "3"
    assert gateway.calls == 3  # nothing refused twice
    last = gateway.requests[-1]
    assert last.tools is None and last.stop == STOP_WORDS
    assert "Action Input" in last.messages[0]["content"]  # the text protocol, from the start


async def test_context_length_error_summarises_older_messages_then_continues() -> None:
    ctx, gateway, _, _ = make_ctx(
        [
            calc("2+2"),
            ContextLengthError("maximum context length exceeded"),
            "<summary>The calculator said 2+2 is 4.</summary>",
            "Final Answer: 4",
        ]
    )
    agent = make_agent("calculator")
    result = await react(ctx, agent)

    assert result.output == "4"
    assert gateway.purposes() == ["react"] * 4
    summarise = gateway.requests[2]
    assert summarise.tools is None
    assert len(summarise.messages) == 1
    assert summarise.messages[0]["content"].startswith(PROMPTS.render("summarize", text=""))
    assert "Observation: 4" in summarise.messages[0]["content"]
    resumed = gateway.requests[3].messages
    task_messages = build_task_messages(ctx, agent, make_task())
    assert resumed == [
        *task_messages,
        {"role": "user", "content": "<summary>\nThe calculator said 2+2 is 4.\n</summary>"},
    ]
    assert result.iterations == 3  # as upstream, the recovery counts as a turn


async def test_long_histories_are_summarised_in_chunks_that_fit_the_window() -> None:
    echo = Tool(
        name="echo",
        description="Echo.",
        args_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        run=lambda args: "long output " * 150,
    )
    llm = make_llm(context_window=512)
    ctx, gateway, _, _ = make_ctx(tools=ToolRegistry([echo]))
    gateway.script = [
        tool_call_response("echo", {"n": 1}),
        tool_call_response("echo", {"n": 2}),
        ContextLengthError("too long"),
    ]
    agent = make_agent("echo", llm=llm)

    def finish(request: LLMRequest) -> str:
        return "Final Answer: done" if "<summary>" in str(request.messages[-1]) else "summary"

    gateway.default = finish
    result = await react(ctx, agent, max_iter=5)

    assert result.output == "done"
    summaries = gateway.requests[3:-1]
    assert len(summaries) >= 3  # two 1,800-character outputs cannot share a 1,740-character chunk
    budget = int(512 * 0.85) * 4
    assert all(len(r.messages[0]["content"]) <= budget for r in summaries)


async def test_context_length_error_fails_clearly_when_the_agent_does_not_summarise() -> None:
    ctx, gateway, _, _ = make_ctx([calc("1+1"), ContextLengthError("too long")])
    agent = make_agent("calculator", respect_context_window=False)
    with pytest.raises(ContextLengthError, match="respect_context_window is off"):
        await react(ctx, agent)
    assert gateway.calls == 2


async def test_context_length_error_on_the_task_alone_fails_clearly() -> None:
    ctx, gateway, _, _ = make_ctx([ContextLengthError("too long")])
    with pytest.raises(ContextLengthError, match="The task itself does not fit"):
        await react(ctx, make_agent())
    assert gateway.calls == 1


# --- building the task prompt -------------------------------------------------------------------


def test_task_messages_carry_context_plan_steps_and_extra_text() -> None:
    ctx, _, _, _ = make_ctx()
    task = make_task(
        "Plan a trip to {city}",
        context=("Budget: 500 EUR", "Dates: May"),
        plan_steps=("Check {weather}", "Book a hotel"),
    )
    system, user = build_task_messages(ctx, make_agent(), task, extra="Plan text:\n1. go")
    assert system["role"] == "system" and user["role"] == "user"
    content = user["content"]
    # Braces in the task and the plan are data, not placeholders.
    assert content.startswith(
        "Current task: Plan a trip to {city}\n\nPlan for this task:\n1. Check {weather}\n"
        "2. Book a hotel\n\nThis is the expected criteria"
    )
    assert "This is the context you're working with:\nBudget: 500 EUR\n\nDates: May" in content
    assert content.endswith("Dates: May\n\nPlan text:\n1. go\n\nBegin!")


def test_text_mode_system_prompt_lists_tools_with_argument_schemas() -> None:
    ctx, _, _, _ = make_ctx()
    agent = make_agent("calculator", "text_stats", "not_in_catalogue", llm=TEXT_LLM)
    system = build_task_messages(ctx, agent, make_task())[0]["content"]
    assert "- calculator: " in system and "- text_stats: " in system
    assert '"required": ["expression"]' in system
    assert "one of [calculator, text_stats]" in system
    assert "not_in_catalogue" not in system


def test_native_mode_system_prompt_leaves_the_tools_to_the_function_schemas() -> None:
    ctx, _, _, _ = make_ctx()
    system = build_task_messages(ctx, make_agent("calculator"), make_task())[0]["content"]
    assert "Action Input" not in system and "calculator" not in system


async def test_a_caller_prompt_without_the_text_protocol_gets_it_added() -> None:
    ctx, gateway, _, _ = make_ctx(["Final Answer: ok"])
    messages = [
        {"role": "system", "content": "You execute one plan step."},
        {"role": "user", "content": "Step 1: add numbers"},
    ]
    await run_react_loop(ctx, make_agent("calculator", llm=TEXT_LLM), messages, max_iter=3)
    system = gateway.requests[0].messages[0]["content"]
    assert system.startswith("You execute one plan step.\n\nYou are Researcher.")
    assert "Action Input" in system


async def test_prompt_overrides_from_the_prompt_book_are_used() -> None:
    book = PromptBook({"react_user": "DO: {description} -> {expected_output}{context}"})
    ctx, gateway, _, _ = make_ctx(["Final Answer: ok"], prompts=book)
    await react(ctx, make_agent())
    assert gateway.requests[0].messages[1]["content"] == "DO: Add two numbers -> The sum"


# --- overhead -----------------------------------------------------------------------------------


async def test_time_dependent_tools_are_never_served_from_the_cache() -> None:
    ctx, _, sink, _ = make_ctx(
        [
            tool_call_response("current_datetime", {}, call_id="a"),
            calc("1+1", "b"),
            tool_call_response("current_datetime", {}, call_id="c"),
            "done",
        ]
    )
    await react(ctx, make_agent("current_datetime", "calculator"))
    assert [e.data["from_cache"] for e in sink.of_type("tool.completed")] == [False] * 3
    assert list(ctx.tool_cache) == [("calculator", '{"expression": "1+1"}')]


async def test_long_arguments_are_clipped_in_events_but_not_for_the_tool() -> None:
    text = "word " * 2000
    ctx, _, sink, _ = make_ctx([tool_call_response("text_stats", {"text": text}), "done"])
    result = await react(ctx, make_agent("text_stats"))
    shown = sink.of_type("tool.started")[0].data["args"]["text"]
    assert shown.startswith("word word") and shown.endswith("[6000 more characters]")
    assert '"words": 2000' in tool_messages(result.messages)[0]
