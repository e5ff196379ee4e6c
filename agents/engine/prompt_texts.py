"""The default text of every prompt the engine sends, with the placeholders each one offers.

Data, not logic: ``agents.engine.prompts`` renders and checks them, and the site seeds one
editable template per key from them (``agents.services.prompt_seed``).
"""

from __future__ import annotations

from dataclasses import dataclass


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
            "crew_plan_cut_off",
            "Crew planner: repair of an answer cut off at its length limit",
            (),
            "Your last answer was cut off at its length limit before the JSON was complete. "
            "Answer again with JSON only and keep it shorter: fewer steps per task, each one "
            'short. The shape: {{"plans": [{{"task_number": 1, "steps": ["..."]}}]}}',
        ),
        PromptDef(
            "json_answer",
            "Answer format: JSON for a schema (for models without a JSON schema mode)",
            ("schema",),
            "Answer with JSON only, one value that matches this JSON schema:\n{schema}",
        ),
        PromptDef(
            "crew_plan_task",
            "Crew planner: a task in the listing",
            ("number", "name", "description", "expected_output"),
            "## Task {number}: {name}\nDescription: {description}\nExpected output: {expected_output}",
        ),
        PromptDef(
            "crew_plan_task_unnamed",
            "Crew planner: name of a task without one",
            ("number",),
            "Task {number}",
        ),
        PromptDef(
            "crew_plan_task_agent",
            "Crew planner: the task's agent",
            ("role", "goal"),
            "Agent: {role}\nAgent goal: {goal}",
        ),
        PromptDef(
            "crew_plan_task_backstory",
            "Crew planner: the agent's backstory",
            ("backstory",),
            "Agent backstory: {backstory}",
        ),
        PromptDef(
            "crew_plan_task_tools", "Crew planner: the agent's tools", ("tools",), "Tools:\n{tools}"
        ),
        PromptDef(
            "crew_plan_task_no_tools", "Crew planner: an agent without tools", (), "Tools: none"
        ),
        PromptDef(
            "crew_plan_task_manager",
            "Crew planner: a task the manager assigns",
            (),
            "Agent: chosen by the crew's manager",
        ),
        PromptDef(
            "crew_plan_task_context",
            "Crew planner: the tasks whose output a task receives",
            ("tasks",),
            "Receives the output of task(s): {tasks}",
        ),
        PromptDef(
            "crew_plan_task_output_schema",
            "Crew planner: the JSON a task's answer must match",
            ("schema",),
            "Its answer must be JSON matching this schema: {schema}",
        ),
        PromptDef(
            "crew_plan_task_checks",
            "Crew planner: the checks a task's answer must pass",
            ("checks",),
            "Its answer is checked against: {checks}",
        ),
        PromptDef(
            "crew_plan_keep",
            "Crew planner: steps a person pinned",
            ("number", "steps"),
            "For task {number}, these steps are fixed and will be kept; write only the other steps, "
            "without repeating them:\n{steps}",
        ),
        PromptDef(
            "crew_plan_feedback",
            "Crew planner: the reviewer's note",
            ("feedback",),
            "Note from the person reviewing the plan: {feedback}",
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
            (
                "description",
                "expected_output",
                "completed_steps",
                "step",
                "outcome",
                "result",
                "remaining_steps",
            ),
            "You are reviewing one step of a plan.\n\n"
            "## Task\n{description}\n\n"
            "## Expected output\n{expected_output}\n\n"
            "## Steps done so far\n{completed_steps}\n\n"
            "## Step just executed\n{step}\nOutcome: {outcome}\n\n"
            "## Its result\n{result}\n\n## Steps still to do\n{remaining_steps}\n\n"
            "Judge the step against the expected output, which is what success means for the task:\n"
            "- success: the step produced a concrete result that can be checked. It failed if its "
            "result is only exploration, an action or tool failed and was not recovered, or what "
            "the step had to produce is missing.\n"
            "- learned: what the remaining steps should know from it.\n"
            "- plan_valid: whether the steps still to do can still reach the expected output.\n"
            "- refinements: new text for steps still to do, only where what was learned requires "
            "it.\n"
            "- needs_replan: Be conservative. Ask for a new plan only when the steps still to do "
            "can no longer reach the expected output (they rely on something that failed or does "
            "not exist); otherwise the plan goes on.\n"
            "- goal_achieved: true only if the expected output is already fully produced.\n\n"
            "Answer with JSON only: "
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
            "## Your current step\n{step}\n\n"
            "This is one step of a larger plan for the overall task. Do only this step, fully: do "
            "not plan ahead or start later steps. Its result is handed to any later steps and to "
            "the answer of the overall task, so report what you actually did and found, in full.",
        ),
        PromptDef(
            "step_current",
            "Agent planning: the step to do",
            ("number", "description"),
            "Step {number}: {description}",
        ),
        PromptDef(
            "step_tool",
            "Agent planning: the tool a step must use",
            ("tool",),
            "Use the tool: {tool}",
        ),
        PromptDef(
            "step_result",
            "Agent planning: a step's result",
            ("number", "description", "result"),
            "Step {number} ({description}):\n{result}",
        ),
        PromptDef(
            "step_result_failed",
            "Agent planning: a failed step's result",
            ("number", "description", "error", "result"),
            "Step {number} ({description}) [failed: {error}]:\n{result}",
        ),
        PromptDef(
            "step_dependency_failed",
            "Agent planning: a failed step another step depends on",
            ("number", "description", "error", "result"),
            "Step {number} ({description}) — FAILED: {error}:\n{result}",
        ),
        PromptDef(
            "plan_step_tool", "Agent planning: a listed step's tool", ("tool",), "(tool: {tool})"
        ),
        PromptDef(
            "plan_step_after",
            "Agent planning: the steps a listed step comes after",
            ("steps",),
            "(after step {steps})",
        ),
        PromptDef(
            "fallback_plan",
            "Agent planning: the plan kept when the agent falls back to ReAct",
            ("plan",),
            "Plan:\n{plan}",
        ),
        PromptDef(
            "step_last",
            "Agent planning: the last step of an approved plan",
            (),
            "This is the last step of the plan: its result is the final answer to the overall "
            "task. Give it in full, as the expected output describes, not a summary of the steps.",
        ),
        PromptDef(
            "synthesis",
            "Agent planning: final answer",
            _PERSONA + ("description", "expected_output", "step_results"),
            "You are {role}. Combine the results of the steps below into one complete answer to "
            "the task.\n\n## Task\n{description}\n\n## Expected output\n{expected_output}\n\n"
            "## Step results\n{step_results}\n\nWrite the final answer only. Do not mention the "
            "steps or the plan: write it as if you had done the task in one go.",
        ),
        PromptDef(
            "no_step_results",
            "Agent planning: no step produced a result",
            (),
            "No step produced a result.",
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
            # No format: without tools the reply is the answer (issue #14).
            "You are {role}. {backstory}\nYour personal goal is: {goal}",
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
            "task_plan",
            "Task: the approved plan",
            ("description", "steps"),
            "{description}\n\nPlan for this task:\n{steps}",
        ),
        PromptDef(
            "task_context",
            "Task: context from earlier tasks",
            ("context",),
            "This is the context you're working with:\n{context}",
        ),
        PromptDef(
            "task_output_schema",
            "Task: the JSON the answer must match",
            ("schema",),
            "Your final answer must be JSON that matches this JSON schema:\n{schema}",
        ),
        PromptDef(
            "output_json_repair",
            "Task: repair of an answer that does not match its JSON schema",
            ("errors", "schema"),
            "Your last answer was not valid JSON for the task's schema:\n{errors}\n"
            "Answer again with the complete answer as JSON only, one value that matches this JSON "
            "schema:\n{schema}",
        ),
        PromptDef(
            "guardrail",
            "Guardrail: check an answer against its criteria",
            ("description", "expected_output", "criteria", "answer"),
            "You check the answer an AI agent gave to a task, strictly and fairly. Judge only the "
            "criteria listed; do not redo the task.\n\n## Task\n{description}\n\n"
            "## Expected output\n{expected_output}\n\n## Criteria the answer must meet\n{criteria}\n\n"
            "## The answer\n{answer}\n\n"
            "Answer with JSON only: {{\"passed\": true or false, \"reasons\": [\"...\"]}}, where "
            "reasons names every criterion the answer fails and why, in one sentence each "
            "(an empty list when it passes).",
        ),
        PromptDef(
            "guardrail_retry",
            "Guardrail: the reasons an answer failed its checks, sent back to the agent",
            ("reasons",),
            "Your answer did not pass these checks:\n{reasons}\n"
            "Fix these problems and give your complete final answer again.",
        ),
        PromptDef(
            "knowledge",
            "Knowledge: passages from the sources, given before a task",
            ("sources", "passages"),
            "## Knowledge from your sources ({sources})\n"
            "Use these passages where they help; say so when they do not answer the task.\n\n{passages}",
        ),
        PromptDef(
            "memory_recalled",
            "Memory: what the crew remembers from earlier runs, given before a task",
            ("memories",),
            "## What this crew remembers from earlier runs\n{memories}",
        ),
        PromptDef(
            "memory",
            "Memory: what to remember from a finished task",
            ("description", "answer", "feedback", "failures"),
            "A task of an AI crew has just finished. Write down what the crew should remember for "
            "later runs: facts learned, decisions made, what worked and what did not. At most "
            "three short lines, each one a complete sentence that makes sense on its own.\n\n"
            "## Task\n{description}\n\n## Answer\n{answer}\n\n"
            "## A person's feedback\n{feedback}\n\n## Checks the answer failed\n{failures}\n\n"
            "Answer with the lines only, one per line, no numbering.",
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
            "format_error_no_action_input",
            "ReAct: format error, an action without input",
            (),
            "you wrote 'Action:' but no 'Action Input:' after it.",
        ),
        PromptDef(
            "format_error_unreadable",
            "ReAct: format error, neither an answer nor an action",
            (),
            "your reply had neither 'Final Answer:' nor an 'Action:' followed by 'Action Input:'.",
        ),
        PromptDef(
            "format_error_empty", "ReAct: format error, an empty reply", (), "your reply was empty."
        ),
        PromptDef(
            "tool_unknown",
            "Tool result: unknown tool",
            ("name", "tools"),
            "Tool '{name}' does not exist. The only available tools are: {tools}. Use one of these "
            "exact names, or give your Final Answer.",
        ),
        PromptDef(
            "tool_unnamed",
            "Tool result: no tool named",
            ("tools",),
            "No tool was named. The only available tools are: {tools}. Use one of these exact "
            "names, or give your Final Answer.",
        ),
        PromptDef(
            "tool_invalid_args",
            "Tool result: invalid arguments",
            ("name", "error", "schema"),
            "Error: invalid arguments for '{name}': {error}. It accepts a JSON object matching this "
            "schema: {schema}",
        ),
        PromptDef(
            "tool_repeated",
            "Tool result: the same call twice in a row",
            ("name",),
            "I already used '{name}' with exactly these arguments in my previous action; its result "
            "is above. I must use different input or give my Final Answer.",
        ),
        PromptDef(
            "tool_usage_limit",
            "Tool result: usage limit reached",
            ("name", "max_usage"),
            "Tool '{name}' has reached its usage limit of {max_usage} times and cannot be used "
            "anymore.",
        ),
        PromptDef(
            "tool_failed",
            "Tool result: the tool failed",
            ("name", "error"),
            "Error: the tool '{name}' failed: {error}",
        ),
        PromptDef(
            "tool_failed_retried",
            "Tool result: the tool failed on every try",
            ("name", "attempts", "error"),
            "Error: the tool '{name}' failed (tried {attempts} times): {error}",
        ),
        PromptDef(
            "tool_denied",
            "Tool result: a person denied the call",
            ("name",),
            "The person supervising this run denied the use of '{name}' with these arguments. Do "
            "not try it again; continue without it.",
        ),
        PromptDef(
            "tool_denied_note",
            "Tool result: a person denied the call, with a note",
            ("name", "note"),
            "The person supervising this run denied the use of '{name}' with these arguments. "
            "Their note: {note} Do not try it again; continue without it.",
        ),
        PromptDef(
            "tool_not_run",
            "Tool result: not run after the final answer",
            (),
            "Not run: an earlier tool call already produced the final answer.",
        ),
        PromptDef("tool_no_output", "Tool result: no output", (), "(the tool returned no output)"),
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
            ("description", "expected_output", "context", "number", "action", "log"),
            "## Overall task\n{description}\n\n"
            "## Expected output of the overall task\n{expected_output}\n\n"
            "## Context from earlier tasks\n{context}\n\n"
            "You carry out this task one step of a plan at a time. Do only the step below: its "
            "output is handed to any later steps and to the answer of the overall task.\n\n"
            "Execute step {number}: {action}\n\nContext:\n{log}",
        ),
        PromptDef(
            "plan_execute_aggregate",
            "Plan-execute: aggregate",
            ("description", "step_outputs"),
            "Merge the outputs of the steps below into one cohesive final answer to the task. Keep "
            "finished artefacts (code, tables, lists) verbatim. Do not list the steps: write one "
            "unified answer.\n\n## Task\n{description}\n\n"
            "## Step outputs\n{step_outputs}",
        ),
        PromptDef(
            "step_outcome",
            "Agent planning: a reviewed step's outcome (for an observe prompt without {outcome})",
            ("outcome",),
            "Outcome: {outcome}",
        ),
        PromptDef("manager_role", "Hierarchical: manager's role", (), "Crew Manager"),
        PromptDef(
            "manager_goal",
            "Hierarchical: manager's goal",
            (),
            "Get every task done well by delegating it to the right coworker and checking the "
            "result.",
        ),
        PromptDef(
            "manager",
            "Hierarchical: manager",
            ("agents",),
            "You manage a team of experts and do not do the work yourself. Delegate each task to "
            "the coworker best suited to it, or ask one of them a question, giving them everything "
            "they need to know; check what they return, then give the final answer.\n\n"
            "Your coworkers:\n{agents}",
        ),
        PromptDef(
            "manager_delegate_tool",
            "Hierarchical: the delegate-work tool",
            ("coworkers",),
            "Delegate a specific task to one of these coworkers: {coworkers}. They know nothing "
            "about the task but what you send: give the task and all the context it needs, "
            "explained rather than referred to.",
        ),
        PromptDef(
            "manager_ask_tool",
            "Hierarchical: the ask-question tool",
            ("coworkers",),
            "Ask a specific question to one of these coworkers: {coworkers}. They know nothing "
            "but what you send: give the question and all the context needed to answer it.",
        ),
        PromptDef(
            "manager_ask_expected_output",
            "Hierarchical: what a coworker asked a question returns",
            (),
            "A complete answer to the question.",
        ),
        PromptDef(
            "manager_unknown_coworker",
            "Hierarchical: an unknown coworker was named",
            ("coworkers",),
            "Unknown coworker; choose one of: {coworkers}.",
        ),
        # Labels for what is missing; short, but the model reads them too.
        PromptDef("none", "Label: an empty section", (), "None."),
        PromptDef("nothing", "Label: nothing yet", (), "(none)"),
        PromptDef("no_result", "Label: a step without a result", (), "(no result)"),
        PromptDef("no_tools", "Label: an agent without tools", (), "No tools available"),
        PromptDef("empty_answer", "Label: an empty answer", (), "(empty answer)"),
    ]
}
