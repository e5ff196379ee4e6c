"""The agents app's REST API: LLMs (write-only keys), prompt templates, tools and agents."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from ninja.testing import TestClient

from agents.engine.prompts import DEFAULTS as PROMPT_DEFAULTS
from agents.models import LLM, Agent, PlanningConfig
from planner_site.api import api
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture

KEY = "sk-test-0123456789-SECRET-tail"


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def fields_of(response: Any) -> list[str]:
    return [e["field"] for e in response.json()["errors"]]


def assert_invalid(response: Any, field: str) -> dict[str, Any]:
    """A 422 in API.md's error format whose first error names ``field``."""
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"detail", "code", "errors"}
    assert body["errors"][0]["field"] == field, body
    return body


def demo_llm() -> LLM:
    return LLM.objects.get(builtin=True)


def raw_key_column(llm_id: int) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT api_key_encrypted, api_key_tail FROM agents_llm WHERE id = %s", [llm_id]
        )
        return cursor.fetchone()


@pytest.fixture
def keyed_llm(client: TestClient, admin_user: Any) -> dict[str, Any]:
    response = client.post(
        "/llms",
        json={"name": "GPT", "model": "openai/gpt-4o-mini", "api_key": KEY},
        user=admin_user,
    )
    assert response.status_code == 201, response.content
    return response.json()


# LLMs ------------------------------------------------------------------------------------------


def test_anyone_signed_in_lists_llms_with_the_demo_model_as_builtin_default(client, viewer):
    response = client.get("/llms", user=viewer)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    [demo] = body["items"]
    assert demo["builtin"] is True and demo["is_default"] is True
    assert demo["api_key_set"] is False and demo["api_key_tail"] is None
    assert {
        "id",
        "name",
        "model",
        "api_base",
        "api_key_set",
        "api_key_tail",
        "is_default",
        "supports_tools",
        "params",
        "builtin",
    } <= set(demo)
    assert "api_key" not in demo and "api_key_encrypted" not in demo


def test_an_admin_adds_an_llm_whose_key_is_stored_encrypted_and_never_returned(client, admin_user):
    response = client.post(
        "/llms",
        json={
            "name": "GPT",
            "model": "openai/gpt-4o-mini",
            "api_base": "http://127.0.0.1:8765/v1",
            "api_key": KEY,
            "params": {"temperature": 0.2, "max_tokens": 500},
            "supports_tools": False,
        },
        user=admin_user,
    )

    assert response.status_code == 201
    assert KEY.encode() not in response.content
    body = response.json()
    assert body["api_key_set"] is True
    assert body["api_key_tail"] == "tail"
    assert body["supports_tools"] is False
    assert body["params"] == {"temperature": 0.2, "max_tokens": 500}
    assert body["is_default"] is False and body["builtin"] is False
    encrypted, tail = raw_key_column(body["id"])
    assert encrypted and KEY not in encrypted and "SECRET" not in encrypted
    assert tail == "tail"
    assert LLM.objects.get(pk=body["id"]).get_api_key() == KEY


def test_the_llm_key_appears_in_no_response_of_the_llm_endpoints(client, admin_user, keyed_llm):
    llm_id = keyed_llm["id"]
    responses = [
        client.get("/llms", user=admin_user),
        client.get(f"/llms/{llm_id}", user=admin_user),
        client.patch(f"/llms/{llm_id}", json={"name": "GPT 4o mini"}, user=admin_user),
        client.patch(f"/llms/{llm_id}", json={"model": "nope"}, user=admin_user),
        client.post(
            "/llms", json={"name": "GPT 4o mini", "model": "x/y", "api_key": KEY}, user=admin_user
        ),
    ]
    for response in responses:
        assert KEY.encode() not in response.content
        assert b"SECRET" not in response.content


def test_supports_tools_null_means_decided_automatically(client, admin_user):
    response = client.post(
        "/llms", json={"name": "Local", "model": "ollama/llama3.2"}, user=admin_user
    )

    assert response.status_code == 201
    assert response.json()["supports_tools"] is None


