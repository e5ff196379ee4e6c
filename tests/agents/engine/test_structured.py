"""Structured answers negotiated per LLM (``agents.engine.structured``) and the tolerant reading of
what weak models write (``plan_parsing`` through json-repair), over the scripted LLM."""

from __future__ import annotations

import pytest

from agents.engine.capabilities import Capabilities
from agents.engine.gateway import LiteLLMGateway
from agents.engine.llm import (
    FormUnsupportedError,
    LLMError,
    LLMRequest,
    ToolsUnsupportedError,
    tool_call_response,
)
from agents.engine.plan_parsing import (
    extract_json_array,
    extract_json_object,
    is_placeholder_step,
    parse_observation,
    parse_plan_text,
)
from agents.engine.planning import run_plan_and_act
from agents.engine.specs import LLMSpec, PlanningConfigSpec
from agents.engine.structured import PLAIN, Shape, ask_structured, forms_for
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import form_of, prose, refuses_json_schema

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
SHAPE = Shape(name="verdict", schema=SCHEMA, tool=True, instructions='Answer {"ok": true}.')


def ask(llm: object = None) -> LLMRequest:
    return LLMRequest(llm=llm or make_llm(), messages=[{"role": "user", "content": "Judge it."}], purpose="observe")


def form(request: LLMRequest) -> str:
    if request.tools:
        return "tools"
    if request.response_schema is not None:
        return request.response_form
    return PLAIN


def test_forms_go_from_tools_down_to_plain_and_leave_out_what_was_refused() -> None:
    caps = Capabilities()
    llm = make_llm()
    assert forms_for(caps, llm, SHAPE) == ["tools", "json_schema", "json_object", PLAIN]
    assert forms_for(caps, make_llm(supports_tools=False), SHAPE) == ["json_schema", "json_object", PLAIN]
    assert forms_for(caps, llm, Shape(name="x", schema=SCHEMA)) == ["json_schema", "json_object", PLAIN]
    assert forms_for(caps, make_llm(refuses=("json_schema",)), SHAPE) == ["tools", "json_object", PLAIN]


async def test_each_refusal_is_learned_and_the_next_form_tried_in_the_same_call() -> None:
    ctx, gateway, _, _ = make_ctx([
        ToolsUnsupportedError("does not support tools"),
        FormUnsupportedError("Input should be 'text' or 'json_object'", form="json_schema"),
        '{"ok": true}',
    ])

    answer = await ask_structured(ctx.llm, ask(), SHAPE)

    assert (answer.form, answer.requests, answer.text) == ("json_object", 3, '{"ok": true}')
    assert [form(r) for r in gateway.requests] == ["tools", "json_schema", "json_object"]
    assert gateway.requests[2].response_schema == SCHEMA
    # Where no schema travels, the shape in words does (and the question is kept).
    assert gateway.requests[2].messages[-1]["content"] == 'Judge it.\n\nAnswer {"ok": true}.'
    assert gateway.requests[0].messages[-1]["content"] == "Judge it."


async def test_a_refused_form_is_never_sent_again_to_that_llm() -> None:
    ctx, gateway, _, _ = make_ctx([
        ToolsUnsupportedError("does not support tools"),
        FormUnsupportedError("json_schema is not supported", form="json_schema"),
        '{"ok": true}',
        '{"ok": false}',
    ])

    await ask_structured(ctx.llm, ask(), SHAPE)
    second = await ask_structured(ctx.llm, ask(), SHAPE)

    assert (second.form, second.requests) == ("json_object", 1)
    assert [form(r) for r in gateway.requests] == ["tools", "json_schema", "json_object", "json_object"]
    other = make_llm(key="another-llm")
    assert ctx.llm.capabilities.accepts(other, "tools")  # learned per LLM, not for all


async def test_the_learned_refusal_is_told_to_the_site_once() -> None:
    told: list[tuple[str, str]] = []

    async def on_learned(llm: object, refused: str) -> None:
        told.append((llm.key, refused))  # type: ignore[attr-defined]

    ctx, _, _, _ = make_ctx([ToolsUnsupportedError("no tools"), '{"ok": true}', '{"ok": true}'])
    ctx.llm.capabilities.on_learned = on_learned

    await ask_structured(ctx.llm, ask(), SHAPE)
    await ask_structured(ctx.llm, ask(), SHAPE)

    assert told == [("test-llm", "tools")]


async def test_other_errors_are_not_negotiated() -> None:
    ctx, gateway, _, _ = make_ctx([LLMError("invalid api key")])

    with pytest.raises(LLMError, match="invalid api key"):
        await ask_structured(ctx.llm, ask(), SHAPE)

    assert gateway.calls == 1
    assert ctx.llm.capabilities.accepts(make_llm(), "tools")


