"""Default prompt texts of earlier releases, since changed (to test upgrades)."""

OLD_OBSERVE = 'You are reviewing one step of a plan.\n\n## Task\n{description}\n\n## Expected output\n{expected_output}\n\n## Step just executed\n{step}\n\n## Its result\n{result}\n\n## Steps still to do\n{remaining_steps}\n\nJudge the step. Answer with JSON only: {{"success": true, "learned": "...", "plan_valid": true, "refinements": [{{"number": 3, "text": "..."}}], "needs_replan": false, "replan_reason": "", "goal_achieved": false}}'

OLD_SYNTHESIS = 'You are {role}. Combine the results of the steps below into one complete answer to the task.\n\n## Task\n{description}\n\n## Expected output\n{expected_output}\n\n## Step results\n{step_results}\n\nWrite the final answer only.'

# Issue #14: an agent without tools was asked for the ReAct answer format.
OLD_REACT_SYSTEM_NO_TOOLS = "You are {role}. {backstory}\nYour personal goal is: {goal}\n\nWhen you know the answer, reply in this format:\nThought: I now know the final answer\nFinal Answer: the complete final answer"