def test_patch_without_api_key_keeps_the_stored_key(client, admin_user, keyed_llm):
    response = client.patch(
        f"/llms/{keyed_llm['id']}", json={"params": {"temperature": 1}}, user=admin_user
    )

    assert response.status_code == 200
    assert response.json()["api_key_set"] is True
    assert response.json()["api_key_tail"] == "tail"
    assert LLM.objects.get(pk=keyed_llm["id"]).get_api_key() == KEY


def test_patch_with_an_empty_api_key_clears_it(client, admin_user, keyed_llm):
    response = client.patch(f"/llms/{keyed_llm['id']}", json={"api_key": ""}, user=admin_user)

    assert response.status_code == 200
    assert response.json()["api_key_set"] is False
    assert response.json()["api_key_tail"] is None
    assert raw_key_column(keyed_llm["id"]) == ("", "")


def test_a_new_api_key_is_stored_without_surrounding_spaces_and_never_with_a_line_break(
    client, admin_user, keyed_llm
):
    response = client.patch(f"/llms/{keyed_llm['id']}", json={"api_key": "  sk-pasted-key-4321 \n"}, user=admin_user)
    assert response.status_code == 200
    assert LLM.objects.get(pk=keyed_llm["id"]).get_api_key() == "sk-pasted-key-4321"
    assert_invalid(client.patch(f"/llms/{keyed_llm['id']}", json={"api_key": "sk-a\nb"}, user=admin_user), "api_key")
    assert LLM.objects.get(pk=keyed_llm["id"]).get_api_key() == "sk-pasted-key-4321"


def test_patch_with_a_new_api_key_replaces_it(client, admin_user, keyed_llm):
    response = client.patch(
        f"/llms/{keyed_llm['id']}", json={"api_key": "sk-other-key-9876"}, user=admin_user
    )

    assert response.status_code == 200
    assert response.json()["api_key_tail"] == "9876"
    assert LLM.objects.get(pk=keyed_llm["id"]).get_api_key() == "sk-other-key-9876"


def test_making_an_llm_the_default_unsets_the_previous_one(client, admin_user):
    response = client.post(
        "/llms",
        json={"name": "GPT", "model": "openai/gpt-4o-mini", "is_default": True},
        user=admin_user,
    )

    assert response.status_code == 201
    assert response.json()["is_default"] is True
    assert LLM.objects.filter(is_default=True).get().pk == response.json()["id"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "X", "model": "gpt-4o"}, "model"),
        ({"name": "X", "model": "openai/x", "params": {"colour": 1}}, "params"),
        ({"name": "X", "model": "openai/x", "params": {"temperature": "hot"}}, "params"),
        ({"name": "X", "model": "openai/x", "params": {"timeout": 0}}, "params"),
        ({"name": "X", "model": "openai/x", "params": {"connect_timeout": -1}}, "params"),
        ({"name": "X", "model": "openai/x", "params": {"first_token_timeout": 100_000}}, "params"),
        ({"name": "X", "model": "openai/x", "params": {"timeout": True}}, "params"),
        ({"name": "X", "model": "openai/x", "api_base": "not a url"}, "api_base"),
        ({"name": "X", "model": "openai/x", "context_window": 10}, "context_window"),
        ({"name": "X", "model": "openai/x", "rpm_limit": 0}, "rpm_limit"),
        ({"name": "X", "model": "openai/x", "input_price_per_1k": -1}, "input_price_per_1k"),
        ({"name": "X", "model": "openai/x", "supports_tools": "maybe"}, "supports_tools"),
        ({"name": "X", "model": "openai/x", "colour": "red"}, "colour"),
        ({"name": "Offline demo model", "model": "openai/x"}, "name"),
        ({"model": "openai/x"}, "name"),
        ({"name": "", "model": "openai/x"}, "name"),
        ({"name": 42, "model": "openai/x"}, "name"),
        ({"name": "X", "model": "openai/x", "api_key": "sk-abc\nInjected: yes"}, "api_key"),
        ({"name": "X", "model": "openai/x", "api_key": "sk-abc\rdef"}, "api_key"),
    ],
)
def test_an_invalid_llm_is_refused_naming_the_field(client, admin_user, body, field):
    assert_invalid(client.post("/llms", json=body, user=admin_user), field)


