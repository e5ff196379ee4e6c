"""The OpenAPI document is the contract: every status an operation answers, every limit (#16)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, PlanningConfig, PromptTemplateVersion
from crews.models import Crew, Task
from planner_site.body_checks import MAX_INPUT_KEYS

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    from planner_site.api import api

    return api.get_openapi_schema()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if method in METHODS
    ]


def test_the_served_document_is_the_one_checked_here(db, document):
    served = Client().get("/api/openapi.json").json()

    assert served["paths"].keys() == document["paths"].keys()
    assert served["paths"]["/api/crews"]["get"]["responses"].keys() >= {"200", "401", "422"}


def test_every_signed_in_operation_documents_401_lists_included(document):
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(document)
        if operation.get("security") and 401 not in operation["responses"]
    ]

    assert missing == []
    assert operations(document), "no operations found"


def test_every_signed_in_write_documents_403(document):
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(document)
        if operation.get("security") and method != "get" and 403 not in operation["responses"]
    ]

    assert missing == []


def test_every_operation_with_a_parameter_documents_422_and_with_a_path_one_404(document):
    missing = []
    for path, method, operation in operations(document):
        where = {p["in"] for p in operation.get("parameters", [])}
        if where and 422 not in operation["responses"]:
            missing.append(f"422 {method.upper()} {path}")
        if "path" in where and 404 not in operation["responses"]:
            missing.append(f"404 {method.upper()} {path}")

    assert missing == []


def test_every_operation_with_a_body_documents_413_and_422(document):
    missing = [
        f"{method.upper()} {path}"
        for path, method, operation in operations(document)
        if "requestBody" in operation and not {413, 422} <= set(operation["responses"])
    ]

    assert missing == []


def test_every_error_response_is_described_as_json(document):
    wrong, multipart_400 = [], []
    for path, method, operation in operations(document):
        multipart = "multipart/form-data" in operation.get("requestBody", {}).get("content", {})
        for status, response in operation["responses"].items():
            if int(status) == 400 and multipart and "content" not in response:
                multipart_400.append(f"{method.upper()} {path}")  # Django's own, bodiless
                continue
            if int(status) >= 400 and "$ref" not in response.get("content", {}).get(
                "application/json", {}
            ).get("schema", {}):
                wrong.append(f"{status} {method.upper()} {path}")

    assert wrong == []
    assert "POST /api/crews/import" in multipart_400


def test_a_plan_edit_marks_if_match_required(document):
    parameters = document["paths"]["/api/plans/{id}"]["put"]["parameters"]

    assert {"in": "header", "name": "If-Match", "required": True}.items() <= next(
        p for p in parameters if p["name"] == "If-Match"
    ).items()


@pytest.mark.parametrize(
    ("schema", "field", "model", "model_field", "floor"),
    [
        ("CrewIn", "name", Crew, "name", 1),
        ("CrewIn", "description", Crew, "description", None),
        ("TaskIn", "name", Task, "name", 1),
        ("TaskIn", "description", Task, "description", 1),
        ("TaskIn", "expected_output", Task, "expected_output", 1),
        ("AgentIn", "name", Agent, "name", 1),
        ("AgentIn", "role", Agent, "role", 1),
        ("AgentIn", "goal", Agent, "goal", 1),
        ("AgentIn", "backstory", Agent, "backstory", None),
        ("PromptIn", "text", PromptTemplateVersion, "text", 1),
    ],
)
def test_texts_state_the_model_fields_limits(document, schema, field, model, model_field, floor):
    stated = document["components"]["schemas"][schema]["properties"][field]

    assert stated["maxLength"] == model._meta.get_field(model_field).max_length
    assert stated.get("minLength") == floor


def test_planning_prompts_state_their_limit(document):
    stated = document["components"]["schemas"]["PlanningConfigIn"]["properties"]["plan_prompt"]

    assert {"type": "string", "maxLength": PlanningConfig._meta.get_field("plan_prompt").max_length} in stated["anyOf"]


@pytest.mark.parametrize(("schema", "field"), [("CrewIn", "default_inputs"), ("KickoffIn", "inputs")])
def test_input_objects_state_how_many_names_they_take(document, schema, field):
    assert document["components"]["schemas"][schema]["properties"][field]["maxProperties"] == MAX_INPUT_KEYS


def test_no_two_schemas_of_the_api_share_a_name(document):
    """ninja names a component after its class: a second class of the same name silently takes
    the first one's place, and every operation using the first is documented wrong (the usage
    report's UsageOut once replaced a plan's, and schemathesis found plans "violating" it)."""
    from ninja import Schema

    def subclasses(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *subclasses(sub))]

    ours = [c for c in subclasses(Schema) if c.__module__.split(".")[0] in {"agents", "crews", "knowledge", "planner_site"}]
    names: dict[str, set[str]] = {}
    for cls in ours:
        names.setdefault(cls.__name__, set()).add(f"{cls.__module__}.{cls.__qualname__}")
    clashes = {name: places for name, places in names.items() if len(places) > 1 and name in document["components"]["schemas"]}
    assert clashes == {}
