"""Every prompt the engine sends: its key, the placeholders it offers, and its default text.

The Django side seeds ``PromptTemplate`` rows from ``DEFAULTS`` and hands the engine a
``PromptBook`` with the current versions; the engine never hard-codes prompt text elsewhere.
Templates use ``{name}`` placeholders; literal braces are written ``{{`` and ``}}``. Values are
inserted as data: braces inside a value are never read as placeholders.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")


class PromptError(ValueError):
    """A template is malformed or uses a placeholder its key does not offer."""


def parse_placeholders(text: str) -> list[str]:
    """Placeholders in ``text`` in order of appearance; raises on an unbalanced brace."""
    names: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise PromptError(
                f"unbalanced brace at character {match.start() + 1}: write {{{{ or }}}} for a literal brace"
            )
        names.append(match.group(1))
    return names


def unknown_placeholders(text: str, allowed: Iterable[str]) -> list[str]:
    allowed_set = set(allowed)
    seen: list[str] = []
    for name in parse_placeholders(text):
        if name not in allowed_set and name not in seen:
            seen.append(name)
    return seen


def render(text: str, values: Mapping[str, object]) -> str:
    """Fill placeholders once, left to right; unknown ones raise ``PromptError``."""

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        if name is None:
            raise PromptError(f"unbalanced brace at character {match.start() + 1}")
        if name not in values:
            raise PromptError(f"unknown placeholder {{{name}}}")
        return str(values[name])

    return _TOKEN.sub(substitute, text)


@dataclass(frozen=True, slots=True)
class PromptDef:
    key: str
    title: str
    placeholders: tuple[str, ...]
    text: str


_PERSONA = ("role", "goal", "backstory")

DEFAULTS: dict[str, PromptDef] = {
    p.key: p
    for p in [
        PromptDef(
            "crew_plan",
            "Crew planner",
            ("tasks",),
            "You are the planner of a crew of AI agents. Below are the crew's tasks, in order, with "
            "the agent that will do each one, that agent's tools and the tasks whose output it "
            "receives.\n\n{tasks}\n\n"
            "For every task, write a short step-by-step plan the agent can follow: concrete, "
            "executable steps, each one producing something checkable, using the listed tools where "
            "they help. Do not add steps for tasks that are not listed. Answer with JSON only, in "
            'this shape: {{"plans": [{{"task_number": 1, "steps": ["...", "..."]}}]}}',
        ),
        PromptDef(
            "crew_plan_repair",
            "Crew planner: repair",
            ("error",),
            "Your last answer was not valid JSON for this schema: {error}\n"
            'Answer again with JSON only: {{"plans": [{{"task_number": 1, "steps": ["..."]}}]}}',
        ),
        PromptDef(
            "agent_plan_system",
            "Agent planning: system",
            _PERSONA,
            "You are a strategic planner working as {role}. Produce concrete, executable plans in "
            "which every step yields a result that can be checked.",
        ),
        PromptDef(
            "agent_plan",
            "Agent planning: create plan",
            _PERSONA + ("description", "expected_output", "tools", "max_steps"),
            "## Task\n{description}\n\n## Expected output\n{expected_output}\n\n"
            "## Available tools\n{tools}\n\n"
            "Write a plan to complete this task. Principles:\n"
            "- Each step is one concrete action with a clear way to tell it is done.\n"
            "- Use as few steps as the task needs, never more than {max_steps}.\n"
            "- Do not merge actions that can fail independently; no pure 'think' or 'plan' steps.\n"
            "- Name the tool a step uses, if any; list the earlier steps it depends on.\n"
            "- The last step produces the expected output.\n"
            "End by saying READY if you can execute this plan, or NOT READY and why.",
        ),
        PromptDef(
            "agent_refine",
            "Agent planning: refine plan",
            _PERSONA + ("current_plan", "max_steps"),
            "Here is your previous plan:\n\n{current_plan}\n\n"
            "You said you were not ready to execute it. Refine it minimally to close the specific "
            "gap (at most {max_steps} steps). End by saying READY or NOT READY.",
        ),
        PromptDef(
            "agent_plan_json",
            "Agent planning: answer format for models without tool calling",
            (),
            'Answer with JSON only, in this shape: {{"plan": "a one-line summary", "steps": '
            '[{{"number": 1, "description": "...", "tool": null, "depends_on": []}}], '
            '"ready": true}}. "tool" names the tool the step uses, or null; "depends_on" lists '
            'the numbers of earlier steps whose results it needs; "ready" is false if you are '
            "not ready to execute the plan.",
        ),
        PromptDef(
            "observe",
            "Agent planning: observe a step",
            ("description", "expected_output", "step", "result", "remaining_steps"),
            "You are reviewing one step of a plan.\n\n## Task\n{description}\n\n"
            "## Expected output\n{expected_output}\n\n## Step just executed\n{step}\n\n"
            "## Its result\n{result}\n\n## Steps still to do\n{remaining_steps}\n\n"
            "Judge the step. Answer with JSON only: "
            '{{"success": true, "learned": "...", "plan_valid": true, '
            '"refinements": [{{"number": 3, "text": "..."}}], "needs_replan": false, '
            '"replan_reason": "", "goal_achieved": false}}',
        ),
        PromptDef(
            "replan",
            "Agent planning: replan",
            _PERSONA + ("description", "expected_output", "tools", "completed", "failed", "reason", "max_steps"),
            "## Task\n{description}\n\n## Expected output\n{expected_output}\n\n"
            "## Available tools\n{tools}\n\n## Steps completed so far\n{completed}\n\n"
            "## Steps that failed\n{failed}\n\n## Why a new plan is needed\n{reason}\n\n"
            "Write a new plan for the remaining work only (at most {max_steps} steps). Do not repeat "
            "completed steps. End with READY or NOT READY.",
        ),
        PromptDef(
            "step_executor",
            "Agent planning: execute a step",
            _PERSONA + ("description", "expected_output", "context", "step", "dependency_results"),
            "You are {role}. {backstory}\nYour goal: {goal}\n\n## Overall task\n{description}\n\n"
            "## Expected output of the overall task\n{expected_output}\n\n"
            "## Context from earlier tasks\n{context}\n\n"
            "## Results of the steps this one depends on\n{dependency_results}\n\n"
            "## Your current step\n{step}\n\nDo only this step and report its result.",
        ),
        PromptDef(
            "synthesis",
            "Agent planning: final answer",
            _PERSONA + ("description", "expected_output", "step_results"),
            "You are {role}. Combine the results of the steps below into one complete answer to "
            "the task.\n\n## Task\n{description}\n\n## Expected output\n{expected_output}\n\n"
            "## Step results\n{step_results}\n\nWrite the final answer only.",
        ),
        PromptDef(
            "react_system",
            "ReAct: system",
            _PERSONA + ("tools", "tool_names"),
            "You are {role}. {backstory}\nYour personal goal is: {goal}\n\n"
            "You have these tools:\n{tools}\n\n"
            "Use this format:\n\nThought: what to do next\nAction: the tool to use, one of "
            "[{tool_names}]\nAction Input: the input to the tool, as a JSON object\n"
            "Observation: the result of the action\n\n... (repeat as needed)\n\n"
            "When you know the final answer:\nThought: I now know the final answer\n"
            "Final Answer: the complete final answer",
        ),
        PromptDef(
            "react_system_no_tools",
            "ReAct: system without tools",
            _PERSONA,
            "You are {role}. {backstory}\nYour personal goal is: {goal}\n\n"
            "When you know the answer, reply in this format:\n"
            "Thought: I now know the final answer\nFinal Answer: the complete final answer",
        ),
        PromptDef(
            "react_user",
            "ReAct: the task",
            ("description", "expected_output", "context"),
            "Current task: {description}\n\nThis is the expected criteria for your final answer: "
            "{expected_output}\nYou MUST return the actual complete content as the final answer, "
            "not a summary.{context}\n\nBegin!",
        ),
        PromptDef(
            "format_error",
            "ReAct: format error",
            ("error", "tool_names"),
            "I did not understand your last reply: {error}\nEither use a tool (Thought / Action / "
            "Action Input, with Action one of [{tool_names}]) or give your answer as "
            "'Final Answer: ...'.",
        ),
        PromptDef(
            "forced_final_answer",
            "ReAct: forced final answer",
            (),
            "You have used all the iterations you are allowed. Now give your best complete final "
            "answer to the task, without using any tool.",
        ),
        PromptDef(
            "human_feedback",
            "Human feedback",
            ("feedback",),
            "A person reviewed your answer and says:\n{feedback}\n\nRevise your final answer.",
        ),
        PromptDef(
            "summarize",
            "Context window: summarise",
            ("text",),
            "Summarise the following part of a conversation, keeping every fact, number, name and "
            "result needed to finish the task:\n\n{text}",
        ),
        PromptDef(
            "plan_execute_plan",
            "Plan-execute: plan",
            (),
            "Create a step-by-step plan for this task. Respond with a JSON array of steps:\n"
            '[{{"step": 1, "action": "description"}}]',
        ),
        PromptDef(
            "plan_execute_step",
            "Plan-execute: execute step",
            ("number", "action", "log"),
            "Execute step {number}: {action}\n\nContext:\n{log}",
        ),
        PromptDef(
            "plan_execute_aggregate",
            "Plan-execute: aggregate",
            ("description", "step_outputs"),
            "Merge the outputs of the steps below into one cohesive final answer to the task. Keep "
            "finished artefacts (code, tables, lists) verbatim.\n\n## Task\n{description}\n\n"
            "## Step outputs\n{step_outputs}",
        ),
        PromptDef(
            "manager",
            "Hierarchical: manager",
            ("agents",),
            "You are the manager of a crew. Delegate each task to the best of these coworkers, "
            "using your tools 'Delegate work to coworker' and 'Ask question to coworker', then "
            "return the final answer.\n\nCoworkers:\n{agents}",
        ),
    ]
}


class PromptBook:
    """Current prompt texts by key; falls back to the defaults for keys not given."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self._texts = {key: d.text for key, d in DEFAULTS.items()}
        if overrides:
            self._texts.update(overrides)

    def text(self, key: str) -> str:
        return self._texts[key]

    def render(self, key: str, **values: object) -> str:
        allowed = DEFAULTS[key].placeholders
        return render(self._texts[key], {k: v for k, v in values.items() if k in allowed})


def validate_template(key: str, text: str) -> None:
    """Raise ``PromptError`` naming the first problem of ``text`` as the template for ``key``."""
    if key not in DEFAULTS:
        raise PromptError(f"unknown prompt key {key!r}")
    bad = unknown_placeholders(text, DEFAULTS[key].placeholders)
    if bad:
        offered = ", ".join("{" + p + "}" for p in DEFAULTS[key].placeholders) or "none"
        raise PromptError(f"placeholder {{{bad[0]}}} is not offered by {key!r} (offered: {offered})")
