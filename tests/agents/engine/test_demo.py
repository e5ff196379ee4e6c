"""The offline demo model: the right shape of answer for each purpose, always the same one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.engine.demo import DEMO_MODEL, DemoGateway
from agents.engine.llm import LLMRequest, LLMResponse, Message
from agents.engine.prompts import PromptBook
from agents.engine.specs import LLMSpec

PROMPTS = PromptBook()
LLM = LLMSpec(key="demo", model=DEMO_MODEL)
PERSONA = {"role": "Analyst", "goal": "Get numbers right", "backstory": "You are careful."}
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluate arithmetic.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
CREATE_PLAN = {
    "type": "function",
    "function": {"name": "create_plan", "parameters": {"type": "object", "properties": {}}},
}
CREW_TASKS = """## Task 1: Research
Description: Research the latest trends in AI agents. Focus on planning and tool use.
Expected output: A list of 5 bullet points with sources.
Agent: Senior Researcher
Tools: web_search

## Task 2: Budget
Description: Work out the cost of 12 * 7 licences.
Expected output: A one-line total.
Agent: Analyst
Tools: calculator"""


async def complete(
    purpose: str, messages: list[Message], *, on_delta: Any = None, **kw: Any
) -> LLMResponse:
    request = LLMRequest(llm=LLM, messages=messages, purpose=purpose, **kw)
    return await DemoGateway().complete(request, on_delta=on_delta)


def user(text: str) -> list[Message]:
    return [{"role": "user", "content": text}]


def react_messages(description: str, expected: str) -> list[Message]:
    return [
        {"role": "system", "content": PROMPTS.render("react_system_no_tools", **PERSONA)},
        {
            "role": "user",
            "content": PROMPTS.render(
                "react_user", description=description, expected_output=expected, context=""
            ),
        },
    ]


def agent_plan_messages(description: str, tools: str = "none") -> list[Message]:
    text = PROMPTS.render(
        "agent_plan",
        **PERSONA,
        description=description,
        expected_output="A short report.",
        tools=tools,
        max_steps=20,
    )
    return [
        {"role": "system", "content": PROMPTS.render("agent_plan_system", **PERSONA)},
        {"role": "user", "content": text},
    ]


async def test_crew_plan_gives_each_task_three_to_five_steps_from_its_own_text() -> None:
    response = await complete("crew_plan", user(PROMPTS.render("crew_plan", tasks=CREW_TASKS)))
    plans = json.loads(response.content)["plans"]
    assert [p["task_number"] for p in plans] == [1, 2]
    for plan in plans:
        assert 3 <= len(plan["steps"]) <= 5
        assert all(isinstance(s, str) and s for s in plan["steps"])
    research, budget = (" ".join(p["steps"]) for p in plans)
    assert "latest trends in AI agents" in research
    assert "5 bullet points" in research
    assert "web_search" in research
    assert "12 * 7" in budget and "calculator" in budget
    assert "web_search" not in budget  # each task's steps come from its own block only
    assert "For every task" not in research + budget  # the prompt's own text is not a task


async def test_crew_plan_answers_through_the_one_function_it_is_given() -> None:
    tool = {"type": "function", "function": {"name": "submit_plans", "parameters": {}}}
    messages = user(PROMPTS.render("crew_plan", tasks=CREW_TASKS))
    as_text = await complete("crew_plan", messages)
    as_tool = await complete("crew_plan", messages, tools=[tool], tool_choice="required")
    assert as_tool.content == ""
    assert [c.name for c in as_tool.tool_calls] == ["submit_plans"]
    assert json.loads(as_tool.tool_calls[0].arguments) == json.loads(as_text.content)


async def test_agent_plan_is_a_native_create_plan_call_when_the_tool_is_offered() -> None:
    messages = agent_plan_messages("Summarise the state of solar power in Portugal.")
    response = await complete("agent_plan", messages, tools=[CREATE_PLAN])
    assert response.content == ""
    assert response.finish_reason == "tool_calls"
    [call] = response.tool_calls
    assert call.name == "create_plan"
    plan = json.loads(call.arguments)
    assert plan["ready"] is True
    assert "solar power in Portugal" in plan["plan"]
    assert 2 <= len(plan["steps"]) <= 4
    assert [s["number"] for s in plan["steps"]] == list(range(1, len(plan["steps"]) + 1))
    for step in plan["steps"]:
        assert set(step) == {"number", "description", "tool", "depends_on"}
        assert all(d < step["number"] for d in step["depends_on"])
    assert all(s["tool"] is None for s in plan["steps"])
    assert "A short report" in plan["steps"][-1]["description"]


@pytest.mark.parametrize("purpose", ["agent_plan", "refine", "replan"])
async def test_without_the_tool_the_plan_is_json_text_ending_in_ready(purpose: str) -> None:
    response = await complete(purpose, agent_plan_messages("Plan a two-day trip to Lisbon."))
    assert response.tool_calls == []
    body, _, verdict = response.content.rpartition("\n\n")
    assert verdict == "READY"
    plan = json.loads(body)
    assert plan["ready"] is True
    assert "Lisbon" in plan["steps"][0]["description"]


async def test_a_plan_names_the_calculator_only_for_a_step_it_can_fill() -> None:
    messages = agent_plan_messages(
        "Compute 12 * 7 and explain the result.", tools="- calculator: evaluate arithmetic"
    )
    plan = json.loads(
        (await complete("agent_plan", messages, tools=[CREATE_PLAN])).tool_calls[0].arguments
    )
    assert plan["steps"][0] == {
        "number": 1,
        "description": "Calculate 12 * 7 with the calculator tool",
        "tool": "calculator",
        "depends_on": [],
    }
    assert 1 in plan["steps"][-1]["depends_on"]


async def test_observe_reports_success_without_asking_for_changes() -> None:
    text = PROMPTS.render(
        "observe",
        description="Compute 12 * 7",
        expected_output="A number",
        completed_steps="None.",
        step="Calculate",
        outcome="completed",
        result="84",
        remaining_steps="none",
    )
    review = json.loads((await complete("observe", user(text))).content)
    assert review == {
        "success": True,
        "learned": "The step finished and produced: 84 (offline demo model review).",
        "plan_valid": True,
        "refinements": [],
        "needs_replan": False,
        "replan_reason": "",
        "goal_achieved": False,
    }


async def test_plan_execute_plan_is_a_json_array_of_numbered_actions() -> None:
    messages = [
        {"role": "system", "content": "You are a travel planner."},
        {
            "role": "user",
            "content": "Plan a two-day trip to Lisbon.\n\n" + PROMPTS.text("plan_execute_plan"),
        },
    ]
    steps = json.loads((await complete("plan_execute_plan", messages)).content)
    assert isinstance(steps, list) and len(steps) >= 2
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))
    assert "Lisbon" in steps[0]["action"]
    assert "Create a step-by-step plan" not in json.dumps(steps)


async def test_react_restates_the_task_and_expected_output_as_its_answer() -> None:
    messages = react_messages("Write a haiku about the sea.", "Three lines, 5-7-5 syllables.")
    response = await complete("react", messages)
    answer = response.content
    assert "Final Answer" not in answer  # an agent without tools is asked for the answer alone
    assert "Write a haiku about the sea." in answer
    assert "Three lines, 5-7-5 syllables." in answer
    assert "offline demo model" in answer
    assert response.tool_calls == []


async def test_a_step_reports_the_current_step_and_the_last_step_gives_the_deliverable() -> None:
    def step_text(step: str, expected: str) -> str:
        return PROMPTS.render(
            "step_executor", **PERSONA, description="Plan a two-day trip to Lisbon.",
            expected_output=expected, context="none", step=step, dependency_results="none",
        )

    first = await complete("step", user(step_text("List three museums in Belém.", "An itinerary.")))
    assert "List three museums in Belém." in first.content and "Plan a two-day trip" not in first.content

    last = step_text("Write the itinerary.", "A list with 4 bullet points about Lisbon") + "\n\n" + PROMPTS.text("step_last")
    answer = (await complete("step", user(last))).content
    bullets = [line for line in answer.splitlines() if line.startswith("- ")]
    assert len(bullets) == 4 and all("Lisbon" in b for b in bullets)


async def test_the_deliverable_takes_the_shape_the_expected_output_asks_for() -> None:
    research = react_messages(
        "Conduct a thorough research about AI LLMs given the current year is 2026.",
        "A list with 10 bullet points of the most relevant information about AI LLMs",
    )
    listed = (await complete("react", research)).content
    bullets = [line for line in listed.splitlines() if line.startswith("- ")]
    assert len(bullets) == 10 and len(set(bullets)) == 10 and any("(2026)" in b for b in bullets)

    report = react_messages(
        "Review the context you got and expand each topic into a full section for a report.\n\n"
        "This is the context you're working with:\n- Open models caught up\n- Agents went mainstream",
        "A fully fledged report with the main topics, each with a full section of information.",
    )
    sections = (await complete("react", report)).content
    assert "## Open models caught up" in sections and "## Agents went mainstream" in sections


async def test_a_catalogue_tool_the_step_names_is_called_before_the_answer() -> None:
    clock = {"type": "function", "function": {"name": "current_datetime", "parameters": {
        "type": "object", "properties": {"timezone": {"type": "string"}}}}}
    messages = react_messages("Use the current_datetime tool to find today's date.", "The date.")
    first = await complete("react", messages, tools=[clock])
    [call] = first.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("current_datetime", {})
    messages += [
        {"role": "assistant", "content": first.content, "tool_calls": [call.as_message_part()]},
        {"role": "tool", "tool_call_id": call.id, "content": "2026-12-02 Wednesday"},
    ]
    second = await complete("react", messages, tools=[clock])
    assert second.tool_calls == [] and "2026-12-02 Wednesday" in second.content


async def test_with_a_calculator_it_calls_the_tool_then_answers_with_its_result() -> None:
    messages = react_messages("What is 12 * 7?", "The number.")
    first = await complete("react", messages, tools=[CALCULATOR])
    [call] = first.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("calculator", {"expression": "12 * 7"})
    assert first.finish_reason == "tool_calls"

    messages += [
        {"role": "assistant", "content": first.content, "tool_calls": [call.as_message_part()]},
        {"role": "tool", "tool_call_id": call.id, "content": "84"},
    ]
    second = await complete("react", messages, tools=[CALCULATOR])
    assert second.tool_calls == []
    assert "Final Answer" not in second.content  # native tools: a reply without calls is the answer
    assert "The tool returned: 84." in second.content


async def test_a_denied_tool_call_is_not_tried_again_and_the_answer_quotes_the_denial() -> None:
    """What a person's "Deny" sends back (react.py) reaches the answer: e2e test_tool_approval."""
    messages = react_messages("What is 12 * 7?", "The number.")
    first = await complete("react", messages, tools=[CALCULATOR])
    [call] = first.tool_calls
    denial = (
        "The person supervising this run denied the use of 'calculator' with these arguments. "
        "Their note: no. Do not try it again; continue without it."
    )
    messages += [
        {"role": "assistant", "content": first.content, "tool_calls": [call.as_message_part()]},
        {"role": "tool", "tool_call_id": call.id, "content": denial},
    ]

    second = await complete("react", messages, tools=[CALCULATOR])

    assert second.tool_calls == []
    assert "denied the use of 'calculator'" in second.content and "Their note: no." in second.content


