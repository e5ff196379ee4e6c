"""A task's answer as JSON for its output schema (issue #18): read tolerantly, validated, and
repaired once by asking the agent's LLM again with the validation errors named.

Where the answer is asked for in that shape: inline, in the agent's own final answer (the task
prompt carries the schema, ``task_output_schema``); natively (``ask_structured``: a
``json_schema`` response format where the LLM takes one) for a ReAct agent without tools, whose
one reply is its answer, and for the synthesis of a planned agent. Whatever produced it, the
answer is read here; only an answer that does not fit costs the one repair call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import referencing
import referencing.exceptions
import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError

from agents.engine.calls import BudgetScope
from agents.engine.llm import LLMRequest, Message
from agents.engine.patterns import PatternTooSlow, search
from agents.engine.plan_parsing import extract_json_array, extract_json_object
from agents.engine.prompts import PromptBook
from agents.engine.specs import AgentSpec
from agents.engine.structured import Shape, ask_structured

MAX_ERRORS = 10  # validation errors named in a repair request or a failure


class OutputSchemaError(Exception):
    """The answer still does not match the task's output schema after its one repair, or the
    schema cannot be used (a reference that does not resolve, ``patternProperties``)."""


# Keywords whose value maps names to schemas, and keywords whose value is data, never a schema.
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_NOT_SCHEMAS = frozenset({"const", "enum", "default", "examples", "dependentRequired", "required"})


def subschemas(schema: Any) -> Iterator[dict[str, Any]]:
    """``schema`` and every schema inside it, by keyword (a property named ``pattern`` is a name,
    not the keyword). A dict under an unknown keyword counts: a ``$ref`` may point into it.
    Iterative, so a deep schema costs no recursion."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        yield node
        for key, value in node.items():
            if key in _NOT_SCHEMAS:
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, (dict, list)):
                stack.append(value)


# When one validation's patterns must be done by: a pattern on the items of a long list would
# otherwise take its time limit once per item, all in the event loop.
PATTERNS_BUDGET = 1.0  # seconds, for all the patterns of one answer
_pattern_deadline: ContextVar[float] = ContextVar("_pattern_deadline", default=float("inf"))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's ``pattern`` keyword, on the engine with a time limit (``patterns``)."""
    if not validator.is_type(instance, "string"):
        return
    try:
        found = search(pattern, instance, _pattern_deadline.get() - time.monotonic())
    except PatternTooSlow:
        yield ValidationError(f"the pattern {pattern!r} took too long to check")
        return
    except regex.error as exc:
        raise OutputSchemaError(f"The task's output schema has a pattern the engine cannot read: {pattern!r}") from exc
    if not found:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# Never fetches: an empty registry resolves local references (#/$defs/...) and refuses the rest,
# where jsonschema's default would fetch any http(s) $ref, synchronously, in the event loop.
# ``patternProperties`` is refused (``schema_errors``): jsonschema also applies it inside
# additionalProperties and unevaluatedProperties, with Python's re and no time limit.
_Validator = validators.extend(Draft202012Validator, {"pattern": _pattern})


def validator_for(schema: Mapping[str, Any]) -> Any:
    """A Draft 2020-12 validator for ``schema`` that reaches nothing outside it."""
    return _Validator(dict(schema), registry=referencing.Registry())


def unresolved_ref(exc: referencing.exceptions.Unresolvable) -> str:
    """The reference as a schema writes it (``#/$defs/x``, ``#name``, a URI)."""
    cause = getattr(exc, "_wrapped", exc)  # jsonschema wraps referencing's own error
    if isinstance(cause, referencing.exceptions.PointerToNowhere):
        return f"#{cause.ref}"
    if isinstance(cause, referencing.exceptions.NoSuchAnchor):
        return f"#{cause.anchor}"
    return str(exc.ref)


