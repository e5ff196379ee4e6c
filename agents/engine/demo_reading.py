"""Reading the engine's prompts for the offline demo model (``agents.engine.demo``): the task, its
expected output, the tools offered, a tool's result, and the text helpers its answers use."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from agents.engine.llm import LLMRequest, Message, ToolCall

CLIP = 160
# A simple arithmetic expression such as "12 * 7" or "3.5+4". "-" and "/" need spaces around
# them so dates (2024-01-05, 1/2/2024) and ranges are not taken for sums.
EXPRESSION = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:(?:\s*[*+×]\s*|\s+[-/]\s+)\d+(?:\.\d+)?)+(?![\w.])"
)


# -- reading the messages ------------------------------------------------------------------


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def message_chars(message: Message) -> int:
    calls = message.get("tool_calls") or []
    return len(content_text(message.get("content"))) + sum(len(json.dumps(c)) for c in calls)


def user_text(messages: Iterable[Message]) -> str:
    """What the engine wrote (system and user messages), oldest first."""
    return "\n\n".join(
        content_text(m.get("content")) for m in messages if m.get("role") in ("system", "user")
    )


def all_text(messages: Iterable[Message]) -> str:
    return "\n\n".join(content_text(m.get("content")) for m in messages)


def section(text: str, title: str) -> str:
    """The body of the last ``## <title>`` section in ``text``."""
    return find(rf"(?m)^##[ \t]*{re.escape(title)}[ \t]*\n(.*?)(?=^##[ \t]|\Z)", text)


def task(request: LLMRequest) -> tuple[str, str]:
    """The task (or step) being worked on and its expected output, from the engine's prompts."""
    text = user_text(request.messages)
    task = (
        find(r"(?m)^##[ \t]*Your current step[ \t]*\n(.*?)(?=\n\n|\Z)", text)
        or find(r"(?m)^Execute step \d+:[ \t]*(.*?)(?=\n\n|\Z)", text)
        or find(r"Current task:[ \t]*(.*?)(?=\n\nThis is the expected criteria|\Z)", text)
        or find(r"(?m)^##[ \t]*Task[ \t]*\n(.*?)(?=\n##[ \t]|\Z)", text)
        or find(r"(?m)^##[ \t]*Overall task[ \t]*\n(.*?)(?=\n##[ \t]|\Z)", text)
        or find(r"(?m)^##[ \t]*Previous plan[ \t]*\n(.*?)(?=\n##[ \t]|\Z)", text)
        or find(r"Here is your previous plan:\s*(.*?)(?=\n\nYou said|\Z)", text)
        or fallback_task(request.messages)
    )
    # A crew plan appended to the description is guidance, not part of the task to restate.
    task = re.split(r"\n\s*Plan for this task:", task, maxsplit=1)[0].strip()
    expected = (
        find(r"This is the expected criteria for your final answer:[ \t]*(.*?)(?=\n|\Z)", text)
        or find(
            r"(?m)^##[ \t]*Expected output(?: of the overall task)?[ \t]*\n(.*?)(?=\n##|\Z)", text
        )
        or "Complete the task successfully"
    )
    return squash(task) or "the task", squash(expected)


def find(pattern: str, text: str) -> str:
    """The first group of the last match of ``pattern`` (dot matches newlines), stripped."""
    matches = list(re.finditer(pattern, text, re.S))
    return matches[-1].group(1).strip() if matches else ""


def fallback_task(messages: list[Message]) -> str:
    """The first user message, minus the engine's own instructions."""
    for message in messages:
        if message.get("role") == "user":
            text = content_text(message.get("content"))
            text = re.split(r"Create a step-by-step plan for this task", text, maxsplit=1)[0]
            if text.strip():
                return text
    for message in messages:
        if message.get("role") == "system":
            return content_text(message.get("content"))
    return ""


def tool_result(messages: list[Message]) -> str | None:
    """The latest tool output in the conversation (native ``tool`` message or ``Observation:``).

    Only messages after the task count: the ReAct system prompt itself explains the format
    with an "Observation:" line.
    """
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
    for message in reversed(messages[first_user + 1 :]):
        content = content_text(message.get("content"))
        if message.get("role") == "tool":
            return content.strip()
        if "Observation:" in content:
            return content.rsplit("Observation:", 1)[1].strip().split("\n\n")[0].strip()
    return None


def function_names(tools: list[dict[str, Any]] | None) -> list[str]:
    names: list[str] = []
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


def calculator(tools: list[dict[str, Any]] | None) -> tuple[str, str] | None:
    """The calculator tool's name and the argument that takes the expression, if offered."""
    for tool in tools or []:
        function = tool.get("function") or {}
        if function.get("name") != "calculator":
            continue
        properties = (function.get("parameters") or {}).get("properties") or {}
        if "expression" in properties or not properties:
            return "calculator", "expression"
        strings = [k for k, v in properties.items() if (v or {}).get("type") == "string"]
        return ("calculator", strings[0]) if len(strings) == 1 else None
    return None


def text_protocol_offers(messages: list[Message], tool: str) -> bool:
    """Whether a ReAct system prompt lists ``tool`` among its Action names."""
    match = re.search(r"Action: the tool to use, one of \[([^\]]*)\]", user_text(messages))
    return bool(match) and tool in [n.strip() for n in match.group(1).split(",")]


def forced_function(request: LLMRequest) -> str | None:
    """The function the caller forces with ``tool_choice``, or the only one it offers."""
    choice = request.tool_choice
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        if isinstance(name, str):
            return name
    names = function_names(request.tools)
    if choice == "none" or not names:
        return None
    return names[0] if len(names) == 1 else None


def tool_call(name: str, arguments: dict[str, Any]) -> ToolCall:
    return ToolCall(id="demo_call_1", name=name, arguments=json.dumps(arguments))


# -- text helpers --------------------------------------------------------------------------


def expression(text: str) -> str | None:
    match = EXPRESSION.search(text)
    return re.sub(r"\s+", " ", match.group(0).replace("×", "*")).strip() if match else None


def sentences(text: str) -> list[str]:
    """Sentences and list items of ``text``, without their closing punctuation."""
    pieces = re.split(r"(?<=[.!?;])\s+|\n+\s*[-*]?\s*", text)
    cleaned = [p.strip(" -*").rstrip(".;!") for p in pieces]
    return [p for p in cleaned if len(p) > 3]


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def clip(text: str, limit: int = CLIP) -> str:
    text = squash(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def word_chunks(text: str, words: int) -> list[str]:
    """Pieces of ``text`` of a few words each that join back to ``text`` exactly."""
    tokens = re.findall(r"\S+\s*|\s+", text)
    return ["".join(tokens[i : i + words]) for i in range(0, len(tokens), words)]
