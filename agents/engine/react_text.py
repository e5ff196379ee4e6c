"""ReAct's words in and out: the conversation a task starts with, the Thought/Action/Observation
text protocol's instructions, and the parsing of a reply written in it (``Final Answer:`` or
``Action:``/``Action Input:``). The loop that uses them is ``react``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from agents.engine.llm import Message
from agents.engine.prompts import DEFAULTS, PromptBook
from agents.engine.runtime import RunContext
from agents.engine.specs import AgentSpec, TaskSpec
from agents.engine.tools import ToolRegistry, default_registry

# --- the text protocol parser -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    answer: str


@dataclass(frozen=True, slots=True)
class Action:
    tool: str
    tool_input: str


@dataclass(frozen=True, slots=True)
class FormatError:
    key: str  # the prompt that explains the mistake to the model

    @property
    def error(self) -> str:
        """The explanation in its default wording; a run sends its own template's text."""
        return DEFAULTS[self.key].text


_FINAL_ANSWER = re.compile(r"Final Answer\s*\**\s*:", re.IGNORECASE)
_ACTION = re.compile(
    r"\bAction\s*\d*\s*\**:[\s*]*(.*?)[\s*]*\bAction\s*\d*\s*Input\s*\d*\s*\**:[\s*]*(.*)",
    re.DOTALL,
)
_ACTION_ONLY = re.compile(r"\bAction\s*\d*\s*\**:")
_OBSERVATION = "\nObservation:"


def cut_at_observation(text: str) -> str:
    """Drop whatever the model invented after ``Observation:`` (what the stop word would do)."""
    index = text.find(_OBSERVATION)
    return text if index == -1 else text[:index]


def parse_react(text: str) -> FinalAnswer | Action | FormatError:
    """``Final Answer:`` wins (text after the last one), else ``Action``/``Action Input``."""
    finals = list(_FINAL_ANSWER.finditer(text))
    if finals:
        return FinalAnswer(_clean_answer(text[finals[-1].end() :]))
    match = _ACTION.search(text)
    if match:
        tool = match.group(1).strip().splitlines()[0] if match.group(1).strip() else ""
        tool_input = match.group(2).strip()
        if tool_input.endswith("```") and tool_input.count("```") % 2 == 1:
            tool_input = tool_input[:-3].rstrip()
        return Action(tool=tool.strip(" *`'\""), tool_input=tool_input)
    if _ACTION_ONLY.search(text):
        return FormatError("format_error_no_action_input")
    return FormatError("format_error_unreadable")


def _clean_answer(answer: str) -> str:
    answer = answer.strip()
    # "**Final Answer:** text" leaves the closing bold marker in front of the answer.
    if answer.startswith("**") and (len(answer) == 2 or answer[2] in " \n"):
        answer = answer[2:].strip()
    # A fence opened before "Final Answer:" leaves a dangling closing fence after it.
    if answer.endswith("```") and answer.count("```") % 2 == 1:
        answer = answer[:-3].rstrip()
    return answer


# --- building the task conversation -------------------------------------------------------------


def registry_for(ctx: RunContext) -> ToolRegistry:
    return ctx.tools if ctx.tools is not None else default_registry()


def prompts_for(ctx: RunContext) -> PromptBook:
    return ctx.prompts if ctx.prompts is not None else PromptBook()


def _tool_names(agent: AgentSpec, registry: ToolRegistry) -> list[str]:
    return [ref.name for ref in agent.tools if ref.name in registry]


def text_protocol_instructions(
    agent: AgentSpec, registry: ToolRegistry, prompts: PromptBook, names: list[str]
) -> str:
    return prompts.render(
        "react_system",
        role=agent.role,
        goal=agent.goal,
        backstory=agent.backstory,
        tools=registry.describe(names),
        tool_names=", ".join(names),
    )


def task_description(task: TaskSpec, prompts: PromptBook) -> str:
    """The task's description, with its approved plan under it when it has one."""
    if not task.plan_steps:
        return task.description
    # Ours: the plan is rendered under a heading, never merged into the stored task.
    numbered = "\n".join(f"{i}. {step.text}" for i, step in enumerate(task.plan_steps, 1))
    return prompts.render("task_plan", description=task.description, steps=numbered)


def build_task_messages(
    ctx: RunContext, agent: AgentSpec, task: TaskSpec, *, extra: str = ""
) -> list[Message]:
    """System prompt (persona, and the tools in text mode) and the task as the user prompt.

    With native tool calling the tools travel as function schemas, so the system prompt leaves
    out the text protocol, as upstream does; the executor adds it if it has to downgrade.
    """
    registry, prompts = registry_for(ctx), prompts_for(ctx)
    names = _tool_names(agent, registry)
    if names and not agent.llm.supports_tools:
        system = text_protocol_instructions(agent, registry, prompts, names)
    else:
        system = prompts.render(
            "react_system_no_tools", role=agent.role, goal=agent.goal, backstory=agent.backstory
        )
    description = task_description(task, prompts)
    parts: list[str] = []
    if task.context:
        parts.append(prompts.render("task_context", context="\n\n".join(task.context)))
    if task.output_json_schema:
        schema = json.dumps(task.output_json_schema)
        parts.append(prompts.render("task_output_schema", schema=schema))
    if extra:
        parts.append(extra)
    user = prompts.render(
        "react_user",
        description=description,
        expected_output=task.expected_output,
        context="".join("\n\n" + p for p in parts),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def to_text_protocol(messages: list[Message]) -> list[Message]:
    """The same conversation without native tool messages, for a call that sends no tools."""
    if not any(m.get("tool_calls") or m.get("role") == "tool" for m in messages):
        return messages
    converted: list[Message] = []
    for message in messages:
        if message.get("tool_calls"):
            lines = [str(message.get("content") or "").strip()]
            for call in message["tool_calls"]:
                function = call.get("function", {})
                lines.append(f"Action: {function.get('name', '')}")
                lines.append(f"Action Input: {function.get('arguments', '')}")
            converted.append({"role": "assistant", "content": "\n".join(x for x in lines if x)})
        elif message.get("role") == "tool":
            converted.append({"role": "user", "content": f"Observation: {message.get('content')}"})
        else:
            converted.append(message)
    return converted