async def test_a_refused_plain_request_has_nothing_left_to_drop() -> None:
    refusal = FormUnsupportedError("nope", form="json_object")
    ctx, gateway, _, _ = make_ctx([refusal, refusal, refusal])

    with pytest.raises(FormUnsupportedError):
        await ask_structured(ctx.llm, ask(make_llm(refuses=("json_schema",), supports_tools=False)), SHAPE)

    assert [form(r) for r in gateway.requests] == ["json_object", PLAIN]


async def test_a_tool_answer_is_read_from_its_arguments() -> None:
    ctx, _, _, _ = make_ctx([tool_call_response("verdict", {"ok": True})])

    answer = await ask_structured(ctx.llm, ask(), SHAPE)

    assert (answer.form, answer.text) == ("tools", '{"ok": true}')


# What weak models write, read through json-repair --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an unescaped newline inside a string
        ('{"plans": [{"task_number": 1, "steps": ["Find the\nsources", "Write"]}]}',
         {"plans": [{"task_number": 1, "steps": ["Find the\nsources", "Write"]}]}),
        # single quotes and Python's words
        ("Here you go: {'plans': [{'task_number': 1, 'steps': ['Find'], 'done': True}]}",
         {"plans": [{"task_number": 1, "steps": ["Find"], "done": True}]}),
        # missing quotes
        ("{plans: [{task_number: 1, steps: [Find sources, Write it up]}]}",
         {"plans": [{"task_number": 1, "steps": ["Find sources", "Write it up"]}]}),
        # missing brackets at the end
        ('```json\n{"plans": [{"task_number": 1, "steps": ["Find", "Write"]\n```',
         {"plans": [{"task_number": 1, "steps": ["Find", "Write"]}]}),
        # an answer cut off mid-string
        ('{"plans": [{"task_number": 1, "steps": ["Find", "Write the rep',
         {"plans": [{"task_number": 1, "steps": ["Find", "Write the rep"]}]}),
        # the first value that fits wins, after one that does not
        ('First {"note": "thinking"} then {"plans": []}', {"plans": []}),
    ],
    ids=["newline", "single-quotes", "no-quotes", "no-brackets", "cut-off", "first-that-fits"],
)
def test_json_from_weak_models_is_mended(text: str, expected: dict[str, object]) -> None:
    assert extract_json_object(text, "plans") == expected


def test_prose_without_json_stays_prose() -> None:
    assert extract_json_object("I would start by reading about it.", "plans") is None
    assert extract_json_array("No list here.") is None
    assert parse_plan_text("I would start by reading about it.").steps == []


def test_a_mended_plan_keeps_its_not_ready_verdict_from_the_prose_around_it() -> None:
    draft = parse_plan_text("{'plan': 'Add', 'steps': ['Add 2 and 3'], 'ready': True}\nActually: NOT READY")

    assert [s.description for s in draft.steps] == ["Add 2 and 3"] and draft.ready is False


def test_a_review_with_single_quotes_and_a_missing_brace_is_read() -> None:
    seen = parse_observation("{'success': True, 'learned': 'the sum is 5', 'goal_achieved': False")

    assert seen is not None and seen.success and seen.learned == "the sum is 5"


@pytest.mark.parametrize("text", ["...", "…", "", "  ", "Step 1", "<step>", "[first step]", "TODO", '"..."'])
def test_placeholder_steps_are_told_apart(text: str) -> None:
    assert is_placeholder_step(text)


@pytest.mark.parametrize("text", ["Search the web", "Step 1: search the web", "... then summarise", "Write."])
def test_real_steps_are_not_placeholders(text: str) -> None:
    assert not is_placeholder_step(text)


# Through real litellm to the fake server ------------------------------------------------------------


async def test_the_agent_planner_on_a_prose_model_stops_refining_after_one_identical_answer(
    fake_llm_server: FakeLLMServer,
) -> None:
    fake_llm_server.default = refuses_json_schema(prose("I could look it up, but I am not ready yet."))
    llm = LLMSpec(key="local", model="openai/smollm2-135m", api_base=fake_llm_server.base_url,
                  api_key="sk-local", timeout=5.0, max_retries=3, supports_tools=False, stream=False)
    ctx, _, sink, _ = make_ctx(gateway=LiteLLMGateway())  # type: ignore[arg-type]
    agent = make_agent(llm=llm, max_iter=1)

    await run_plan_and_act(ctx, agent, make_task(), PlanningConfigSpec())

    planning = [r for r in fake_llm_server.requests
                if "Write a plan" in r.last_user_text() or "previous plan" in r.last_user_text()]
    # json_schema refused once (never retried), then JSON mode: the plan, one refinement, no more.
    assert [form_of(r) for r in planning] == ["json_schema", "json_object", "json_object"]
    assert [e.data["attempt"] for e in sink.of_type("agent_plan.completed")] == [1, 2]


def test_a_call_record_says_when_the_schema_went_in_json_mode() -> None:
    from agents.engine.structured import request_in_form
    from agents.engine.transcript import call_record

    request = request_in_form(ask(), Shape(name="verdict", schema={**SCHEMA, "title": "Verdict"}), "json_object")

    assert call_record(request).response_format == "Verdict (json_object)"
