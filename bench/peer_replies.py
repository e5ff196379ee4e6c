"""What the model says in bench/peer.py: one fake OpenAI server that answers CrewAI and our engine
alike, by what each request asks for (a tool it offers, a response format it names), so the two
frameworks get the same answers, of the same length, streamed the same way.

CrewAI 1.15.30's requests, read off the wire: the crew planner asks for ``response_format``
``PlannerTaskPydanticOutput`` (``list_of_plans_per_task``, one ``plan`` text per task); the agent
planner offers the tool ``create_reasoning_plan``; the step observer asks for ``StepObservation``.
Ours: the crew planner offers ``submit_crew_plan``, the agent planner ``create_plan``, the step
review asks for ``step_review``. Every other request (a task, a step, the synthesis) gets a final
answer in the ReAct form, which both read as the answer.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from _common import ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply  # noqa: E402

PLAN_STEPS = 5  # W3: the agent's own plan
TASK_PLAN_STEPS = 2  # W1, W4: steps per task in a crew plan
ANSWER = (
    "Thought: I now know the final answer\nFinal Answer: Quarterly revenue grew 12% to 4.2M, "
    "driven by the enterprise tier; churn fell to 2.1% after the onboarding rework. Support "
    "tickets per account dropped by a third, and the two largest customers renewed for three "
    "years. Risks: one supplier contract ends in March."
)


def _tools(body: dict[str, Any]) -> set[str]:
    return {t.get("function", {}).get("name", "") for t in body.get("tools") or []}


def _format(body: dict[str, Any]) -> str:
    fmt = body.get("response_format") or {}
    return str((fmt.get("json_schema") or {}).get("name", "")) if isinstance(fmt, dict) else ""


def _text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])


def _steps(n: int) -> list[str]:
    return [f"Step {k}: work out part {k} of the figures" for k in range(1, n + 1)]


def reply_for(request: RecordedRequest) -> Reply:
    body = request.body if isinstance(request.body, dict) else {}
    tools, fmt = _tools(body), _format(body)
    if "create_reasoning_plan" in tools:  # CrewAI's agent planner
        steps = [
            {"step_number": k, "description": d, "tool_to_use": None, "depends_on": [k - 1] if k > 1 else []}
            for k, d in enumerate(_steps(PLAN_STEPS), start=1)
        ]
        return Reply.tool_call("create_reasoning_plan", {"plan": "Five steps.", "steps": steps, "ready": True})
    if "create_plan" in tools:  # ours
        steps = [
            {"number": k, "description": d, "tool": None, "depends_on": [k - 1] if k > 1 else []}
            for k, d in enumerate(_steps(PLAN_STEPS), start=1)
        ]
        return Reply.tool_call("create_plan", {"plan": "Five steps.", "steps": steps, "ready": True})
    if "submit_crew_plan" in tools:  # ours: "## Task N: ..." per task in the listing
        count = len(re.findall(r"^## Task \d+", _text(body), re.MULTILINE))
        plans = [{"task_number": n, "steps": _steps(TASK_PLAN_STEPS)} for n in range(1, count + 1)]
        return Reply.tool_call("submit_crew_plan", {"plans": plans})
    if fmt == "PlannerTaskPydanticOutput":  # CrewAI's crew planner: "Task Number N - ..." per task
        count = len(re.findall(r"Task Number \d+ -", _text(body)))
        plan = "\n".join(f"{k}. {s}" for k, s in enumerate(_steps(TASK_PLAN_STEPS), start=1))
        plans = [{"task_number": n, "task": f"Task {n}", "plan": plan} for n in range(1, count + 1)]
        return Reply.json({"list_of_plans_per_task": plans})
    if fmt == "StepObservation":  # CrewAI's step observer
        return Reply.json({
            "step_completed_successfully": True, "key_information_learned": "The figures for the next step.",
            "remaining_plan_still_valid": True, "suggested_refinements": None, "needs_full_replan": False,
            "replan_reason": None, "goal_already_achieved": False,
        })  # fmt: skip
    if fmt == "step_review":  # ours
        return Reply.json({
            "success": True, "learned": "The figures for the next step.", "plan_valid": True,
            "refinements": [], "needs_replan": False, "replan_reason": "", "goal_achieved": False,
        })  # fmt: skip
    return Reply.text(ANSWER)


def serve() -> None:
    """``--serve-fake``: the server in a process of its own (its threads never take the client's
    CPU), its base URL on stdout; each line on stdin gets ``<requests> <streamed>`` so far back, so
    the parent counts the calls of every kickoff. It stops when stdin closes."""
    with FakeLLMServer() as server:
        server.default = reply_for
        print(server.base_url, flush=True)
        for _line in sys.stdin:
            bodies = server.bodies()
            print(len(bodies), sum(bool(b.get("stream")) for b in bodies if isinstance(b, dict)), flush=True)