async def test_in_the_text_protocol_it_writes_an_action_and_reads_the_observation() -> None:
    system = PROMPTS.render(
        "react_system", **PERSONA, tools="calculator: math", tool_names="calculator"
    )
    task = PROMPTS.render(
        "react_user", description="What is 3 + 4?", expected_output="A number", context=""
    )
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    first = await complete("react", messages)
    assert first.content.endswith('Action: calculator\nAction Input: {"expression": "3 + 4"}')
    messages += [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "Observation: 7"},
    ]
    second = await complete("react", messages)
    assert "Final Answer: " in second.content and "The tool returned: 7." in second.content


async def test_no_tool_call_for_a_task_without_arithmetic_or_a_date_like_text() -> None:
    messages = react_messages("Summarise the meeting of 2024-01-05 in 1/2 page.", "A summary.")
    response = await complete("react", messages, tools=[CALCULATOR])
    assert response.tool_calls == []


async def test_synthesis_merges_step_results_without_react_framing() -> None:
    text = PROMPTS.render(
        "synthesis",
        **PERSONA,
        description="Compute 12 * 7.",
        expected_output="A number.",
        step_results="Step 1: 84",
    )
    content = (await complete("synthesis", user(text))).content
    assert "Final Answer" not in content and "Thought:" not in content
    assert "Step 1: 84" in content
    assert "Write the final answer only" not in content


