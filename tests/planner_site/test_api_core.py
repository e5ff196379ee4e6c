"""The API as a whole, through its real URLs: health, both ways to sign in, errors, OpenAPI."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent
from planner_site.tokens import token_create

AGENT = {"name": "Writer", "role": "Writer", "goal": "Write"}


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def post_json(client: Client, path: str, body: Any, **extra: Any) -> Any:
    return client.post(path, data=json.dumps(body), content_type="application/json", **extra)


@pytest.fixture
def csrf_client(builder: Any) -> tuple[Client, str]:
    """A signed-in browser session that enforces CSRF, and its token (as the docs page gets it)."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(builder)
    client.get("/api/docs")
    return client, client.cookies["csrftoken"].value


# Health ----------------------------------------------------------------------------------------


def test_health_needs_no_sign_in_and_reports_each_part(db):
    response = Client().get("/api/health")

    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "channel_layer": "ok",
        "worker": "none",
    }


# Signing in ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/agents"),
        ("get", "/api/llms"),
        ("get", "/api/crews/1"),
        ("get", "/api/tools"),
        ("post", "/api/agents"),
        ("patch", "/api/tasks/1"),
        ("delete", "/api/crews/1"),
        ("put", "/api/prompts/observe"),
    ],
)
def test_without_a_session_or_token_every_operation_is_401(db, method, path):
    client = Client(enforce_csrf_checks=True)
    if method == "get":
        response = client.get(path)
    else:
        response = getattr(client, method)(path, data="{}", content_type="application/json")

    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"
    assert set(response.json()) == {"detail", "code", "errors"}


def test_an_unknown_or_malformed_token_is_401(db):
    for header in ("Bearer cp_not-a-real-token", "Bearer ", "Basic dXNlcjpwdw==", "cp_x"):
        response = Client().get("/api/agents", HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, header


def test_a_token_of_an_inactive_user_is_401(builder):
    _token, raw = token_create(user=builder)
    builder.is_active = False
    builder.save()

    assert Client().get("/api/agents", **bearer(raw)).status_code == 401


def test_a_token_is_marked_used_at_most_once_a_minute(builder):
    from datetime import timedelta

    from django.utils import timezone

    from planner_site.models import ApiToken

    token, raw = token_create(user=builder)
    assert Client().get("/api/agents", **bearer(raw)).status_code == 200
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None

    assert Client().get("/api/agents", **bearer(raw)).status_code == 200
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    assert Client().get("/api/agents", **bearer(raw)).status_code == 200
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first - timedelta(seconds=1)
    assert ApiToken.objects.get(pk=token.pk).last_used_at <= timezone.now()


def test_a_token_reads_its_own_user(builder, other_builder):
    from planner_site.tokens import user_for_token

    _mine, raw = token_create(user=builder)
    _theirs, other = token_create(user=other_builder)

    assert user_for_token(raw) == builder
    assert user_for_token(other) == other_builder
    assert user_for_token(raw[:-1]) is None
    assert user_for_token(raw).groups.get().name == "builder"
    read = user_for_token(raw)
    fresh = type(builder).objects.get(pk=builder.pk)
    fields = [f.attname for f in fresh._meta.concrete_fields]
    assert [getattr(read, f) for f in fields] == [getattr(fresh, f) for f in fields]
    assert read.is_superuser is False and read.date_joined.tzinfo is not None
    assert not read._state.adding and read._state.db == "default"


def test_a_bearer_token_reads_and_writes_without_csrf(builder):
    _token, raw = token_create(user=builder)
    client = Client(enforce_csrf_checks=True)

    created = post_json(client, "/api/agents", AGENT, **bearer(raw))
    listed = client.get("/api/agents", **bearer(raw))

    assert created.status_code == 201, created.content
    assert listed.status_code == 200
    assert [a["name"] for a in listed.json()["items"]] == ["Writer"]


def test_a_bearer_token_acts_as_its_user(builder, other_builder):
    _token, raw = token_create(user=other_builder)
    agent_id = post_json(Client(), "/api/agents", AGENT, **bearer(raw)).json()["id"]
    _token, builders = token_create(user=builder)

    assert Client().get(f"/api/agents/{agent_id}", **bearer(builders)).status_code == 404


def test_a_session_reads_without_a_csrf_token(csrf_client):
    client, _token = csrf_client

    assert client.get("/api/agents").status_code == 200


def test_a_session_writes_only_with_the_csrf_token(csrf_client):
    client, token = csrf_client

    refused = post_json(client, "/api/agents", AGENT)
    accepted = post_json(client, "/api/agents", AGENT, HTTP_X_CSRFTOKEN=token)

    assert refused.status_code == 403
    assert refused.json()["code"] == "forbidden"
    assert accepted.status_code == 201, accepted.content
    assert accepted.json()["name"] == "Writer"


def test_a_session_patches_and_deletes_with_the_csrf_token(csrf_client):
    client, token = csrf_client
    agent_id = post_json(client, "/api/agents", AGENT, HTTP_X_CSRFTOKEN=token).json()["id"]

    patched = client.patch(
        f"/api/agents/{agent_id}",
        data=json.dumps({"goal": "Write more"}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    deleted = client.delete(f"/api/agents/{agent_id}", HTTP_X_CSRFTOKEN=token)

    assert patched.status_code == 200 and patched.json()["goal"] == "Write more"
    assert deleted.status_code == 204


def test_the_api_never_redirects_to_the_sign_in_page(db):
    response = Client().get("/api/crews")

    assert response.status_code == 401
    assert "Location" not in response.headers


# Error format ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"{not json", b'{"name": "W", "role": "r", "goal": NaN}', b"\xff\xfe", b'{"a": Infinity}'],
)
def test_a_body_that_is_not_json_is_a_422(builder, body):
    _token, raw = token_create(user=builder)

    response = Client().post(
        "/api/agents", data=body, content_type="application/json", **bearer(raw)
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": "The request body is not valid JSON.",
        "code": "invalid_json",
        "errors": [{"field": "body", "message": "The request body is not valid JSON."}],
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"name": "W\\u0000", "role": "r", "goal": "g"}', "name"),
        (b'{"name": "W", "role": "r", "goal": "g", "tools": ["a", "b\\u0000"]}', "tools.1"),
        (b'{"name": "W", "role": "r", "goal": "g", "llm_params": {"k\\u0000": 1}}', "llm_params"),
    ],
)
def test_a_nul_character_in_any_string_is_a_422_naming_the_field(builder, body, field):
    """PostgreSQL cannot store U+0000 (a 500 there): refused up front on every database."""
    _token, raw = token_create(user=builder)

    response = Client().post("/api/agents", data=body, content_type="application/json", **bearer(raw))

    assert response.status_code == 422
    assert response.json()["code"] == "invalid"
    assert response.json()["errors"] == [
        {"field": field, "message": "Text may not contain a NUL character (U+0000)."}
    ]
    assert not Agent.objects.filter(name__startswith="W").exists()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32-le"])