def schema_errors(value: Any, schema: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``value`` for ``schema``, one plain sentence per error, at most
    ``MAX_ERRORS``; empty when it fits.

    Raises ``OutputSchemaError`` when the fault is the schema's (a reference that does not
    resolve, ``patternProperties``): no answer could fit it, so no repair is asked.
    """
    if any(isinstance(s.get("patternProperties"), dict) for s in subschemas(schema)):
        raise OutputSchemaError("The task's output schema uses patternProperties, which is not supported.")
    deadline = _pattern_deadline.set(time.monotonic() + PATTERNS_BUDGET)
    try:
        validator = validator_for(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: (list(e.absolute_path), e.message))
    except SchemaError as exc:  # checked when saved; a broken schema is the task's fault, say so
        return [f"the task's schema is invalid: {exc.message}"]
    except referencing.exceptions.Unresolvable as exc:
        raise OutputSchemaError(
            f"The task's output schema has a reference that cannot be resolved: {unresolved_ref(exc)}"
        ) from exc
    finally:
        _pattern_deadline.reset(deadline)
    out: list[str] = []
    for error in errors[:MAX_ERRORS]:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(f"at ${where}: {error.message}" if where else error.message)
    return out


def read_json(text: str, schema: Mapping[str, Any]) -> Any:
    """The JSON value in ``text`` (fences, prose and weak models' slips tolerated), or ``None``.

    The schema's root type says what to look for: an object or an array; anything else must be
    the whole text as JSON.
    """
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    root = schema.get("type")
    if root == "array":
        return extract_json_array(stripped)
    if root == "object" or root is None:
        found = extract_json_object(stripped)
        if found is not None or root == "object":
            return found
        return extract_json_array(stripped)
    return None


def as_text(value: Any) -> str:
    """The JSON text a structured answer is stored and passed on as (later tasks read it)."""
    return json.dumps(value, ensure_ascii=False, indent=2)


def as_compact(value: Any) -> str:
    """The JSON text a structured answer's built-in checks read: no indentation to count."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def strings_in(value: Any) -> list[str]:
    """The string values inside ``value``, as written (a quote is a quote, not ``\\"``)."""
    found: list[str] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


# Runs one LLM call within the agent's time limit (``max_execution_time``).
Timed = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


async def untimed(call: Callable[[], Awaitable[Any]]) -> Any:
    return await call()


def _problems(text: str, schema: Mapping[str, Any]) -> tuple[Any, list[str]]:
    value = read_json(text, schema)
    if value is None:
        return None, ["the answer holds no JSON value"]
    return value, schema_errors(value, schema)


async def structure_answer(
    ctx: Any,
    agent: AgentSpec,
    schema: Mapping[str, Any],
    answer: str,
    conversation: list[Message],
    *,
    purpose: str,
    scope: BudgetScope | None,
    timed: Timed = untimed,
) -> Any:
    """The value of ``answer`` for ``schema``; one repair call when it does not fit.

    ``conversation`` is what the answer replied to (its last message may be the answer itself).
    The repair asks in the most structured form the LLM takes, naming the validation errors.
    Raises ``OutputSchemaError`` when the repaired answer does not fit either. ``timed`` runs the
    repair call within the agent's time limit.
    """
    value, errors = _problems(answer, schema)
    if not errors:
        return value
    book: PromptBook = ctx.prompts if ctx.prompts is not None else PromptBook()
    schema_text = json.dumps(schema, ensure_ascii=False)
    messages = list(conversation)
    if not messages or messages[-1].get("role") != "assistant":
        messages.append({"role": "assistant", "content": answer})
    messages.append({
        "role": "user",
        "content": book.render("output_json_repair", errors="\n".join(f"- {e}" for e in errors), schema=schema_text),
    })
    request = LLMRequest(llm=agent.llm, messages=messages, purpose=purpose, stream=agent.llm.stream)
    shape = Shape(name="answer", schema=schema)
    repaired = await timed(lambda: ask_structured(ctx.llm, request, shape, scope=scope))
    value, errors = _problems(repaired.text, schema)
    if errors:
        raise OutputSchemaError(
            "The answer does not match the task's output schema, even after one repair: "
            + "; ".join(errors)
        )
    return value


async def ask_answer(
    ctx: Any,
    agent: AgentSpec,
    schema: Mapping[str, Any],
    messages: list[Message],
    *,
    scope: BudgetScope | None,
) -> tuple[str, list[Message]]:
    """A ReAct agent without tools answers in one reply: asked natively in the schema's shape
    (``json_schema``, else JSON mode, else the instructions already in the task prompt)."""
    request = LLMRequest(llm=agent.llm, messages=list(messages), purpose="react", stream=agent.llm.stream)
    answer = await ask_structured(ctx.llm, request, Shape(name="answer", schema=schema), scope=scope)
    text = answer.text
    return text, [*messages, {"role": "assistant", "content": text}]
