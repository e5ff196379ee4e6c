"""The crew planner against the servers people run locally and the weak models they serve (issue
#14): through real litellm and HTTP to the fake server's plain-server modes, and over the scripted
LLM for what a model's answer looks like (cut off, placeholders)."""

from __future__ import annotations

from typing import Any

import pytest

from agents.engine.gateway import LiteLLMGateway
from agents.engine.llm import LLMResponse, tool_call_response
from agents.engine.specs import LLMSpec
from crews.engine.planner import (
    CUT_OFF_WARNING,
    MAX_PLAN_REQUESTS,
    OWN_CAP_NOTE,
    PROSE_FAILURE,
    SUBMIT_TOOL,
    CrewPlanError,
    draft_crew_plan,
)
from tests.agents.engine.helpers import make_ctx, make_llm
from tests.crews.engine.helpers import make_crew
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import (
    answers,
    forms_sent,
    prose,
    refuses_json_schema,
    refuses_tools,
)

PLAN = {"plans": [{"task_number": 1, "steps": ["Find sources"]}, {"task_number": 2, "steps": ["Write it"]}]}


def local_llm(server: FakeLLMServer, **kw: Any) -> LLMSpec:
    values: dict[str, Any] = {
        "key": "local", "model": "openai/smollm2-135m", "api_base": server.base_url,
        "api_key": "sk-local", "timeout": 5.0, "max_retries": 3, "supports_tools": False,
    }
    values.update(kw)
    return LLMSpec(**values)


def live_ctx() -> tuple[Any, Any]:
    ctx, _gateway, sink, _clock = make_ctx(gateway=LiteLLMGateway())  # type: ignore[arg-type]
    return ctx, sink


async def draft(ctx: Any, llm: LLMSpec) -> Any:
    crew = make_crew(planning_llm=llm).interpolated({"topic": "tides"})
    return await draft_crew_plan(ctx, crew, llm=llm)


@pytest.mark.parametrize(
    ("server", "tools", "forms"),
    [
        (refuses_json_schema, False, ["json_schema", "json_object"]),
        (lambda inner: refuses_tools(inner, style="ollama"), True, ["tools", "json_schema"]),
        (lambda inner: refuses_tools(inner, style="llama_server"), True, ["tools", "json_schema"]),
        (lambda inner: refuses_tools(refuses_json_schema(inner), style="llama_server"), True,
         ["tools", "json_schema", "json_object"]),
    ],
    ids=["llama-cpp-python", "ollama-no-tools", "llama-server-no-jinja", "refuses-both"],
)
async def test_a_plan_is_drafted_in_at_most_three_requests_on_a_server_that_refuses_a_form(
    fake_llm_server: FakeLLMServer, server: Any, tools: bool, forms: list[str]
) -> None:
    fake_llm_server.default = server(answers(PLAN))
    ctx, sink = live_ctx()

    plan = await draft(ctx, local_llm(fake_llm_server, supports_tools=tools))

    assert plan.steps == {"11": ["Find sources"], "12": ["Write it"]}
    assert forms_sent(fake_llm_server) == forms
    assert fake_llm_server.request_count <= MAX_PLAN_REQUESTS
    assert "crew_plan.failed" not in sink.types


