"""A task's structured output (issue #18): asked natively where the LLM takes a schema, else read
tolerantly from text; one repair call naming the validation errors; a second misfit fails the
task; the JSON is what a later task receives. Scripted, then through real litellm."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agents.engine.agent import AgentError, run_agent
from agents.engine.gateway import LiteLLMGateway
from agents.engine.output_json import OutputSchemaError, read_json, schema_errors
from agents.engine.specs import GuardrailSpec, LLMSpec
from crews.engine.kickoff import run_crew
from crews.engine.specs import CrewTaskSpec
from tests.agents.engine.helpers import make_agent, make_ctx, make_llm, make_task, non_llm_types
from tests.crews.engine.helpers import make_crew
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import answers, forms_sent, refuses_json_object, refuses_json_schema

SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}
TRIPS = [{"city": "Lisbon", "days": 2}, {"city": "Porto", "days": 1}]


def test_json_is_read_from_fences_and_prose_and_errors_say_where() -> None:
    assert read_json('Here it is:\n```json\n[{"city": "Lisbon", "days": 2}]\n```', SCHEMA) == TRIPS[:1]
    assert read_json("no JSON at all", SCHEMA) is None
    assert schema_errors([{"city": "Lisbon", "days": "two"}], SCHEMA) == ["at $[0].days: 'two' is not of type 'integer'"]
    assert schema_errors({"city": "Lisbon"}, SCHEMA) == ["{'city': 'Lisbon'} is not of type 'array'"]


async def test_an_agent_without_tools_is_asked_natively_and_its_json_kept() -> None:
    ctx, gateway, _sink, _ = make_ctx([json.dumps(TRIPS)])
    task = make_task("Plan trips", output_json_schema=SCHEMA)

    result = await run_agent(ctx, make_agent(), task)

    assert result.output_json == TRIPS
    assert json.loads(result.output) == TRIPS
    (request,) = gateway.requests
    assert request.response_schema == SCHEMA and request.response_form == "json_schema"
    assert request.purpose == "react"
    assert "must be JSON that matches this JSON schema" in request.messages[-1]["content"]


async def test_in_text_mode_the_answer_is_read_from_prose() -> None:
    llm = make_llm(refuses=frozenset({"json_schema", "json_object"}))
    ctx, gateway, _, _ = make_ctx([f"Sure! ```json\n{json.dumps(TRIPS)}\n``` Enjoy."])

    result = await run_agent(ctx, make_agent(llm=llm), make_task(output_json_schema=SCHEMA))

    assert result.output_json == TRIPS
    assert gateway.requests[0].response_schema is None


async def test_one_malformed_answer_is_repaired_with_the_errors_named() -> None:
    ctx, gateway, _, _ = make_ctx(['[{"city": "Lisbon", "days": "two"}]', json.dumps(TRIPS)])

    result = await run_agent(ctx, make_agent(), make_task(output_json_schema=SCHEMA))

    assert result.output_json == TRIPS
    assert gateway.purposes() == ["react", "react"]
    repair = gateway.requests[1]
    assert repair.messages[-2] == {"role": "assistant", "content": '[{"city": "Lisbon", "days": "two"}]'}
    assert "- at $[0].days: 'two' is not of type 'integer'" in repair.messages[-1]["content"]
    assert repair.response_schema == SCHEMA


async def test_a_second_malformed_answer_fails_the_task_clearly() -> None:
    ctx, gateway, _, _ = make_ctx(["No idea, sorry.", '{"city": "Lisbon"}'])

    with pytest.raises(AgentError) as failed:
        await run_agent(ctx, make_agent(), make_task(output_json_schema=SCHEMA))

    assert str(failed.value) == (
        "The answer does not match the task's output schema, even after one repair: "
        "{'city': 'Lisbon'} is not of type 'array'"
    )
    assert gateway.calls == 2  # no retries beyond the one repair


async def test_an_agent_with_tools_answers_inline_and_its_json_is_read() -> None:
    ctx, gateway, _, _ = make_ctx([f"Thought: done\nFinal Answer: {json.dumps(TRIPS)}"])
    agent = make_agent("calculator", llm=make_llm(supports_tools=False))

    result = await run_agent(ctx, agent, make_task(output_json_schema=SCHEMA))

    assert result.output_json == TRIPS
    assert gateway.requests[0].response_schema is None  # tools and a schema do not mix


async def test_the_schema_and_the_checks_work_together() -> None:
    ctx, gateway, sink, _ = make_ctx(['[{"city": "Faro", "days": 1}]', json.dumps(TRIPS)])
    task = make_task(output_json_schema=SCHEMA, guardrails=GuardrailSpec(must_contain=("Lisbon",)))

    result = await run_agent(ctx, make_agent(), task)

    assert result.output_json == TRIPS
    assert non_llm_types(sink) == ["guardrail.failed", "guardrail.passed"]
    assert "- The answer must contain 'Lisbon'." in gateway.requests[1].messages[-1]["content"]


async def test_a_later_task_receives_the_json_and_the_event_carries_it() -> None:
    crew = make_crew(planning=False)
    first, second = crew.tasks
    crew = crew.model_copy(update={"tasks": (
        CrewTaskSpec.model_validate({**first.model_dump(), "output_schema": SCHEMA}), second,
    )})
    ctx, gateway, sink, _ = make_ctx([json.dumps(TRIPS), "A report."])

    result = await run_crew(ctx, crew.interpolated({"topic": "travel"}))

    assert result.tasks["11"].output_json == TRIPS
    completed = sink.of_type("task.completed")
    assert completed[0].data["output_json"] == TRIPS
    assert "output_json" not in completed[1].data
    assert json.dumps(TRIPS, ensure_ascii=False, indent=2) in gateway.requests[1].messages[-1]["content"]


# Through real litellm to the fake server ------------------------------------------------------------


def local_llm(server: FakeLLMServer) -> LLMSpec:
    return LLMSpec(key="local", model="openai/local", api_base=server.base_url, api_key="sk-local",
                   timeout=5.0, max_retries=0, supports_tools=False, stream=False)


async def test_native_structured_output_from_the_fake_server(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.json(TRIPS))
    ctx, _, _, _ = make_ctx(gateway=LiteLLMGateway())  # type: ignore[arg-type]

    result = await run_agent(ctx, make_agent(llm=local_llm(fake_llm_server)), make_task(output_json_schema=SCHEMA))

    assert result.output_json == TRIPS
    assert forms_sent(fake_llm_server) == ["json_schema"]
    sent = fake_llm_server.requests[0].body["response_format"]
    assert sent["json_schema"]["schema"] == SCHEMA


async def test_text_mode_on_a_server_without_json_modes(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.default = refuses_json_schema(refuses_json_object(
        answers(f"Here you go:\n```json\n{json.dumps(TRIPS)}\n```")))
    ctx, _, _, _ = make_ctx(gateway=LiteLLMGateway())  # type: ignore[arg-type]

    result = await run_agent(ctx, make_agent(llm=local_llm(fake_llm_server)), make_task(output_json_schema=SCHEMA))

    assert result.output_json == TRIPS
    assert forms_sent(fake_llm_server) == ["json_schema", "json_object", "plain"]


async def test_the_fake_server_repairs_once_then_fails(fake_llm_server: FakeLLMServer) -> None:
    fake_llm_server.add(Reply.text("not json"), Reply.json({"city": "Lisbon"}))
    ctx, _, _, _ = make_ctx(gateway=LiteLLMGateway())  # type: ignore[arg-type]

    with pytest.raises(AgentError, match="even after one repair"):
        await run_agent(ctx, make_agent(llm=local_llm(fake_llm_server)), make_task(output_json_schema=SCHEMA))
    assert "the answer holds no JSON value" in fake_llm_server.requests[1].last_user_text()


def test_the_crew_planner_is_told_the_schema_and_the_checks() -> None:
    from crews.engine.planner import task_summary

    crew = make_crew()
    first = CrewTaskSpec.model_validate({
        **crew.tasks[0].model_dump(), "output_schema": SCHEMA,
        "guardrails": {"criteria": ["Names Lisbon"], "max_chars": 800},
    })
    crew = crew.model_copy(update={"tasks": (first, crew.tasks[1])})
    summary = task_summary(crew, first, None)
    assert f"Its answer must be JSON matching this schema: {json.dumps(SCHEMA)}" in summary
    assert "Its answer is checked against: Names Lisbon; at most 800 characters" in summary
    assert "checked against" not in task_summary(crew, crew.tasks[1], None)


# Schemas that could reach out or stall the engine (review of #18) -------------------------------------


@pytest.fixture
def listener() -> Any:
    """A server on 127.0.0.1 that records every request it gets: a schema must never fetch."""
    import http.server
    import threading

    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            hits.append(self.path)
            body = json.dumps({"type": "integer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_ref_is_never_fetched_and_is_the_schemas_fault(listener: Any) -> None:
    base, hits = listener
    schema = {"type": "object", "properties": {"a": {"$ref": f"{base}/number.json"}}}

    with pytest.raises(OutputSchemaError, match="cannot be resolved") as failed:
        schema_errors({"a": 1}, schema)

    assert f"{base}/number.json" in str(failed.value)
    assert hits == []


def test_local_refs_still_resolve() -> None:
    schema = {"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}
    assert schema_errors({"a": 1}, schema) == []
    assert schema_errors({"a": "x"}, schema) == ["at $.a: 'x' is not of type 'integer'"]


async def test_a_missing_local_ref_fails_the_task_plainly_without_a_repair() -> None:
    ctx, gateway, _, _ = make_ctx(['{"a": 1}'])
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}

    with pytest.raises(AgentError) as failed:
        await run_agent(ctx, make_agent(), make_task(output_json_schema=schema))

    assert str(failed.value) == (
        "The task's output schema has a reference that cannot be resolved: #/$defs/missing"
    )
    assert gateway.calls == 1


def test_a_schema_pattern_that_backtracks_is_stopped_in_time() -> None:
    import time

    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a|aa)+$"}}}
    started = time.monotonic()
    errors = schema_errors({"s": "a" * 40 + "!"}, schema)
    assert time.monotonic() - started < 3
    assert errors == ["at $.s: the pattern '^(a|aa)+$' took too long to check"]
    assert schema_errors({"s": "aaa"}, schema) == []
    assert schema_errors({"s": "b"}, schema) == ["at $.s: 'b' does not match '^(a|aa)+$'"]


def test_pattern_properties_are_refused_as_the_schemas_fault() -> None:
    schema = {"type": "object", "patternProperties": {"^(a|aa)+$": {"type": "string"}}}
    with pytest.raises(OutputSchemaError, match="patternProperties"):
        schema_errors({"a" * 40 + "!": "x"}, schema)
    # A property that happens to be called so is a name, not the keyword.
    named = {"type": "object", "properties": {"patternProperties": {"type": "string"}}}
    assert schema_errors({"patternProperties": "x"}, named) == []


def test_the_patterns_of_one_answer_share_one_time_limit() -> None:
    import time

    schema = {"type": "array", "items": {"type": "string", "pattern": "^(a|aa)+$"}}
    started = time.monotonic()
    errors = schema_errors(["a" * 40 + "!"] * 12, schema)
    assert time.monotonic() - started < 3  # not 12 × the time limit of one search
    assert errors[0] == "at $[0]: the pattern '^(a|aa)+$' took too long to check"
    assert len(errors) == 10
