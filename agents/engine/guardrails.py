"""Checking a task's answer before a later task takes it (issue #18): its JSON shape first, then
the task's guardrails, with the reasons of a failed check sent back to the agent for another try.

Order, cheapest first: the output schema (read and validated locally; one repair call only when
the answer does not fit, and a second misfit fails the task: ``output_json``); then the built-in
checks (length range, must contain, must not contain, a regular expression: no LLM call); then,
only when those pass, one LLM call (purpose ``guardrail``) judging the plain-language criteria.
A failure emits ``guardrail.failed`` with its reasons and, while retries are left
(``guardrail_max_retries``), hands the agent its own conversation with its answer and the reasons
appended: what is re-run is the agent's final answer, never the whole plan.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from agents.engine.calls import BudgetScope
from agents.engine.events import task_ref
from agents.engine.llm import LLMRequest, Message
from agents.engine.output_json import (
    Timed,
    as_compact,
    as_text,
    strings_in,
    structure_answer,
    untimed,
)
from agents.engine.patterns import MAX_SEARCHED, PatternTooSlow, search
from agents.engine.plan_parsing import extract_json_object
from agents.engine.prompts import PromptBook
from agents.engine.runtime import RunContext
from agents.engine.specs import AgentSpec, GuardrailSpec, TaskSpec
from agents.engine.structured import Shape, ask_structured

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "passed": {"type": "boolean"},
        "reasons": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["passed", "reasons"],
}

# Another pass of the agent on a conversation: its answer and the conversation it ended.
Redo = Callable[[list[Message]], Awaitable[tuple[str, list[Message] | None]]]


class GuardrailError(Exception):
    """The answer failed its checks with no retry left; the message names the reasons."""


@dataclass(slots=True)
class Checked:
    output: str
    output_json: Any = None  # the answer's value when the task has an output schema
    conversation: list[Message] | None = None


def builtin_reasons(checks: GuardrailSpec, answer: str, strings: Sequence[str] = ()) -> list[str]:
    """Why ``answer`` fails the built-in checks (no LLM call); empty when it passes.

    A JSON answer is checked as its compact text (lengths, the pattern); ``strings``, its string
    values as written, count for must (not) contain too, so ``say "hi"`` matches ``"say \\"hi\\""``.
    The pattern runs with a time limit (``patterns``): too slow is a failed check.
    """
    reasons: list[str] = []
    length = len(answer.strip())
    if checks.min_chars is not None and length < checks.min_chars:
        reasons.append(f"The answer has {length} characters; it needs at least {checks.min_chars}.")
    if checks.max_chars is not None and length > checks.max_chars:
        reasons.append(f"The answer has {length} characters; it may have at most {checks.max_chars}.")
    folded = [answer.casefold(), *(s.casefold() for s in strings)]
    for text in checks.must_contain:
        if not any(text.casefold() in f for f in folded):
            reasons.append(f"The answer must contain {text!r}.")
    for text in checks.must_not_contain:
        if text and any(text.casefold() in f for f in folded):
            reasons.append(f"The answer must not contain {text!r}.")
    if checks.pattern and len(answer) > MAX_SEARCHED:
        reasons.append(f"The answer is too long to check against the pattern (over {MAX_SEARCHED} characters).")
    elif checks.pattern:
        try:
            if not search(checks.pattern, answer):
                reasons.append(f"The answer does not match the pattern {checks.pattern!r}.")
        except PatternTooSlow:
            reasons.append("The pattern took too long to check against the answer.")
        except regex.error:  # checked when the task was saved
            reasons.append(f"The pattern {checks.pattern!r} is not a regular expression the engine reads.")
    return reasons


async def criteria_reasons(
    ctx: RunContext, agent: AgentSpec, task: TaskSpec, answer: str, *, scope: BudgetScope | None
) -> list[str]:
    """Why ``answer`` fails the task's criteria, as one LLM call judges them (purpose
    ``guardrail``, through the same caller: budgets, rate limits and cancellation apply).

    A verdict that cannot be read counts as a failure naming that: a check nobody could read has
    not passed.
    """
    book: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
    prompt = book.render(
        "guardrail",
        description=task.description,
        expected_output=task.expected_output,
        criteria="\n".join(f"- {c}" for c in task.guardrails.criteria),
        answer=answer,
    )
    request = LLMRequest(llm=agent.llm, messages=[{"role": "user", "content": prompt}], purpose="guardrail")
    shape = Shape(name="guardrail_verdict", schema=VERDICT_SCHEMA)
    reply = (await ask_structured(ctx.llm, request, shape, scope=scope)).text
    verdict = extract_json_object(reply, "passed")
    if verdict is None or not isinstance(verdict.get("passed"), bool):
        return [f"The check's verdict could not be read: {reply.strip()[:200] or '(empty)'}"]
    if verdict["passed"]:
        return []
    reasons = verdict.get("reasons")
    found = [str(r).strip() for r in reasons if str(r).strip()] if isinstance(reasons, list) else []
    return found or ["The answer does not meet the criteria."]


async def check_answer(
    ctx: RunContext,
    agent: AgentSpec,
    task: TaskSpec,
    output: str,
    conversation: list[Message] | None,
    *,
    scope: BudgetScope | None,
    redo: Redo,
    base_messages: Callable[[], list[Message]],
    timed: Timed = untimed,
) -> Checked:
    """``output`` once it fits the task's schema and passes its checks, after as many retries
    (``redo`` with the reasons appended) as ``task.guardrail_max_retries`` allows.

    ``base_messages`` builds the task conversation for an agent that kept none (a planned run);
    ``timed`` runs each check's LLM call (the repair, the criteria) within the agent's time limit.
    Raises ``OutputSchemaError`` or ``GuardrailError``; both end the task with their message.
    """
    schema = task.output_json_schema
    checks = task.guardrails
    if schema is None and not checks.active:
        return Checked(output, None, conversation)
    book: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
    attempt = 0
    while True:
        attempt += 1
        value = None
        if schema is not None:
            history = conversation if conversation is not None else base_messages()
            value = await structure_answer(
                ctx, agent, schema, output, history,
                purpose="react" if conversation is not None else "synthesis", scope=scope, timed=timed,
            )
            output = as_text(value)
        if not checks.active:
            return Checked(output, value, conversation)
        if schema is not None:
            reasons = builtin_reasons(checks, as_compact(value), strings_in(value))
        else:
            reasons = builtin_reasons(checks, output)
        if not reasons and checks.criteria:
            reasons = await timed(functools.partial(criteria_reasons, ctx, agent, task, output, scope=scope))
        if not reasons:
            await ctx.emit("guardrail.passed", {"task_id": task_ref(task.key), "attempt": attempt})
            return Checked(output, value, conversation)
        retrying = attempt <= task.guardrail_max_retries
        await ctx.emit(
            "guardrail.failed",
            {"task_id": task_ref(task.key), "attempt": attempt, "reasons": reasons, "retrying": retrying},
        )
        if not retrying:
            tries = f"{attempt} attempts" if attempt > 1 else "1 attempt"
            raise GuardrailError(f"The answer failed its checks after {tries}: " + " ".join(reasons))
        history = list(conversation) if conversation is not None else base_messages()
        if history and history[-1].get("role") == "assistant":
            history[-1] = {**history[-1], "content": output}  # the answer as checked (a JSON's text)
        else:
            history.append({"role": "assistant", "content": output})
        listed = "\n".join(f"- {r}" for r in reasons)
        history.append({"role": "user", "content": book.render("guardrail_retry", reasons=listed)})
        output, conversation = await redo(history)
        if conversation is None:
            conversation = history


def describe_checks(checks: GuardrailSpec) -> str:
    """The checks in words, for the crew planner (so its plan aims at them)."""
    parts: list[str] = [*checks.criteria]
    if checks.min_chars is not None:
        parts.append(f"at least {checks.min_chars} characters")
    if checks.max_chars is not None:
        parts.append(f"at most {checks.max_chars} characters")
    parts += [f"contains {json.dumps(t, ensure_ascii=False)}" for t in checks.must_contain]
    parts += [f"does not contain {json.dumps(t, ensure_ascii=False)}" for t in checks.must_not_contain]
    if checks.pattern:
        parts.append(f"matches the regular expression {checks.pattern}")
    return "; ".join(parts)
