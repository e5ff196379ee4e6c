"""Structured answers negotiated per LLM: every request for an answer with a shape (the crew plan,
an agent's plan, a step review, a task's JSON output) goes through ``ask_structured``.

It tries the forms of request most structured first: a native tool call (where the call site wants
one and the LLM supports tools), a ``json_schema`` response format, ``json_object`` (JSON mode),
then plain instructions whose answer the call site reads tolerantly. A form the provider refuses
(``llm.FormUnsupportedError``) is learned for that LLM (``caller.capabilities``) and the next form
is tried in the same call; no later request sends the refused form to that LLM again. Only
refusals negotiate down: any other error is the call site's, as it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.engine.calls import BudgetScope, LLMCaller
from agents.engine.capabilities import JSON_OBJECT, JSON_SCHEMA, STREAM, TOOLS, Capabilities
from agents.engine.llm import FormUnsupportedError, LLMRequest, LLMResponse
from agents.engine.specs import LLMSpec

PLAIN = "plain"  # no structure asked of the provider: instructions in the prompt only


@dataclass(frozen=True, slots=True)
class Shape:
    """What a structured answer looks like and how to ask for it.

    ``tool``: a native tool call named ``name`` is the first form to try (planners); otherwise
    the first is the ``json_schema`` response format. ``instructions`` (the shape in words) are
    added to the last message of every form but the tool call: ``json_object`` carries no schema,
    plain text none at all, and a server that ignores ``response_format`` still reads them.
    """

    name: str
    schema: Mapping[str, Any]
    description: str = ""
    tool: bool = False
    instructions: str = ""

    def tool_spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.schema),
            },
        }


@dataclass(slots=True)
class Structured:
    """The answer, the form that produced it and how many requests it took (refusals included)."""

    response: LLMResponse
    form: str
    requests: int

    @property
    def text(self) -> str:
        """What to read the value from: the tool call's arguments in the tool form, else the text
        (a provider may answer in text despite a forced tool choice)."""
        for call in self.response.tool_calls:
            if call.arguments:
                return call.arguments
        return self.response.content


def forms_for(capabilities: Capabilities, llm: LLMSpec, shape: Shape) -> list[str]:
    """The forms to try for ``shape`` with ``llm``, most structured first, refused ones left out."""
    wanted = [TOOLS] if shape.tool and llm.supports_tools else []
    wanted += [JSON_SCHEMA, JSON_OBJECT]
    return [form for form in wanted if capabilities.accepts(llm, form)] + [PLAIN]


def request_in_form(request: LLMRequest, shape: Shape, form: str) -> LLMRequest:
    """``request`` asking for ``shape`` in ``form`` (any tools or schema it had are replaced)."""
    if form == TOOLS:
        return dataclasses.replace(
            request,
            tools=[shape.tool_spec()],
            tool_choice={"type": "function", "function": {"name": shape.name}},
            response_schema=None,
        )
    messages = list(request.messages)
    if shape.instructions and messages:
        last = messages[-1]
        messages[-1] = {**last, "content": f"{last.get('content') or ''}\n\n{shape.instructions}"}
    schema = dict(shape.schema) if form in (JSON_SCHEMA, JSON_OBJECT) else None
    response_form = JSON_OBJECT if form == JSON_OBJECT else JSON_SCHEMA
    return dataclasses.replace(
        request,
        messages=messages,
        tools=None,
        tool_choice=None,
        response_schema=schema,
        response_form=response_form,
    )


async def ask_structured(
    caller: LLMCaller,
    request: LLMRequest,
    shape: Shape,
    *,
    step_id: str | None = None,
    scope: BudgetScope | None = None,
) -> Structured:
    """Send ``request`` for an answer shaped like ``shape``, negotiating down on a refusal.

    Raises what ``caller.call`` raises for anything but a refused form (and a refusal of the
    plain form, which has nothing left to drop).
    """
    llm = request.llm
    sent = 0
    tried: set[str] = set()
    while True:
        form = next(f for f in forms_for(caller.capabilities, llm, shape) if f not in tried)
        tried.add(form)
        sent += 1
        try:
            response = await caller.call(
                request_in_form(request, shape, form), step_id=step_id, scope=scope
            )
        except FormUnsupportedError as exc:
            refused = exc.form or form
            if form == PLAIN or refused == STREAM:
                raise  # nothing simpler to send; a refused stream is the caller's to handle
            await caller.capabilities.learn(llm, refused)
            continue
        return Structured(response=response, form=form, requests=sent)