def test_a_nul_character_is_refused_in_a_body_of_any_json_encoding(builder, encoding):
    _token, raw = token_create(user=builder)
    body = '{"name": "W\\u0000", "role": "r", "goal": "g"}'.encode(encoding)

    response = Client().post("/api/agents", data=body, content_type="application/json", **bearer(raw))

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "name"


def test_a_nul_deep_in_a_nested_body_is_a_422_not_a_crash(builder):
    _token, raw = token_create(user=builder)
    body = b'{"name": "W", "role": "r", "goal": "g", "tools": ' + b"[" * 5000 + b'"\\u0000"' + b"]" * 5000 + b"}"

    response = Client().post("/api/agents", data=body, content_type="application/json", **bearer(raw))

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"].startswith("tools.0.0.0")


def test_an_escaped_backslash_before_u0000_is_plain_text(builder):
    _token, raw = token_create(user=builder)
    body = b'{"name": "W\\\\u0000", "role": "r", "goal": "g"}'  # the text W\u0000: no NUL

    response = Client().post("/api/agents", data=body, content_type="application/json", **bearer(raw))

    assert response.status_code == 201, response.content
    assert Agent.objects.get(pk=response.json()["id"]).name == "W\\u0000"


@pytest.mark.parametrize("body", [b"", b"[]", b'"text"', b"42", b"null"])
def test_a_body_that_is_not_an_object_is_a_422(builder, body):
    _token, raw = token_create(user=builder)

    response = Client().post(
        "/api/agents", data=body, content_type="application/json", **bearer(raw)
    )

    assert response.status_code == 422
    assert response.json()["code"] == "invalid"
    assert response.json()["errors"][0]["field"] == "body"


def test_every_invalid_field_is_listed_and_the_detail_names_the_first(builder):
    _token, raw = token_create(user=builder)

    response = post_json(
        Client(),
        "/api/agents",
        {"name": "W", "max_iter": "many", "agent_type": "swarm"},
        **bearer(raw),
    )

    body = response.json()
    assert response.status_code == 422
    assert body["code"] == "invalid"
    assert {e["field"] for e in body["errors"]} == {"role", "goal", "max_iter", "agent_type"}
    assert body["detail"].startswith(body["errors"][0]["field"] + ": ")