async def test_a_requested_json_schema_is_filled() -> None:
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "count": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"enum": ["report", "memo"]},
        },
    }
    messages = react_messages("Write a report.", "JSON.")
    value = json.loads((await complete("react", messages, response_schema=schema)).content)
    assert set(value) == {"title", "count", "tags", "kind"}
    assert isinstance(value["title"], str) and value["count"] == 0
    assert isinstance(value["tags"], list) and value["kind"] == "report"


async def test_streaming_sends_a_few_words_at_a_time_that_join_to_the_content() -> None:
    deltas: list[str] = []

    async def on_delta(text: str) -> None:
        deltas.append(text)

    messages = react_messages("Write a haiku about the sea.", "Three lines.")
    response = await complete("react", messages, stream=True, on_delta=on_delta)
    assert len(deltas) > 3
    assert "".join(deltas) == response.content
    assert all(len(d.split()) <= 3 for d in deltas)


async def test_usage_is_plausible_costs_nothing_and_names_the_demo_model() -> None:
    messages = react_messages("Write a haiku about the sea.", "Three lines.")
    response = await complete("react", messages)
    prompt_chars = sum(len(m["content"]) for m in messages)
    assert response.prompt_tokens == prompt_chars // 4
    assert response.completion_tokens == len(response.content) // 4
    assert response.cost_usd == 0.0
    assert response.model == "demo"


