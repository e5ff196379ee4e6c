"""What each prompt template is for, in words for the admins who edit them: its group, a sentence
on when the engine sends it, and sample values for its preview.

Data, kept beside the defaults (``agents.engine.prompt_texts``) but translatable, so it lives on
the Django side. A key the engine gains before this table does is listed under "Other" with its
title: the page never hides a prompt the engine sends.
"""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

GROUPS: dict[str, Promise] = {
    "crew_plan": _("Crew planner"),
    "agent_plan": _("Agent planning"),
    "react": _("ReAct agent"),
    "task": _("Task prompts"),
    "guardrail": _("Guardrails"),
    "knowledge": _("Knowledge and memory"),
    "tool": _("Tool results"),
    "plan_execute": _("Plan-execute agent"),
    "manager": _("Hierarchical crews (manager)"),
    "labels": _("Labels and short texts"),
    "other": _("Other"),
}

_P = tuple[str, Promise]

PURPOSES: dict[str, _P] = {
    "crew_plan": ("crew_plan", _("Sent when a person presses Draft plan, or a run of a planning crew starts without an approved plan: asks for a step-by-step plan for every task.")),
    "crew_plan_repair": ("crew_plan", _("Sent after the planner's answer could not be read as a plan, with the reason, asking for a corrected one.")),
    "crew_plan_cut_off": ("crew_plan", _("Sent when the planner's answer was cut off at its length limit, asking for a shorter plan.")),
    "json_answer": ("crew_plan", _("Added to a request for a JSON answer when the model has no JSON schema mode, with the schema the answer must match.")),
    "crew_plan_task": ("crew_plan", _("One task in the listing the crew planner receives: its number, name, description and expected output.")),
    "crew_plan_task_unnamed": ("crew_plan", _("The name the crew planner sees for a task without a name.")),
    "crew_plan_task_agent": ("crew_plan", _("Tells the crew planner which agent (role and goal) does a task.")),
    "crew_plan_task_backstory": ("crew_plan", _("Adds the agent's backstory to a task in the planner's listing, when it has one.")),
    "crew_plan_task_tools": ("crew_plan", _("Lists the tools the task's agent may use, for the crew planner.")),
    "crew_plan_task_no_tools": ("crew_plan", _("Tells the crew planner that the task's agent has no tools.")),
    "crew_plan_task_manager": ("crew_plan", _("Tells the crew planner that the manager of a hierarchical crew assigns this task.")),
    "crew_plan_task_context": ("crew_plan", _("Tells the crew planner which earlier tasks' output a task receives.")),
    "crew_plan_task_output_schema": ("crew_plan", _("Tells the crew planner the JSON schema a task's answer must match, when the task has one.")),
    "crew_plan_task_checks": ("crew_plan", _("Tells the crew planner the checks a task's answer must pass, when the task has guardrails.")),
    "crew_plan_keep": ("crew_plan", _("Sent when a plan is redrafted: the steps a person pinned, which the planner must keep.")),
    "crew_plan_feedback": ("crew_plan", _("Sent when a person asks to regenerate a task's steps with a note: the note for the planner.")),
    "agent_plan_system": ("agent_plan", _("The system message of an agent that plans its own work (Plan-and-Act), with its role, goal and backstory.")),
    "agent_plan": ("agent_plan", _("Sent when a planning agent starts a task: asks it for a plan of at most the allowed number of steps.")),
    "agent_refine": ("agent_plan", _("Sent after the first plan to ask the agent to refine it, when refining is on.")),
    "agent_plan_json": ("agent_plan", _("Added to planning requests for models without tool calling: the JSON format of the plan.")),
    "observe": ("agent_plan", _("Sent after each step of a plan: asks the agent to judge the step's outcome and decide whether to go on, replan or stop.")),
    "replan": ("agent_plan", _("Sent when a step failed or the observer asks for a new plan: asks for the remaining steps.")),
    "step_executor": ("agent_plan", _("Sent to carry out one step of an agent's plan, with the task, the step and the results it depends on.")),
    "step_current": ("agent_plan", _("Names the step to do now inside the step prompt.")),
    "step_tool": ("agent_plan", _("Names the tool a step must use, when the plan says so.")),
    "step_result": ("agent_plan", _("One finished step's result, as later steps and the final answer see it.")),
    "step_result_failed": ("agent_plan", _("One failed step's result, as later steps and the final answer see it.")),
    "step_dependency_failed": ("agent_plan", _("Tells a step that a step it depends on failed, with that step's error.")),
    "plan_step_tool": ("agent_plan", _("A listed step's tool, in a plan shown back to the agent.")),
    "plan_step_after": ("agent_plan", _("The steps a listed step comes after, in a plan shown back to the agent.")),
    "fallback_plan": ("agent_plan", _("Sent when a planning agent falls back to working step by step (ReAct): the plan it had.")),
    "step_last": ("agent_plan", _("Marks the last step of an approved plan, so the agent gives its final answer there.")),
    "synthesis": ("agent_plan", _("Sent when every step is done: asks for the task's final answer from the steps' results.")),
    "no_step_results": ("agent_plan", _("Stands in the final-answer prompt when no step produced a result.")),
    "step_outcome": ("agent_plan", _("Adds a reviewed step's outcome to an observe prompt that has no {outcome} placeholder of its own.")),
    "react_system": ("react", _("The system message of an agent that works step by step with tools (ReAct): its persona, its tools and the answer format.")),
    "react_system_no_tools": ("react", _("The system message of a ReAct agent without tools: its persona only.")),
    "react_user": ("react", _("The task as a ReAct agent receives it: description, expected output and context.")),
    "format_error": ("react", _("Sent when the agent's reply did not follow the answer format, with what was wrong.")),
    "format_error_no_action_input": ("react", _("Sent when the agent named an action but gave it no input.")),
    "format_error_unreadable": ("react", _("Sent when the agent's reply was neither a final answer nor an action.")),
    "format_error_empty": ("react", _("Sent when the agent's reply was empty.")),
    "forced_final_answer": ("react", _("Sent when the agent reached its limit of turns: asks for its final answer now.")),
    "human_feedback": ("react", _("Sent with a person's feedback on a task that asks for human input.")),
    "summarize": ("react", _("Sent when the conversation no longer fits the context window: asks for a summary of earlier messages.")),
    "task_plan": ("task", _("Added to a task's prompt when the run follows an approved plan: the plan's steps.")),
    "task_context": ("task", _("Added to a task's prompt with the output of earlier tasks.")),
    "task_output_schema": ("task", _("Added to a task's prompt when its answer must be JSON for a schema.")),
    "output_json_repair": ("task", _("Sent when an answer did not match the task's JSON schema, with the errors, asking for the answer again.")),
    "guardrail": ("guardrail", _("Sent to check a task's answer against its guardrail criteria; the model answers passed or not, with reasons.")),
    "guardrail_retry": ("guardrail", _("Sent back to the agent when its answer failed a guardrail, with the reasons, asking for a better answer.")),
    "knowledge": ("knowledge", _("Added to a task's prompt before it runs: the passages of the agent's and the crew's knowledge sources that best match the task, with their source names.")),
    "memory_recalled": ("knowledge", _("Added to a task's prompt when the crew's memory is on: what the crew remembers from earlier runs that best matches the task.")),
    "memory": ("knowledge", _("Sent after a task of a crew with memory on: asks for a few lines worth remembering from the task's answer, feedback and failed checks.")),
    "tool_unknown": ("tool", _("The result the agent sees when it called a tool that does not exist.")),
    "tool_unnamed": ("tool", _("The result the agent sees when it asked for a tool without naming one.")),
    "tool_invalid_args": ("tool", _("The result the agent sees when a tool's arguments did not match its schema.")),
    "tool_repeated": ("tool", _("The result the agent sees when it made the same call twice in a row.")),
    "tool_usage_limit": ("tool", _("The result the agent sees when a tool reached its usage limit.")),
    "tool_failed": ("tool", _("The result the agent sees when a tool failed.")),
    "tool_failed_retried": ("tool", _("The result the agent sees when a tool failed on every try.")),
    "tool_denied": ("tool", _("The result the agent sees when a person denied a tool call.")),
    "tool_denied_note": ("tool", _("The result the agent sees when a person denied a tool call with a note.")),
    "tool_not_run": ("tool", _("The result of a tool call the agent asked for after its final answer (not run).")),
    "tool_no_output": ("tool", _("The result of a tool that returned nothing.")),
    "plan_execute_plan": ("plan_execute", _("Sent when a plan-execute agent starts a task: asks for its plan.")),
    "plan_execute_step": ("plan_execute", _("Sent to carry out one step of a plan-execute agent's plan.")),
    "plan_execute_aggregate": ("plan_execute", _("Sent at the end of a plan-execute task: asks for the final answer from the steps' outputs.")),
    "manager_role": ("manager", _("The role of the manager of a hierarchical crew.")),
    "manager_goal": ("manager", _("The goal of the manager of a hierarchical crew.")),
    "manager": ("manager", _("The manager's instructions in a hierarchical crew, with the agents it can delegate to.")),
    "manager_delegate_tool": ("manager", _("Describes the manager's tool that delegates work to a coworker.")),
    "manager_ask_tool": ("manager", _("Describes the manager's tool that asks a coworker a question.")),
    "manager_ask_expected_output": ("manager", _("What a coworker asked a question by the manager is expected to return.")),
    "manager_unknown_coworker": ("manager", _("The result the manager sees when it named a coworker who does not exist.")),
    "none": ("labels", _("Stands in any prompt for an empty section.")),
    "nothing": ("labels", _("Stands in any prompt for something that has nothing yet.")),
    "no_result": ("labels", _("Stands in any prompt for a step without a result.")),
    "no_tools": ("labels", _("Stands in any prompt for an agent without tools.")),
    "empty_answer": ("labels", _("Stands in any prompt for an empty answer.")),
}