def test_a_rule_of_the_model_is_a_422_with_the_api_field_name(builder):
    _token, raw = token_create(user=builder)

    response = post_json(Client(), "/api/agents", {**AGENT, "llm_id": 424242}, **bearer(raw))

    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"field": "llm_id", "message": response.json()["errors"][0]["message"]}
    ]


def test_a_missing_object_is_a_404_in_the_error_format(builder):
    _token, raw = token_create(user=builder)

    response = Client().get("/api/crews/424242", **bearer(raw))

    assert response.status_code == 404
    assert response.json() == {
        "detail": "No crew with id 424242.",
        "code": "not_found",
        "errors": [],
    }


def test_a_path_id_that_is_not_a_number_is_a_422(builder):
    _token, raw = token_create(user=builder)

    response = Client().get("/api/agents/abc", **bearer(raw))

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "id"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("offset=-1", "offset"),
        ("limit=x", "limit"),
        (f"offset={10**30}", "offset"),
    ],
)
def test_bad_pagination_is_a_422(builder, query, field):
    _token, raw = token_create(user=builder)

    response = Client().get(f"/api/agents?{query}", **bearer(raw))

    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == field


def test_lists_have_items_and_count(builder):
    _token, raw = token_create(user=builder)

    body = Client().get("/api/tools?limit=1", **bearer(raw)).json()

    assert set(body) == {"items", "count"}
    assert len(body["items"]) == 1 and body["count"] > 1


# OpenAPI ---------------------------------------------------------------------------------------

DOCUMENTED = {
    "/api/health": {"get"},
    "/api/llms": {"get", "post"},
    "/api/llms/{id}": {"get", "patch", "delete"},
    "/api/llms/{id}/test": {"post"},
    "/api/prompts": {"get"},
    "/api/prompts/{key}": {"get", "put"},
    "/api/prompts/{key}/versions": {"get"},
    "/api/prompts/{key}/versions/{n}/restore": {"post"},
    "/api/tools": {"get"},
    "/api/agents": {"get", "post"},
    "/api/agents/{id}": {"get", "patch", "delete"},
    "/api/crews": {"get", "post"},
    "/api/crews/{id}": {"get", "patch", "delete"},
    "/api/crews/{id}/tasks": {"get", "post"},
    "/api/crews/{id}/tasks/reorder": {"post"},
    "/api/tasks/{id}": {"get", "patch", "delete"},
}


def test_the_openapi_document_describes_every_operation(db):
    response = Client().get("/api/openapi.json")

    assert response.status_code == 200
    document = response.json()
    for path, methods in DOCUMENTED.items():
        assert path in document["paths"], path
        assert methods <= set(document["paths"][path]), path
    schemas = document["components"]["schemas"]
    assert {
        "LLMOut",
        "LLMIn",
        "LLMPatch",
        "AgentOut",
        "AgentIn",
        "AgentPatch",
        "CrewOut",
        "CrewIn",
        "TaskOut",
        "TaskIn",
        "PlanningConfigIn",
        "ErrorOut",
    } <= set(schemas)
    assert "api_key" not in schemas["LLMOut"]["properties"]
    assert {"api_key_set", "api_key_tail"} <= set(schemas["LLMOut"]["properties"])
    effort = schemas["PlanningConfigIn"]["properties"]["reasoning_effort"]
    assert effort["default"] == "medium"
    assert document["paths"]["/api/agents"]["post"]["responses"]["422"]
    assert {"BearerAuth", "SessionAuth"} <= set(document["components"]["securitySchemes"])


def test_the_docs_page_loads_nothing_from_another_host(db):
    response = Client().get("/api/docs")

    assert response.status_code == 200
    html = response.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assets = re.findall(r"(?:src|href)\s*=\s*[\"']([^\"']*)", html)
    assert assets and all(a.startswith("/") and not a.startswith("//") for a in assets), assets
    assert not re.search(r"https?://", html)


@pytest.mark.django_db(transaction=True)
def test_token_checks_from_many_threads_leave_no_connection_behind(builder: Any) -> None:
    """The lookup's converters are kept per connection: on the connection, not in a table that
    would keep every short-lived request thread's connection alive."""
    import gc
    import threading

    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper

    from planner_site.tokens import user_for_token

    _, raw = token_create(user=builder)

    def check() -> None:
        try:
            assert user_for_token(raw) == builder
        finally:
            connections.close_all()

    def wrappers() -> int:
        gc.collect()
        return sum(isinstance(o, BaseDatabaseWrapper) for o in gc.get_objects())

    before = wrappers()
    for _ in range(20):
        thread = threading.Thread(target=check)
        thread.start()
        thread.join()
    assert wrappers() - before < 3