@pytest.mark.parametrize("key", ["timeout", "connect_timeout", "first_token_timeout"])
@pytest.mark.parametrize("value", [0, -5, 0.0, 86_401])
def test_a_timeout_out_of_range_is_a_422_naming_it(client, admin_user, keyed_llm, key, value):
    body = assert_invalid(client.patch(f"/llms/{keyed_llm['id']}", json={"params": {key: value}}, user=admin_user),
                          "params")

    assert key in body["detail"] and "more than 0" in body["detail"]
    assert client.patch(f"/llms/{keyed_llm['id']}", json={"params": {key: 0.5}}, user=admin_user).status_code == 200


def test_the_builtin_demo_model_cannot_change_its_model(client, admin_user):
    response = client.patch(
        f"/llms/{demo_llm().pk}", json={"model": "openai/gpt-4o"}, user=admin_user
    )

    assert_invalid(response, "model")


def test_patch_refuses_null_for_a_field_that_cannot_be_empty(client, admin_user, keyed_llm):
    assert_invalid(
        client.patch(f"/llms/{keyed_llm['id']}", json={"name": None}, user=admin_user), "name"
    )


@pytest.mark.parametrize("role", ["builder", "viewer"])
def test_only_admins_write_llms(request, client, keyed_llm, role):
    user = request.getfixturevalue(role)
    llm_id = keyed_llm["id"]

    responses = [
        client.post("/llms", json={"name": "Mine", "model": "openai/x"}, user=user),
        client.patch(f"/llms/{llm_id}", json={"name": "Mine"}, user=user),
        client.delete(f"/llms/{llm_id}", user=user),
        client.post(f"/llms/{llm_id}/test", user=user),
    ]

    for response in responses:
        assert response.status_code == 403
        assert response.json()["code"] == "forbidden"
    assert LLM.objects.get(pk=llm_id).name == "GPT"


