"""Task guardrails (issue #18): built-in checks without an LLM call, criteria judged by one call of
purpose ``guardrail``, and the reasons of a failure sent back to the agent for another answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.engine.agent import AgentError, run_agent
from agents.engine.guardrails import builtin_reasons, describe_checks
from agents.engine.specs import Budget, GuardrailSpec
from tests.agents.engine.helpers import make_agent, make_ctx, make_task, non_llm_types


def verdict(passed: bool, *reasons: str) -> str:
    return json.dumps({"passed": passed, "reasons": list(reasons)})


def test_builtin_checks_name_every_failure() -> None:
    checks = GuardrailSpec(min_chars=10, max_chars=40, must_contain=("Lisbon",),
                           must_not_contain=("TODO",), pattern=r"\d{4}")
    assert builtin_reasons(checks, "A trip to lisbon in 2027, two days.") == []
    assert builtin_reasons(checks, "TODO") == [
        "The answer has 4 characters; it needs at least 10.",
        "The answer must contain 'Lisbon'.",
        "The answer must not contain 'TODO'.",
        "The answer does not match the pattern '\\\\d{4}'.",
    ]
    assert builtin_reasons(GuardrailSpec(max_chars=3), "four") == [
        "The answer has 4 characters; it may have at most 3."
    ]


def test_a_pattern_that_does_not_compile_is_refused_with_the_spec() -> None:
    with pytest.raises(ValueError, match="regular expression"):
        GuardrailSpec(pattern="(")
    with pytest.raises(ValueError, match="min_chars"):
        GuardrailSpec(min_chars=5, max_chars=2)


async def test_a_failed_criterion_is_retried_with_its_reasons_and_then_passes() -> None:
    ctx, gateway, sink, _ = make_ctx([
        "Lisbon: eat pastries.",
        verdict(False, "It cites no source."),
        "Lisbon: eat pastries (source: visitlisboa.com).",
        verdict(True),
    ])
    task = make_task("Plan a day in Lisbon", guardrails=GuardrailSpec(criteria=("Cites a source",)))

    result = await run_agent(ctx, make_agent(), task)

    assert result.output == "Lisbon: eat pastries (source: visitlisboa.com)."
    assert gateway.purposes() == ["react", "guardrail", "react", "guardrail"]
    judged = gateway.requests[1].messages[-1]["content"]
    assert "- Cites a source" in judged and "Lisbon: eat pastries." in judged
    retry = gateway.requests[2].messages
    assert retry[-2] == {"role": "assistant", "content": "Lisbon: eat pastries."}
    assert "- It cites no source." in retry[-1]["content"]
    assert non_llm_types(sink) == ["guardrail.failed", "guardrail.passed"]
    assert [e.data for e in sink.events if e.type.startswith("guardrail.")] == [
        {"task_id": "task-1", "attempt": 1, "reasons": ["It cites no source."], "retrying": True},
        {"task_id": "task-1", "attempt": 2},
    ]
    # The checks are LLM calls like any other: counted in the run's usage (and so its budgets).
    assert ctx.usage.llm_calls == 4


async def test_built_in_checks_need_no_llm_call_and_the_last_failure_fails_the_task() -> None:
    ctx, gateway, sink, _ = make_ctx(["Too short.", "Still short.", "Short again."])
    task = make_task(guardrails=GuardrailSpec(min_chars=50, criteria=("Is polite",)),
                     guardrail_max_retries=2)

    with pytest.raises(AgentError) as failed:
        await run_agent(ctx, make_agent(), task)

    assert str(failed.value) == (
        "The answer failed its checks after 3 attempts: The answer has 12 characters; it needs at least 50."
    )
    assert gateway.purposes() == ["react", "react", "react"]  # the criteria never judged
    assert non_llm_types(sink) == ["guardrail.failed"] * 3
    assert [e.data["retrying"] for e in sink.of_type("guardrail.failed")] == [True, True, False]
    assert [e.data["attempt"] for e in sink.of_type("guardrail.failed")] == [1, 2, 3]


async def test_an_unreadable_verdict_is_a_failure_that_says_so() -> None:
    ctx, _gateway, sink, _ = make_ctx(["An answer.", "I think it is fine?"])
    task = make_task(guardrails=GuardrailSpec(criteria=("Is short",)), guardrail_max_retries=0)

    with pytest.raises(AgentError, match="verdict could not be read: I think it is fine"):
        await run_agent(ctx, make_agent(), task)
    assert sink.of_type("guardrail.failed")[0].data["retrying"] is False


async def test_a_guardrail_check_is_stopped_by_the_budget_like_any_call() -> None:
    ctx, gateway, sink, _ = make_ctx(["x" * 400, verdict(True)], budget=Budget(max_tokens=130))
    task = make_task(guardrails=GuardrailSpec(criteria=("Is long",)))

    from agents.engine.calls import BudgetExceeded

    with pytest.raises(BudgetExceeded):
        await run_agent(ctx, make_agent(), task)
    assert gateway.purposes() == ["react"]
    assert sink.of_type("budget.exceeded")


async def test_a_task_without_checks_makes_no_check() -> None:
    ctx, gateway, sink, _ = make_ctx(["Done."])
    await run_agent(ctx, make_agent(), make_task())
    assert gateway.purposes() == ["react"]
    assert not [t for t in sink.types if t.startswith("guardrail.")]


def test_the_checks_in_words_for_the_planner() -> None:
    checks = GuardrailSpec(criteria=("Cites a source",), max_chars=500, must_contain=("Lisbon",), pattern="^#")
    assert describe_checks(checks) == (
        'Cites a source; at most 500 characters; contains "Lisbon"; matches the regular expression ^#'
    )


def test_a_pattern_that_backtracks_is_stopped_and_named_plainly() -> None:
    import time

    started = time.monotonic()
    assert builtin_reasons(GuardrailSpec(pattern="^(a|aa)+$"), "a" * 40 + "!") == [
        "The pattern took too long to check against the answer."
    ]
    # Nested quantifiers, the classic case, no longer take seconds either.
    assert builtin_reasons(GuardrailSpec(pattern="^(a+)+$"), "a" * 40 + "!") == [
        "The answer does not match the pattern '^(a+)+$'."
    ]
    assert time.monotonic() - started < 3


async def test_checks_on_a_json_answer_read_its_compact_text_and_its_strings() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    answer = {"text": 'Then say "hi" to Ana, and go.'}
    compact = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    ctx, gateway, sink, _ = make_ctx([json.dumps(answer)])
    checks = GuardrailSpec(max_chars=len(compact), must_contain=('say "hi"',), pattern=r'^\{"text":')
    task = make_task(output_json_schema=schema, guardrails=checks, guardrail_max_retries=0)

    result = await run_agent(ctx, make_agent(), task)

    assert result.output_json == answer
    assert non_llm_types(sink) == ["guardrail.passed"]
    assert gateway.calls == 1


async def test_guardrail_events_name_a_numeric_task_by_its_id() -> None:
    ctx, _gateway, sink, _ = make_ctx(["Too short.", "Long enough now, surely."])
    task = make_task(key="12", guardrails=GuardrailSpec(min_chars=15), guardrail_max_retries=1)

    await run_agent(ctx, make_agent(), task)

    assert [e.data["task_id"] for e in sink.events if e.type.startswith("guardrail.")] == [12, 12]


async def test_the_criteria_call_keeps_to_the_agents_time_limit() -> None:
    ctx, gateway, _sink, clock = make_ctx()

    def slow(request: Any) -> str:
        clock.advance(31)
        return "Lisbon: eat pastries."

    gateway.script = [slow, verdict(True)]
    task = make_task(guardrails=GuardrailSpec(criteria=("Cites a source",)))

    with pytest.raises(AgentError, match="exceeded its maximum execution time of 30 seconds"):
        await run_agent(ctx, make_agent(max_execution_time=30), task)
    assert gateway.purposes() == ["react"]  # the check was not asked after the time was up


async def test_the_repair_call_keeps_to_the_agents_time_limit() -> None:
    ctx, gateway, _sink, clock = make_ctx()

    def slow(request: Any) -> str:
        clock.advance(31)
        return "No JSON, sorry."

    gateway.script = [slow, '{"a": 1}']
    task = make_task(output_json_schema={"type": "object"})

    with pytest.raises(AgentError, match="exceeded its maximum execution time of 30 seconds"):
        await run_agent(ctx, make_agent(max_execution_time=30), task)
    assert gateway.calls == 1