# Values for the preview: a sample task (a short report on tides) seen through each placeholder.
# Numbers, names and JSON stay as they are in every language.
SAMPLES: dict[str, Promise | str] = {
    "action": _("Search the web for tide tables"),
    "agents": _("Researcher: finds sources\nWriter: writes the report"),
    "answer": _("Spring tides happen at new and full moon, when the sun and moon line up."),
    "attempts": "3",
    "backstory": _("You have written about the sea for twenty years."),
    "checks": _("The report cites at least two sources."),
    "completed": _("1. Find tide tables for Lisbon"),
    "completed_steps": _("1. Find tide tables for Lisbon: done"),
    "context": _("Earlier task: tide tables for Lisbon, March."),
    "coworkers": _("Researcher, Writer"),
    "criteria": _("- The report names its sources\n- It is under 300 words"),
    "current_plan": _("1. Find tide tables\n2. Explain spring tides\n3. Write the report"),
    "dependency_results": _("Step 1: tide tables for Lisbon found."),
    "description": _("Write a short report on spring tides in Lisbon."),
    "error": _("the search tool timed out"),
    "errors": _("$.sources: field required"),
    "expected_output": _("A 300-word report with sources."),
    "failed": _("2. Explain spring tides (the search tool timed out)"),
    "failures": _("- The report does not name its sources"),
    "feedback": _("Add a section on safety at low tide."),
    "goal": _("Explain the tides clearly to sailors"),
    "log": _("Searched for tide tables; found three sources."),
    "max_steps": "5",
    "max_usage": "3",
    "memories": _("- The port authority's tide tables are the most reliable source."),
    "name": "web_search",
    "note": _("Use the official port authority site instead."),
    "number": "2",
    "outcome": _("The step found the tide tables."),
    "passages": _("[Lisbon tide tables] High tide 14:02, 3.6 m; low tide 20:15, 0.4 m."),
    "plan": _("1. Find tide tables\n2. Explain spring tides"),
    "reason": _("The search tool is down."),
    "reasons": _("- The report does not name its sources"),
    "remaining_steps": _("3. Write the report"),
    "result": _("High tide 14:02, 3.6 m; low tide 20:15, 0.4 m."),
    "role": _("Marine science writer"),
    "schema": '{"type": "object", "properties": {"report": {"type": "string"}}}',
    "sources": _("Lisbon tide tables, Sailing handbook"),
    "step": _("Explain spring tides"),
    "step_outputs": _("Step 1: tide tables found.\nStep 2: spring tides explained."),
    "step_results": _("Step 1: tide tables found.\nStep 2: spring tides explained."),
    "steps": _("1. Find tide tables\n2. Explain spring tides"),
    "tasks": _("Task 1: Research tides (Researcher)\nTask 2: Write the report (Writer)"),
    "text": _("The earlier conversation about tides in Lisbon…"),
    "tool": "web_search",
    "tool_names": "web_search, read_page",
    "tools": _("web_search: searches the web\nread_page: reads a web page"),
}


def group_of(key: str) -> str:
    return PURPOSES[key][0] if key in PURPOSES else "other"


def purpose_of(key: str, title: str) -> str:
    """The sentence on when ``key`` is sent (its title when the table does not know it yet)."""
    return str(PURPOSES[key][1]) if key in PURPOSES else title


def sample_values(placeholders: tuple[str, ...]) -> dict[str, str]:
    """A value for every placeholder; one this table does not know shows its own name."""
    return {name: str(SAMPLES[name]) if name in SAMPLES else f"<{name}>" for name in placeholders}