def test_a_missing_llm_is_404(client, admin_user):
    for response in (
        client.get("/llms/9999", user=admin_user),
        client.patch("/llms/9999", json={"name": "x"}, user=admin_user),
        client.delete("/llms/9999", user=admin_user),
        client.post("/llms/9999/test", user=admin_user),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


def test_an_unused_llm_is_deleted(client, admin_user, keyed_llm):
    response = client.delete(f"/llms/{keyed_llm['id']}", user=admin_user)

    assert response.status_code == 204
    assert not LLM.objects.filter(pk=keyed_llm["id"]).exists()


def test_an_llm_still_used_by_an_agent_cannot_be_deleted(client, admin_user, builder, keyed_llm):
    client.post(
        "/agents",
        json={"name": "A", "role": "r", "goal": "g", "llm_id": keyed_llm["id"]},
        user=builder,
    )

    response = client.delete(f"/llms/{keyed_llm['id']}", user=admin_user)

    assert response.status_code == 409
    assert response.json()["code"] == "in_use"
    assert LLM.objects.filter(pk=keyed_llm["id"]).exists()


def test_an_llm_used_only_as_a_planning_llm_cannot_be_deleted(
    client, admin_user, builder, keyed_llm
):
    client.post(
        "/agents",
        json={
            "name": "A",
            "role": "r",
            "goal": "g",
            "planning_config": {"llm_id": keyed_llm["id"]},
        },
        user=builder,
    )

    assert client.delete(f"/llms/{keyed_llm['id']}", user=admin_user).status_code == 409


def test_the_builtin_llm_cannot_be_deleted(client, admin_user):
    response = client.delete(f"/llms/{demo_llm().pk}", user=admin_user)

    assert response.status_code == 409
    assert response.json()["code"] == "builtin"


def test_the_default_llm_cannot_be_deleted(client, admin_user, keyed_llm):
    client.patch(f"/llms/{keyed_llm['id']}", json={"is_default": True}, user=admin_user)

    response = client.delete(f"/llms/{keyed_llm['id']}", user=admin_user)

    assert response.status_code == 409
    assert response.json()["code"] == "in_use"


def test_testing_the_demo_llm_makes_one_offline_completion(client, admin_user):
    pytest.importorskip("agents.engine.gateway")

    response = client.post(f"/llms/{demo_llm().pk}/test", user=admin_user)

    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True, body
    assert body["error"] is None
    assert isinstance(body["latency_ms"], int) and body["latency_ms"] >= 0


def live_llm(client: TestClient, admin_user: Any, server: FakeLLMServer) -> int:
    response = client.post(
        "/llms",
        json={"name": "Fake", "model": "openai/fake", "api_base": server.base_url, "api_key": KEY},
        user=admin_user,
    )
    return response.json()["id"]


def test_testing_a_live_llm_sends_its_key_to_the_provider_only(
    client, admin_user, fake_llm_server: FakeLLMServer
):
    pytest.importorskip("agents.engine.gateway")
    fake_llm_server.default = Reply.text("OK")

    response = client.post(
        f"/llms/{live_llm(client, admin_user, fake_llm_server)}/test", user=admin_user
    )

    assert response.status_code == 200
    assert response.json()["ok"] is True, response.json()
    # One probe per request form, each with the key (only the provider gets it).
    assert len(fake_llm_server.requests) >= 5
    assert {r.authorization for r in fake_llm_server.requests} == {f"Bearer {KEY}"}
    assert KEY.encode() not in response.content


def test_a_failed_llm_test_explains_without_showing_the_key(
    client, admin_user, fake_llm_server: FakeLLMServer
):
    pytest.importorskip("agents.engine.gateway")
    fake_llm_server.default = Reply.error(401, f"Incorrect API key provided: {KEY}")

    response = client.post(
        f"/llms/{live_llm(client, admin_user, fake_llm_server)}/test", user=admin_user
    )

    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False
    assert body["error"]
    assert KEY.encode() not in response.content
    assert b"SECRET" not in response.content


# Prompt templates ------------------------------------------------------------------------------


def test_prompts_list_every_template_with_its_current_version_and_placeholders(client, builder):
    response = client.get("/prompts", user=builder)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(PROMPT_DEFAULTS)
    plan = next(p for p in body["items"] if p["key"] == "agent_plan")
    assert plan["version"] == 1
    assert plan["text"] == PROMPT_DEFAULTS["agent_plan"].text
    assert plan["placeholders"] == list(PROMPT_DEFAULTS["agent_plan"].placeholders)


def test_one_prompt_is_read_by_key(client, builder):
    response = client.get("/prompts/observe", user=builder)

    assert response.status_code == 200
    assert response.json()["key"] == "observe"
    assert client.get("/prompts/nope", user=builder).status_code == 404


def test_saving_a_prompt_adds_a_version(client, admin_user):
    response = client.put(
        "/prompts/agent_plan",
        json={"text": "Plan {description} in {max_steps} steps."},
        user=admin_user,
    )

    assert response.status_code == 200
    assert response.json()["version"] == 2
    assert client.get("/prompts/agent_plan", user=admin_user).json()["text"] == (
        "Plan {description} in {max_steps} steps."
    )
    versions = client.get("/prompts/agent_plan/versions", user=admin_user).json()
    assert versions["count"] == 2
    assert [v["version"] for v in versions["items"]] == [2, 1]
    assert versions["items"][0]["created_by"] == admin_user.username
    assert versions["items"][1]["created_by"] is None


def test_a_run_reads_every_prompt_at_once_and_sees_a_save_at_once(client, admin_user, django_assert_num_queries):
    from agents.selectors import prompt_book

    with django_assert_num_queries(1):
        book = prompt_book()
    assert book.text("agent_plan") == PROMPT_DEFAULTS["agent_plan"].text
    for text in ("Plan {description} first.", "Plan {description} again."):
        client.put("/prompts/agent_plan", json={"text": text}, user=admin_user)
        assert prompt_book().text("agent_plan") == text
    assert prompt_book().text("observe") == PROMPT_DEFAULTS["observe"].text


def test_a_prompt_with_a_placeholder_its_key_does_not_offer_is_refused(client, admin_user):
    response = client.put(
        "/prompts/agent_refine",
        json={"text": "Refine {current_plan} for {audience}"},
        user=admin_user,
    )

    body = assert_invalid(response, "text")
    assert "{audience}" in body["errors"][0]["message"]
    assert "{audience}" in body["detail"]
    assert client.get("/prompts/agent_refine", user=admin_user).json()["version"] == 1


@pytest.mark.parametrize("text", ["Plan {description", "Plan } now", "", "   "])
def test_a_prompt_with_an_unbalanced_brace_or_no_text_is_refused(client, admin_user, text):
    assert_invalid(client.put("/prompts/agent_plan", json={"text": text}, user=admin_user), "text")


def test_literal_braces_are_written_doubled(client, admin_user):
    response = client.put(
        "/prompts/agent_plan",
        json={"text": 'Answer {{"steps": []}} for {description}'},
        user=admin_user,
    )

    assert response.status_code == 200


def test_saving_an_unknown_prompt_is_404(client, admin_user):
    assert client.put("/prompts/nope", json={"text": "x"}, user=admin_user).status_code == 404


def test_only_admins_save_or_restore_prompts(client, builder):
    assert client.put("/prompts/observe", json={"text": "x"}, user=builder).status_code == 403
    response = client.post("/prompts/observe/versions/1/restore", user=builder)
    assert response.status_code == 403


def test_restoring_a_version_saves_its_text_as_a_new_version(client, admin_user):
    client.put("/prompts/observe", json={"text": "Judge {step}."}, user=admin_user)

    response = client.post("/prompts/observe/versions/1/restore", user=admin_user)

    assert response.status_code == 200
    assert response.json()["version"] == 3
    assert response.json()["text"] == PROMPT_DEFAULTS["observe"].text


def test_restoring_a_missing_version_is_404(client, admin_user):
    assert client.post("/prompts/observe/versions/9/restore", user=admin_user).status_code == 404
    assert client.post("/prompts/nope/versions/1/restore", user=admin_user).status_code == 404
    assert client.get("/prompts/nope/versions", user=admin_user).status_code == 404


# Tools -----------------------------------------------------------------------------------------


def test_tools_list_the_builtin_catalogue_with_argument_schemas(client, viewer):
    response = client.get("/tools", user=viewer)

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(body["items"]) > 0
    calculator = next(t for t in body["items"] if t["name"] == "calculator")
    assert set(calculator) == {"name", "description", "args_schema"}
    assert calculator["description"]
    assert calculator["args_schema"]["type"] == "object"


# Agents ----------------------------------------------------------------------------------------

MINIMAL = {"name": "Writer", "role": "Writer on {topic}", "goal": "Write well"}


def create_agent(client: TestClient, user: Any, **fields: Any) -> dict[str, Any]:
    response = client.post("/agents", json={**MINIMAL, **fields}, user=user)
    assert response.status_code == 201, response.content
    return response.json()


def test_a_builder_creates_an_agent_with_the_documented_defaults(client, builder):
    response = client.post("/agents", json=MINIMAL, user=builder)

    assert response.status_code == 201
    body = response.json()
    assert body == {
        **body,
        "name": "Writer",
        "role": "Writer on {topic}",
        "goal": "Write well",
        "backstory": "",
        "llm_id": None,
        "tools": [],
        "agent_type": "react",
        "max_iter": 25,
        "max_rpm": None,
        "max_execution_time": None,
        "max_retry_limit": 2,
        "respect_context_window": True,
        "planning": False,
        "planning_config": None,
        "budget": {"max_tool_calls": None, "max_input_tokens": None},
    }
    assert isinstance(body["id"], int)
    assert body["created_at"].endswith("Z")
    assert Agent.objects.get(pk=body["id"]).owner == builder


def test_an_agent_is_created_with_every_field(client, builder, keyed_llm):
    body = create_agent(
        client,
        builder,
        backstory="Years of practice.",
        llm_id=keyed_llm["id"],
        tools=["calculator", "http_get"],
        tool_options={"http_get": {"needs_approval": True, "max_usage": 2}},
        agent_type="plan_execute",
        max_iter=5,
        max_rpm=10,
        max_execution_time=60,
        max_retry_limit=0,
        respect_context_window=False,
        planning=True,
        planning_config={
            "reasoning_effort": "high",
            "observe_steps": False,
            "max_attempts": 2,
            "max_steps": 5,
            "max_replans": 0,
            "max_step_iterations": 3,
            "step_timeout": 30,
            "llm_id": keyed_llm["id"],
            "system_prompt": "Be brief.",
            "plan_prompt": "Plan {description} as {role} in {max_steps} steps with {tools}.",
            "refine_prompt": "Improve {current_plan}.",
        },
        budget={"max_tool_calls": 0, "max_input_tokens": 1000},
    )

    assert body["llm_id"] == keyed_llm["id"]
    assert body["tools"] == ["calculator", "http_get"]
    assert body["tool_options"]["http_get"] == {
        "needs_approval": True,
        "max_usage": 2,
        "result_as_answer": False,
    }
    assert body["agent_type"] == "plan_execute"
    assert body["planning_config"]["reasoning_effort"] == "high"
    assert body["planning_config"]["llm_id"] == keyed_llm["id"]
    assert body["planning_config"]["refine_prompt"] == "Improve {current_plan}."
    assert body["budget"] == {"max_tool_calls": 0, "max_input_tokens": 1000}


def test_an_empty_planning_config_takes_the_engine_defaults(client, builder):
    body = create_agent(client, builder, planning_config={})

    assert body["planning_config"] == {
        "reasoning_effort": "medium",
        "observe_steps": None,
        "max_attempts": None,
        "max_steps": 20,
        "max_replans": 3,
        "max_step_iterations": 15,
        "step_timeout": None,
        "llm_id": None,
        "system_prompt": None,
        "plan_prompt": None,
        "refine_prompt": None,
    }


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"planning_config": {"reasoning_effort": "ultra"}}, "planning_config.reasoning_effort"),
        ({"planning_config": {"max_steps": 0}}, "planning_config.max_steps"),
        ({"planning_config": {"max_replans": -1}}, "planning_config.max_replans"),
        ({"planning_config": {"max_step_iterations": 0}}, "planning_config.max_step_iterations"),
        ({"planning_config": {"max_attempts": 0}}, "planning_config.max_attempts"),
        ({"planning_config": {"step_timeout": 0}}, "planning_config.step_timeout"),
        ({"planning_config": {"max_steps": None}}, "planning_config.max_steps"),
        ({"planning_config": {"llm_id": 9999}}, "planning_config.llm_id"),
        ({"planning_config": {"colour": 1}}, "planning_config.colour"),
        ({"planning_config": {"plan_prompt": "Go {"}}, "planning_config.plan_prompt"),
        ({"planning_config": "yes"}, "planning_config"),
        ({"llm_id": 9999}, "llm_id"),
        ({"llm_id": "first"}, "llm_id"),
        ({"tools": ["teleport"]}, "tools"),
        ({"tools": ["calculator", "calculator"]}, "tools"),
        ({"tools": "calculator"}, "tools"),
        ({"tool_options": {"http_get": {"max_usage": 0}}}, "tool_options.http_get.max_usage"),
        ({"agent_type": "swarm"}, "agent_type"),
        ({"max_iter": 0}, "max_iter"),
        ({"max_iter": 10**30}, "max_iter"),
        ({"max_iter": 2.5}, "max_iter"),
        ({"max_rpm": 0}, "max_rpm"),
        ({"max_execution_time": -5}, "max_execution_time"),
        ({"max_retry_limit": -1}, "max_retry_limit"),
        ({"budget": {"max_input_tokens": 0}}, "budget.max_input_tokens"),
        ({"budget": {"max_tool_calls": -1}}, "budget.max_tool_calls"),
        ({"budget": {"max_tokens": 5}}, "budget.max_tokens"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"role": None}, "role"),
        ({"owner": 1}, "owner"),
    ],
)
def test_an_invalid_agent_is_refused_naming_the_field(client, builder, fields, field):
    assert_invalid(client.post("/agents", json={**MINIMAL, **fields}, user=builder), field)
    assert not Agent.objects.filter(owner=builder, name=fields.get("name", "Writer")).exists()


