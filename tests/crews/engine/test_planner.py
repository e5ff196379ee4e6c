"""The crew planner: structured output, mapping by task number, warnings, one repair, failure."""

from __future__ import annotations

import json

import pytest

from agents.engine.llm import LLMResponse, tool_call_response
from agents.engine.prompts import PromptBook
from agents.engine.specs import ToolRef
from crews.engine.planner import SUBMIT_TOOL, CrewPlanError, draft_crew_plan
from tests.agents.engine.helpers import make_ctx, make_llm
from tests.crews.engine.helpers import make_crew, researcher, writer


def plans(*items: tuple[int, list[str]]) -> LLMResponse:
    return tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": n, "steps": s} for n, s in items]})


async def test_plans_are_mapped_by_task_number_whatever_their_order() -> None:
    crew = make_crew(tasks=3).interpolated({"topic": "AI"})
    ctx, gateway, sink, _ = make_ctx([plans((3, ["c1"]), (1, ["a1", "a2"]), (2, ["b1"]))])
    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert draft.steps == {"11": ["a1", "a2"], "12": ["b1"], "13": ["c1"]}
    assert draft.warnings == []
    assert sink.types == ["crew_plan.started", "llm.started", "llm.completed"]
    request = gateway.requests[0]
    assert request.purpose == "crew_plan"
    assert request.tool_choice == {"type": "function", "function": {"name": SUBMIT_TOOL}}


async def test_the_planner_sees_texts_persona_tools_with_schemas_and_context() -> None:
    agents = (researcher(), writer(tools=(ToolRef(name="calculator"),)))
    crew = make_crew(agents=agents).interpolated({"topic": "quantum sensors"})
    ctx, gateway, _sink, _ = make_ctx([plans((1, ["a"]), (2, ["b"]))])
    await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    prompt = gateway.requests[0].messages[0]["content"]
    assert "## Task 1: Research" in prompt and "Description: Research quantum sensors" in prompt
    assert "Agent: quantum sensors Researcher" in prompt and "Agent goal: Find facts on quantum sensors" in prompt
    assert "calculator" in prompt and '"expression"' in prompt  # the argument schema, not just the name
    assert "Receives the output of task(s): 1" in prompt
    assert "{topic}" not in prompt


async def test_duplicates_keep_the_first_and_missing_or_unknown_tasks_warn() -> None:
    crew = make_crew(tasks=3).interpolated({"topic": "AI"})
    ctx, _gw, sink, _ = make_ctx([plans((1, ["first"]), (1, ["second"]), (9, ["nowhere"]), (3, ["c"]))])
    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert draft.steps == {"11": ["first"], "13": ["c"]}
    warnings = [e.data["message"] for e in sink.of_type("crew_plan.warning")]
    assert warnings == [
        "The planner wrote task 1 twice; the first version is kept.",
        "The planner wrote steps for task 9, which does not exist; ignored.",
        "The planner wrote no steps for task 2; it will run without a plan.",
    ]


async def test_text_json_is_accepted_when_the_model_has_no_tools() -> None:
    crew = make_crew(planning_llm=make_llm(key="p", supports_tools=False)).interpolated({"topic": "AI"})
    answer = 'Here you go:\n```json\n{"plans": [{"task_number": 1, "steps": ["x"]}, {"task_number": 2, "steps": ["y"]}]}\n```'
    ctx, gateway, _sink, _ = make_ctx([answer])
    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert draft.steps == {"11": ["x"], "12": ["y"]}
    assert gateway.requests[0].tools is None
    assert gateway.requests[0].response_schema is not None


async def test_an_invalid_answer_gets_one_repair_request() -> None:
    crew = make_crew().interpolated({"topic": "AI"})
    ctx, gateway, _sink, _ = make_ctx(["I think the plan is good.", plans((1, ["a"]), (2, ["b"]))])
    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert draft.steps == {"11": ["a"], "12": ["b"]}
    assert gateway.calls == 2
    repair = gateway.requests[1].messages[-1]["content"]
    assert repair.startswith("Your last answer was not valid JSON for this schema:")


async def test_two_bad_answers_fail_clearly() -> None:
    crew = make_crew().interpolated({"topic": "AI"})
    bad = tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": "one", "steps": ["a"]}]})
    ctx, gateway, sink, _ = make_ctx(["nope", bad])
    with pytest.raises(CrewPlanError, match="task_number is not a whole number"):
        await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert gateway.calls == 2
    assert sink.types[-1] == "crew_plan.failed"


async def test_regenerating_one_task_sends_only_it_with_the_kept_steps_and_the_note() -> None:
    crew = make_crew().interpolated({"topic": "AI"})
    ctx, gateway, _sink, _ = make_ctx([plans((2, ["new step"]))])
    draft = await draft_crew_plan(
        ctx, crew, llm=crew.planning_llm, only_tasks=["12"], feedback="Shorter, please", keep={"12": ["Pinned one"]}
    )
    assert draft.steps == {"12": ["new step"]}
    prompt = gateway.requests[0].messages[0]["content"]
    assert "## Task 2: Report" in prompt and "## Task 1" not in prompt
    assert "- Pinned one" in prompt and "Note from the person reviewing the plan: Shorter, please" in prompt


async def test_the_demo_model_drafts_three_to_five_steps_per_task() -> None:
    from agents.engine.demo import DemoGateway

    crew = make_crew(planning_llm=make_llm(key="demo", model="demo/offline")).interpolated({"topic": "AI"})
    ctx, _gw, _sink, _ = make_ctx(gateway=DemoGateway())  # type: ignore[arg-type]
    draft = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)
    assert set(draft.steps) == {"11", "12"}
    assert all(3 <= len(s) <= 5 for s in draft.steps.values())
    assert json.dumps(draft.steps)  # plain data


async def test_the_task_listing_pinned_steps_and_the_note_come_from_templates() -> None:
    book = PromptBook(
        {
            "crew_plan_task": "TASK {number} {name}: {description} -> {expected_output}",
            "crew_plan_task_agent": "BY {role} FOR {goal}",
            "crew_plan_task_backstory": "WHO {backstory}",
            "crew_plan_task_no_tools": "NO TOOLS",
            "crew_plan_task_context": "AFTER {tasks}",
            "crew_plan_keep": "KEEP FOR {number}:\n{steps}",
            "crew_plan_feedback": "NOTE {feedback}",
        }
    )
    crew = make_crew().interpolated({"topic": "AI"})
    ctx, gateway, _sink, _ = make_ctx([plans((2, ["new step"]))], prompts=book)
    await draft_crew_plan(
        ctx, crew, llm=crew.planning_llm, only_tasks=["12"], feedback="Shorter", keep={"12": ["Pinned"]}
    )
    prompt = gateway.requests[0].messages[0]["content"]
    listing = "TASK 2 Report: Write a report -> A report\nBY Writer FOR Write reports\nWHO You are careful.\nNO TOOLS\nAFTER 1"
    assert listing in prompt
    assert "KEEP FOR 2:\n- Pinned" in prompt and "NOTE Shorter" in prompt