async def test_a_refused_form_is_not_sent_again_by_the_same_caller(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.default = refuses_tools(refuses_json_schema(answers(PLAN)), style="llama_server")
    ctx, _ = live_ctx()
    llm = local_llm(fake_llm_server, supports_tools=True)

    await draft(ctx, llm)
    before = fake_llm_server.request_count
    await draft(ctx, llm)

    assert forms_sent(fake_llm_server)[before:] == ["json_object"]


async def test_on_a_prose_model_drafting_ends_in_three_requests_with_a_plain_reason(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = refuses_tools(refuses_json_schema(prose()), style="llama_server")
    ctx, sink = live_ctx()

    with pytest.raises(CrewPlanError) as failed:
        await draft(ctx, local_llm(fake_llm_server, supports_tools=True))

    # tools and json_schema refused, then prose in JSON mode: no request is left for a repair
    assert forms_sent(fake_llm_server) == ["tools", "json_schema", "json_object"]
    assert str(failed.value) == PROSE_FAILURE
    assert [e.data["error"] for e in sink.of_type("crew_plan.failed")] == [PROSE_FAILURE]
    assert "Traceback" not in PROSE_FAILURE and "litellm" not in PROSE_FAILURE


async def test_a_prose_model_that_takes_every_form_gets_one_repair_then_the_plain_reason(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = prose()
    ctx, _ = live_ctx()

    with pytest.raises(CrewPlanError, match="answered in prose"):
        await draft(ctx, local_llm(fake_llm_server))

    assert forms_sent(fake_llm_server) == ["json_schema", "json_schema"]
    repair = fake_llm_server.requests[1].last_user_text()
    assert repair.startswith("Your last answer was not valid JSON for this schema:")


# What an answer looks like (the scripted LLM) ------------------------------------------------------


def plans(*items: tuple[int, list[str]], **kw: Any) -> LLMResponse:
    response = tool_call_response(SUBMIT_TOOL, {"plans": [{"task_number": n, "steps": s} for n, s in items]})
    for key, value in kw.items():
        setattr(response, key, value)
    return response


async def test_an_answer_cut_off_at_its_length_limit_is_asked_again_with_more_room_and_fewer_steps() -> None:
    cut = LLMResponse(content='{"plans": [{"task_number": 1, "steps": ["Find", "Wri', finish_reason="length",
                      completion_tokens=300)
    ctx, gateway, sink, _ = make_ctx([cut, plans((1, ["Find"]), (2, ["Write"]))])
    crew = make_crew(planning_llm=make_llm(supports_tools=False)).interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    assert draft_.steps == {"11": ["Find"], "12": ["Write"]}
    retry = gateway.requests[1]
    assert retry.max_tokens == 600
    assert retry.messages[-1]["content"].startswith("Your last answer was cut off at its length limit")
    assert "fewer steps" in retry.messages[-1]["content"]
    assert not sink.of_type("crew_plan.warning")


async def test_a_second_cut_off_answer_is_kept_with_a_warning() -> None:
    cut = plans((1, ["Find"]), (2, ["Wri"]), finish_reason="length", completion_tokens=100)
    ctx, gateway, sink, _ = make_ctx([cut, cut])
    crew = make_crew().interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    assert gateway.calls == 2 and draft_.steps == {"11": ["Find"], "12": ["Wri"]}
    assert "cut off at its length limit" in sink.of_type("crew_plan.warning")[0].data["message"]


async def test_placeholder_steps_are_left_out_and_the_task_warned_of() -> None:
    ctx, _, sink, _ = make_ctx([plans((1, ["...", "Find sources"]), (2, ["...", "…"]))])
    crew = make_crew().interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    assert draft_.steps == {"11": ["Find sources"]}
    assert draft_.task_warnings["12"] == [
        'The planner wrote 2 placeholder step(s) for task 2 (like "..."); they were left out.',
        "The planner wrote no steps for task 2; it will run without a plan.",
    ]
    assert len(sink.of_type("crew_plan.warning")) == 3


async def test_a_plan_of_placeholders_only_gets_the_repair_request() -> None:
    copied = plans((1, ["...", "..."]), (2, ["..."]))  # the prompt's own example, copied
    ctx, gateway, _, _ = make_ctx([copied, plans((1, ["Find"]), (2, ["Write"]))])
    crew = make_crew().interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    assert gateway.calls == 2 and draft_.steps == {"11": ["Find"], "12": ["Write"]}
    assert "no task got a usable step" in gateway.requests[1].messages[-1]["content"]


async def test_a_cut_off_draft_that_could_be_read_is_kept_when_the_repair_answers_prose() -> None:
    cut = plans((1, ["Find"]), (2, ["Wri"]), finish_reason="length", completion_tokens=300)
    ctx, gateway, sink, _ = make_ctx([cut, "Sorry, here is a shorter plan: find things, then write."])
    crew = make_crew().interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    assert gateway.calls == 2 and draft_.steps == {"11": ["Find"], "12": ["Wri"]}
    assert gateway.requests[1].max_tokens == 600
    warnings = [e.data["message"] for e in sink.of_type("crew_plan.warning")]
    assert warnings == [CUT_OFF_WARNING] == draft_.warnings
    assert "crew_plan.failed" not in sink.types


async def test_a_cut_off_at_the_llms_own_max_tokens_says_that_setting_limits_it() -> None:
    cut = plans((1, ["Find"]), (2, ["Wri"]), finish_reason="length", completion_tokens=100)
    llm = make_llm(params={"max_tokens": 100})
    ctx, gateway, sink, _ = make_ctx([cut, "no JSON this time"])
    crew = make_crew(planning_llm=llm).interpolated({"topic": "AI"})

    draft_ = await draft_crew_plan(ctx, crew, llm=crew.planning_llm)

    # The repair asks for twice the room, but the LLM's own setting wins: and the warning says so.
    assert [r.max_tokens for r in gateway.requests] == [100, 100]
    assert draft_.steps == {"11": ["Find"], "12": ["Wri"]}
    assert draft_.warnings[0] == f"{CUT_OFF_WARNING} {OWN_CAP_NOTE.format(own=100)}"
    assert "max_tokens setting (100)" in sink.of_type("crew_plan.warning")[0].data["message"]