@pytest.mark.parametrize(
    ("prompt_field", "text", "bad"),
    [
        ("plan_prompt", "Plan {description} for {audience}", "{audience}"),
        ("refine_prompt", "Refine {current_plan} for {description}", "{description}"),
    ],
)
def test_a_planning_prompt_with_a_placeholder_outside_its_set_is_refused_naming_it(
    client, builder, prompt_field, text, bad
):
    response = client.post(
        "/agents", json={**MINIMAL, "planning_config": {prompt_field: text}}, user=builder
    )

    body = assert_invalid(response, f"planning_config.{prompt_field}")
    assert bad in body["errors"][0]["message"]
    assert not Agent.objects.filter(owner=builder).exists()


def test_a_duplicate_agent_name_is_refused_on_the_name(client, builder):
    create_agent(client, builder)

    assert_invalid(client.post("/agents", json=MINIMAL, user=builder), "name")


def test_two_builders_may_use_the_same_agent_name(client, builder, other_builder):
    create_agent(client, builder)
    create_agent(client, other_builder)


def test_patch_changes_only_the_fields_sent(client, builder):
    agent = create_agent(
        client, builder, backstory="Old.", max_rpm=5, planning_config={"reasoning_effort": "high"}
    )

    response = client.patch(f"/agents/{agent['id']}", json={"goal": "Write better"}, user=builder)

    assert response.status_code == 200
    body = response.json()
    assert body == {**agent, "goal": "Write better", "updated_at": body["updated_at"]}


