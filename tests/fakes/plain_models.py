"""Plain-server modes for ``FakeLLMServer``: what local OpenAI-compatible servers and weak models
really answer, as functions to set as ``server.default`` (or to ``add``), one reply per request.

Each mode is a ``RecordedRequest -> Reply`` function; the refusing ones wrap another mode, which
answers whatever they let through::

    from tests.fakes.plain_models import answers, forms_sent, refuses_json_schema

    server.default = refuses_json_schema(answers({"plans": [...]}))
    ...
    assert forms_sent(server) == ["json_schema", "json_object"]

Modes:

- ``answers(value)``: a capable model. Asked with a forced tool choice it calls that tool with
  ``value`` as arguments; otherwise it answers ``value`` as JSON text (a ``str`` as it is).
  ``value`` may also be a function of the request.
- ``refuses_json_schema(inner)``: llama-cpp-python's server. Its request model allows only
  ``response_format.type`` "text" or "json_object"; FastAPI's validation error reaches its route
  error handler, which answers **500** ``internal_server_error`` with the pydantic error text.
  Everything else goes to ``inner``.
- ``refuses_json_object(inner)``: LM Studio, which takes ``json_schema`` but answers 400
  ``'response_format.type' must be 'json_schema' or 'text'`` to ``json_object``.
- ``refuses_tools(inner, style=)``: a server that will not take ``tools``. ``style="ollama"``:
  400 ``<model> does not support tools``; ``"llama_server"``: llama.cpp's ``llama-server``
  without ``--jinja``, **500** ``tools param requires --jinja flag``.
- ``prose(text)``: a weak model that answers prose whatever it is asked (no tool call, no JSON).
- ``stuck(action, action_input)``: a weak model stuck repeating the same action: the same
  ``Thought/Action/Action Input`` text every turn, never a ``Final Answer:`` (with tools in the
  request, the same native tool call every turn instead).

``forms_sent(server)`` names the form of every request so far: "tools", "json_schema",
"json_object" or "plain" (what a test counts to check that a refused form is not sent again).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

__all__ = [
    "LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR",
    "answers",
    "form_of",
    "forms_sent",
    "prose",
    "refuses_json_object",
    "refuses_json_schema",
    "refuses_tools",
    "stuck",
]

Mode = Callable[[RecordedRequest], Reply]

# What llama-cpp-python's server (FastAPI, pydantic 2) says when ``response_format.type`` is
# "json_schema": the validation error as ``str()`` gives it, in a 500 ``internal_server_error``.
LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR = (
    "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}]"
)


def form_of(request: RecordedRequest) -> str:
    """How ``request`` asked for a structured answer: tools, json_schema, json_object or plain."""
    body = request.body if isinstance(request.body, dict) else {}
    if body.get("tools"):
        return "tools"
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object"):
        return str(response_format["type"])
    return "plain"


def forms_sent(server: FakeLLMServer) -> list[str]:
    """The form of every request the server received, in order."""
    return [form_of(r) for r in list(server.requests)]


def _forced_tool(request: RecordedRequest) -> str | None:
    body = request.body if isinstance(request.body, dict) else {}
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name") or "") or None
    tools = body.get("tools") or []
    if len(tools) == 1 and isinstance(tools[0], dict):
        return str((tools[0].get("function") or {}).get("name") or "") or None
    return None


def answers(value: Any | Callable[[RecordedRequest], Any]) -> Mode:
    """A model that answers what it is asked in the form it is asked (see the module doc)."""

    def reply(request: RecordedRequest) -> Reply:
        found = value(request) if callable(value) else value
        tool = _forced_tool(request)
        if tool is not None:
            return Reply.tool_call(tool, found if isinstance(found, (dict, str)) else json.dumps(found))
        return Reply.text(found) if isinstance(found, str) else Reply.json(found)

    return reply


def refuses_json_schema(inner: Mode) -> Mode:
    """llama-cpp-python's server: a ``json_schema`` response format is a 500 validation error."""

    def reply(request: RecordedRequest) -> Reply:
        if form_of(request) == "json_schema":
            return Reply.error(500, LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR, type_="internal_server_error")
        return inner(request)

    return reply


def refuses_json_object(inner: Mode) -> Mode:
    """LM Studio: ``json_object`` is a 400; ``json_schema`` and plain text pass to ``inner``."""

    def reply(request: RecordedRequest) -> Reply:
        if form_of(request) == "json_object":
            return Reply.error(
                400, "'response_format.type' must be 'json_schema' or 'text'", type_="invalid_request_error"
            )
        return inner(request)

    return reply


def refuses_tools(inner: Mode, *, style: Literal["ollama", "llama_server"] = "ollama") -> Mode:
    """A server that will not take ``tools`` (Ollama's 400, or llama-server's 500 without --jinja)."""

    def reply(request: RecordedRequest) -> Reply:
        if form_of(request) != "tools":
            return inner(request)
        if style == "llama_server":
            return Reply.error(500, "tools param requires --jinja flag", type_="server_error")
        model = (request.model or "fake").split("/")[-1]
        return Reply.error(400, f"registry.ollama.ai/library/{model} does not support tools", type_="api_error")

    return reply


PROSE = (
    "Sure! To do this task well, first I would look into the topic carefully, then I would "
    "gather the most important facts, and finally I would write everything up clearly so the "
    "reader understands it. Let me know if you need anything else!"
)


def prose(text: str = PROSE) -> Mode:
    """A weak model: the same prose to every request, whatever form it asks for."""

    def reply(request: RecordedRequest) -> Reply:
        return Reply.text(text)

    return reply


def stuck(action: str = "search", action_input: dict[str, Any] | None = None) -> Mode:
    """A weak model stuck on one action: the same ReAct text (or native call) every turn."""
    arguments = action_input if action_input is not None else {"query": "the task"}

    def reply(request: RecordedRequest) -> Reply:
        if form_of(request) == "tools":
            return Reply.tool_call(action, arguments)
        return Reply.text(
            f"Thought: I should use the {action} tool.\nAction: {action}\n"
            f"Action Input: {json.dumps(arguments)}"
        )

    return reply