@pytest.mark.parametrize(
    ("purpose", "messages", "tools"),
    [
        ("crew_plan", user(PROMPTS.render("crew_plan", tasks=CREW_TASKS)), None),
        ("agent_plan", agent_plan_messages("Compute 12 * 7."), [CREATE_PLAN]),
        ("react", react_messages("What is 12 * 7?", "A number."), [CALCULATOR]),
    ],
)
async def test_the_same_request_always_gets_the_same_answer(
    purpose: str, messages: list[Message], tools: list[dict[str, Any]] | None
) -> None:
    first = await complete(purpose, messages, tools=tools)
    second = await complete(purpose, messages, tools=tools)
    assert first == second


async def test_the_last_approved_step_writes_the_whole_tasks_deliverable_from_its_context() -> None:
    text = PROMPTS.render(
        "step_executor", **PERSONA,
        description="Review the context you got and expand each topic into a full section for a report.",
        expected_output="A fully fledged report with the main topics.",
        context="- Open models caught up\n- Agents went mainstream", dependency_results="none",
        step="Step 4: Check the deliverable against the expected output",
    ) + "\n\n" + PROMPTS.text("step_last")
    answer = (await complete("step", user(text))).content
    assert answer.startswith("# Report") and "Step 4" not in answer.splitlines()[0]
    assert "## Open models caught up" in answer and "## Agents went mainstream" in answer