def test_patch_merges_planning_config_and_budget_fields(client, builder):
    agent = create_agent(
        client,
        builder,
        planning_config={"reasoning_effort": "high", "max_steps": 7},
        budget={"max_tool_calls": 3, "max_input_tokens": 900},
    )

    response = client.patch(
        f"/agents/{agent['id']}",
        json={"planning_config": {"max_steps": 4}, "budget": {"max_input_tokens": None}},
        user=builder,
    )

    assert response.status_code == 200
    body = response.json()
    assert body["planning_config"]["reasoning_effort"] == "high"
    assert body["planning_config"]["max_steps"] == 4
    assert body["budget"] == {"max_tool_calls": 3, "max_input_tokens": None}


def test_patch_with_planning_config_null_turns_the_config_off(client, builder):
    agent = create_agent(client, builder, planning_config={"max_steps": 3})

    response = client.patch(f"/agents/{agent['id']}", json={"planning_config": None}, user=builder)

    assert response.status_code == 200
    assert response.json()["planning_config"] is None
    assert not PlanningConfig.objects.filter(agent_id=agent["id"]).exists()
    assert client.get(f"/agents/{agent['id']}", user=builder).json()["planning_config"] is None


def test_patch_adds_a_planning_config_to_an_agent_without_one(client, builder):
    agent = create_agent(client, builder)

    response = client.patch(
        f"/agents/{agent['id']}", json={"planning_config": {"max_steps": 3}}, user=builder
    )

    assert response.json()["planning_config"]["max_steps"] == 3
    assert response.json()["planning_config"]["reasoning_effort"] == "medium"


def test_patch_with_llm_id_null_goes_back_to_the_site_default(client, builder, keyed_llm):
    agent = create_agent(client, builder, llm_id=keyed_llm["id"])

    response = client.patch(f"/agents/{agent['id']}", json={"llm_id": None}, user=builder)

    assert response.json()["llm_id"] is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": None}, "name"),
        ({"max_iter": None}, "max_iter"),
        ({"planning_config": {"reasoning_effort": "ultra"}}, "planning_config.reasoning_effort"),
        ({"planning_config": {"plan_prompt": "{nope}"}}, "planning_config.plan_prompt"),
        ({"llm_id": 9999}, "llm_id"),
        ({"tools": ["teleport"]}, "tools"),
        ({"budget": None}, "budget"),
        ({"id": 5}, "id"),
    ],
)
def test_an_invalid_patch_is_refused_and_changes_nothing(client, builder, fields, field):
    agent = create_agent(client, builder, planning_config={"max_steps": 3})

    assert_invalid(client.patch(f"/agents/{agent['id']}", json=fields, user=builder), field)
    after = client.get(f"/agents/{agent['id']}", user=builder).json()
    assert after == agent


def test_a_builder_lists_only_their_own_agents(client, builder, other_builder):
    create_agent(client, builder)
    create_agent(client, other_builder, name="Olga's")

    body = client.get("/agents", user=builder).json()

    assert [a["name"] for a in body["items"]] == ["Writer"]
    assert body["count"] == 1


def test_agent_lists_are_paginated(client, builder):
    for name in "ABCDE":
        create_agent(client, builder, name=name)

    body = client.get("/agents?limit=2&offset=1", user=builder).json()

    assert body["count"] == 5
    assert [a["name"] for a in body["items"]] == ["B", "C"]


def test_another_users_agent_is_404_on_every_operation(client, builder, other_builder):
    agent = create_agent(client, other_builder)
    path = f"/agents/{agent['id']}"

    for response in (
        client.get(path, user=builder),
        client.patch(path, json={"goal": "mine now"}, user=builder),
        client.delete(path, user=builder),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    assert Agent.objects.get(pk=agent["id"]).goal == "Write well"


def test_an_agent_of_a_shared_crew_is_readable_but_not_writable_by_others(
    client, demo_crew, other_builder, viewer
):
    agent_id = demo_crew.agents.first().pk

    assert client.get(f"/agents/{agent_id}", user=other_builder).status_code == 200
    assert client.get(f"/agents/{agent_id}", user=viewer).status_code == 200
    assert (
        client.patch(f"/agents/{agent_id}", json={"goal": "x"}, user=other_builder).status_code
        == 404
    )
    assert client.patch(f"/agents/{agent_id}", json={"goal": "x"}, user=viewer).status_code == 403
    assert client.delete(f"/agents/{agent_id}", user=viewer).status_code == 403


def test_a_viewer_cannot_create_agents(client, viewer):
    response = client.post("/agents", json=MINIMAL, user=viewer)

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"


def test_an_admin_reads_and_changes_anyones_agent(client, admin_user, builder):
    agent = create_agent(client, builder)

    assert client.get(f"/agents/{agent['id']}", user=admin_user).status_code == 200
    response = client.patch(f"/agents/{agent['id']}", json={"goal": "Edited"}, user=admin_user)
    assert response.status_code == 200


def test_deleting_an_agent(client, builder):
    agent = create_agent(client, builder)

    assert client.delete(f"/agents/{agent['id']}", user=builder).status_code == 204
    assert client.get(f"/agents/{agent['id']}", user=builder).status_code == 404


def test_seeding_moves_an_unedited_retired_default_to_todays_text_and_keeps_an_edited_one(client, admin_user):
    from agents.engine.prompts import DEFAULTS
    from agents.models import PromptTemplate, PromptTemplateVersion
    from agents.services import prompt_seed
    from tests.agents.retired_prompts import OLD_OBSERVE, OLD_SYNTHESIS

    # An install seeded by the release before: its templates hold the old default texts.
    for key, old in (("observe", OLD_OBSERVE), ("synthesis", OLD_SYNTHESIS)):
        template = PromptTemplate.objects.get(key=key)
        template.versions.all().delete()
        PromptTemplateVersion.objects.create(template=template, number=1, text=old)
    # An admin then edited synthesis.
    assert client.put("/prompts/synthesis", json={"text": "Merge: {step_results}"}, user=admin_user).status_code == 200

    assert prompt_seed() == 1
    assert prompt_seed() == 0  # seeding again changes nothing

    observe = client.get("/prompts/observe", user=admin_user).json()
    assert (observe["version"], observe["text"]) == (2, DEFAULTS["observe"].text)
    synthesis = client.get("/prompts/synthesis", user=admin_user).json()
    assert (synthesis["version"], synthesis["text"]) == (2, "Merge: {step_results}")
