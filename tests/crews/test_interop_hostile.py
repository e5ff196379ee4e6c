"""Hostile or careless projects: each is refused with its file, line and key, never a 500, and
nothing is stored (issue #16's review of the import)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.datastructures import MultiValueDict
from ninja.testing import TestClient

from agents.models import Agent
from crews.interop import importing, parsing, sources
from crews.interop.fields import Draft
from crews.interop.problems import Problem
from crews.task_checks import clean_output_schema
from planner_site.api import api
from planner_site.body_checks import MAX_DEPTH
from tests.crews.interop_helpers import CLASSIC, JSONC, counts, line_of, zip_of


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def classic(agents: str | None = None, tasks: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"format": "crewai-yaml", "agents_yaml": agents or (CLASSIC / "agents.yaml").read_text(),
            "tasks_yaml": tasks or (CLASSIC / "tasks.yaml").read_text(), **extra}


def jsonc(crew: str | None = None, **agents: str) -> dict[str, Any]:
    files = {p.stem: p.read_text() for p in sorted((JSONC / "agents").glob("*.jsonc"))}
    return {"format": "crew-jsonc", "crew_jsonc": crew or (JSONC / "crew.jsonc").read_text(),
            "agents": {**files, **agents}}


def refused(client: TestClient, user: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    before = counts()
    response = client.post("/crews/import", json=body, user=user)
    assert response.status_code == 422, response.content
    assert counts() == before
    return response.json()["errors"]


def with_task_line(line: str) -> str:
    """tasks.yaml with ``line`` added to research_task (indented as its keys)."""
    return (CLASSIC / "tasks.yaml").read_text().replace("  agent: researcher\n", f"  agent: researcher\n  {line}\n")


def where(error: dict[str, Any]) -> tuple[str, int | None, str]:
    return error["file"], error["line"], error["key"]


# 1 and 9: values no field can hold --------------------------------------------------------------


@pytest.mark.parametrize("value", [r'"a \ud800 b"', r'"a \0 b"', r'"a \x00 b"'])
def test_a_lone_surrogate_or_nul_written_as_a_yaml_escape_is_refused_at_its_line(client, builder, value):
    tasks = f"research_task:\n  description: {value}\n  expected_output: A list\n  agent: researcher\n"

    errors = refused(client, builder, classic(tasks=tasks))

    # libyaml refuses a surrogate escape itself (not valid YAML); the walk refuses the rest.
    assert (errors[0]["file"], errors[0]["line"]) == ("config/tasks.yaml", 2)
    assert errors[0]["key"] == "research_task.description" or "not valid YAML" in errors[0]["message"]
    assert "NUL" in errors[0]["message"] or "ud800" in value


@pytest.mark.parametrize("escape", [r"\ud800", r"\u0000"])
def test_a_lone_surrogate_or_nul_in_jsonc_is_refused_at_its_line(client, builder, escape):
    crew = (JSONC / "crew.jsonc").read_text().replace('"name": "Research crew"', f'"name": "Research {escape}"')

    errors = refused(client, builder, jsonc(crew))

    assert where(errors[0]) == ("crew.jsonc", line_of(crew, escape), "name")


def test_a_surrogate_in_a_key_is_refused_without_echoing_the_key(client, builder):
    crew = (JSONC / "crew.jsonc").read_text().replace('"topic": "AI agents"', r'"\ud800": "AI agents"')

    errors = refused(client, builder, jsonc(crew))

    assert (errors[0]["file"], errors[0]["key"]) == ("crew.jsonc", "inputs")
    json.dumps(errors, ensure_ascii=False).encode()  # every part can be written out


def test_a_yaml_date_in_an_output_schema_is_refused_as_a_date(client, builder):
    tasks = with_task_line("output_json: {type: object, default: 2024-01-01}")

    errors = refused(client, builder, classic(tasks=tasks))

    assert where(errors[0]) == ("config/tasks.yaml", line_of(tasks, "output_json"), "research_task.output_json.default")
    assert "date" in errors[0]["message"]


@pytest.mark.parametrize(("line", "key"), [
    ("output_json: {type: object, default: .nan}", "research_task.output_json.default"),
    ("output_json: {type: object, default: .inf}", "research_task.output_json.default"),
    ("output_json: {type: object, default: !!binary aGk=}", "research_task.output_json.default"),
    ("output_json: {type: object, default: !!set {a, b}}", "research_task.output_json.default"),
])
def test_a_yaml_value_json_cannot_hold_is_refused(client, builder, line, key):
    tasks = with_task_line(line)

    errors = refused(client, builder, classic(tasks=tasks))

    assert where(errors[0]) == ("config/tasks.yaml", line_of(tasks, "output_json"), key)


def zipped_classic(crew_yaml: str, agents: str | None = None) -> bytes:
    return zip_of({"config/agents.yaml": agents or (CLASSIC / "agents.yaml").read_text(),
                   "config/tasks.yaml": (CLASSIC / "tasks.yaml").read_text(),
                   "config/crew.yaml": crew_yaml})


def upload(client: TestClient, user: Any, data: bytes, name: str = "crew.zip") -> Any:
    files = MultiValueDict({"file": [SimpleUploadedFile(name, data, "application/zip")]})
    return client.post("/crews/import", FILES=files, user=user)


@pytest.mark.parametrize(("crew_yaml", "key"), [
    ("name: Research\ninputs:\n  1: a\n", "inputs.1"),
    ("name: Research\ninputs:\n  x: .nan\n", "inputs.x"),
    ("name: Research\ninputs:\n  x: -.inf\n", "inputs.x"),
    ("name: Research\ninputs:\n  true: a\n", "inputs.true"),
])
def test_a_crew_yaml_key_or_value_json_cannot_hold_is_refused(client, builder, crew_yaml, key):
    response = upload(client, builder, zipped_classic(crew_yaml))

    assert response.status_code == 422, response.content
    assert where(response.json()["errors"][0]) == ("config/crew.yaml", 3, key)
    assert counts() == (0, 0, 0, 0)


def test_a_non_finite_tool_option_is_refused(client, builder):
    agents = (CLASSIC / "agents.yaml").read_text() + "  crew_planner:\n    tool_options: {x: .inf}\n"

    response = upload(client, builder, zipped_classic("name: Research\n", agents))

    assert response.status_code == 422, response.content
    error = response.json()["errors"][0]
    assert (error["file"], error["key"]) == ("config/agents.yaml", "reporting_analyst.crew_planner.tool_options.x")


def test_an_output_schema_nested_deeper_than_the_body_limit_is_refused(client, builder):
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(150):
        schema = {"type": "object", "properties": {"x": schema}}
    tasks = yaml.safe_load((CLASSIC / "tasks.yaml").read_text())
    tasks["research_task"]["output_json"] = schema

    errors = refused(client, builder, classic(tasks=yaml.safe_dump(tasks, sort_keys=False)))

    assert errors[0]["message"] == f"Nested deeper than {MAX_DEPTH} levels."
    assert errors[0]["key"].startswith("research_task.output_json.properties")


def test_a_service_refusal_without_fields_is_named_at_its_entry():
    doc = parsing.Document("config/tasks.yaml", {}, {("research_task",): 4})
    draft = Draft(sources.Entry("research_task", {}, doc, ("research_task",)))

    rejected = importing._rejected(ValidationError("The database refused these values."), draft)

    assert rejected.problems == [Problem("config/tasks.yaml", 4, "research_task", "The database refused these values.")]


def test_an_output_schema_too_deep_for_the_schema_check_is_a_validation_error():
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(400):
        schema = {"type": "object", "properties": {"x": schema}}

    with pytest.raises(ValidationError) as caught:
        clean_output_schema(schema)

    assert "output_schema" in caught.value.message_dict


# 2 and 3: size and expansion ------------------------------------------------------------------


def big_jsonc(size: int) -> str:
    """A crew.jsonc of ``size`` characters, with comments and a trailing comma."""
    task = {"name": "t", "description": "Do it // not a comment, /* nor this */", "expected_output": "x" * 40}
    each = len(json.dumps({"tasks": [task]}, indent=2)) + 20  # nested one level deeper: 4 more spaces a line
    tasks = [{**task, "name": f"t{i}"} for i in range(size // each)]
    text = "// a crew\n" + json.dumps({"name": "Big", "agents": [], "tasks": tasks}, indent=2)
    assert len(text) < size - 20
    text = text.replace("\n  ]", ",\n  ]", 1)  # a trailing comma
    return text + " " * (size - len(text) - 10) + "/* end */\n"


def test_a_jsonc_file_just_under_the_cap_parses_in_well_under_a_second():
    text = big_jsonc(parsing.MAX_FILE_BYTES - 2_000)
    problems: list[Problem] = []

    started = time.perf_counter()
    doc = parsing.parse_jsonc("crew.jsonc", text, problems)
    elapsed = time.perf_counter() - started

    assert problems == [] and doc is not None
    assert doc.data["tasks"][0]["description"] == "Do it // not a comment, /* nor this */"
    assert elapsed < 1.0, elapsed


def test_a_yaml_file_just_under_the_cap_parses_in_well_under_a_second():
    tasks = {f"task_{i}": {"description": f"Step {i}\nin two lines", "expected_output": "x" * 40}
             for i in range(parsing.MAX_FILE_BYTES // 100)}
    text = yaml.safe_dump(tasks)[: parsing.MAX_FILE_BYTES - 2_000].rpartition("\ntask_")[0] + "\n"
    problems: list[Problem] = []

    started = time.perf_counter()
    doc = parsing.parse_yaml("config/tasks.yaml", text, problems)
    elapsed = time.perf_counter() - started

    assert problems == [] and doc is not None
    assert elapsed < 1.0, elapsed


def test_a_file_over_the_cap_is_refused_saying_the_cap(client, builder):
    errors = refused(client, builder, jsonc(big_jsonc(parsing.MAX_FILE_BYTES + 10)))

    assert errors[0]["file"] == "crew.jsonc"
    assert "256 KB" in errors[0]["message"]


def test_yaml_aliases_are_refused_before_they_expand(client, builder):
    laughs = ["  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    laughs += [f"  {k}: &{k} [{', '.join(['*' + p] * 9)}]" for p, k in zip("abcdefgh", "bcdefghi", strict=True)]
    agents = (CLASSIC / "agents.yaml").read_text() + "laughs:\n" + "\n".join(laughs) + "\n"

    started = time.perf_counter()
    errors = refused(client, builder, classic(agents=agents))

    assert time.perf_counter() - started < 2
    assert where(errors[0]) == ("config/agents.yaml", line_of(agents, "  b: &b"), "laughs.b.0")
    assert "alias" in errors[0]["message"].lower()


def test_a_yaml_file_nested_deeper_than_the_limit_is_refused_before_it_is_built(client, builder):
    tasks = with_task_line("output_json: " + "[" * 100_000)

    errors = refused(client, builder, classic(tasks=tasks))

    assert (errors[0]["file"], errors[0]["line"]) == ("config/tasks.yaml", line_of(tasks, "output_json"))
    assert errors[0]["message"] == f"Nested deeper than {MAX_DEPTH} levels."


# 4, 5, 7, 10, 13: settings and names ----------------------------------------------------------


@pytest.mark.parametrize(("options", "key"), [
    ({"http_get": "oops"}, "researcher.crew_planner.tool_options.http_get"),
    ({"http_get": {"max_usage": 0}}, "researcher.crew_planner.tool_options.http_get"),
    ({"http_get": {"needs_approval": "yes"}}, "researcher.crew_planner.tool_options.http_get"),
    ({"no_such_tool": {"needs_approval": True}}, "researcher.crew_planner.tool_options.no_such_tool"),
])
def test_imported_tool_options_are_checked_as_the_agent_api_checks_them(client, builder, options, key):
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"].update(tools=["http_get"], crew_planner={"tool_options": options})

    errors = refused(client, builder, classic(agents=yaml.safe_dump(agents, sort_keys=False)))

    assert (errors[0]["file"], errors[0]["key"]) == ("config/agents.yaml", key)


def test_valid_tool_options_are_stored_as_given(client, builder):
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    options = {"http_get": {"needs_approval": True, "max_usage": 3}}
    agents["researcher"].update(tools=["http_get"], crew_planner={"tool_options": options})

    response = client.post("/crews/import", json=classic(agents=yaml.safe_dump(agents)), user=builder)

    assert response.status_code == 201, response.content
    assert Agent.objects.get(owner=builder, name="researcher").tool_options == options


@pytest.mark.parametrize("target", ["²", "١٢", "12a"])
def test_an_llm_map_target_that_is_not_an_ascii_number_is_looked_up_as_a_name(client, builder, target):
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"]["llm"] = "openai/gpt-4o"

    errors = refused(client, builder, classic(agents=yaml.safe_dump(agents), llm_map={"openai/gpt-4o": target}))

    assert (errors[0]["file"], errors[0]["key"]) == ("llm_map", "openai/gpt-4o")
    assert target in errors[0]["message"]


def test_an_agent_listed_twice_in_jsonc_is_refused_at_its_second_place(client, builder):
    crew = (JSONC / "crew.jsonc").read_text().replace(
        '"agents": ["researcher", "reporting_analyst",]', '"agents": ["researcher", "reporting_analyst", "researcher"]')

    errors = refused(client, builder, jsonc(crew))

    assert where(errors[0]) == ("crew.jsonc", line_of(crew, '"agents"'), "agents.2")
    assert "Two agents" in errors[0]["message"]


def test_a_key_written_twice_in_jsonc_is_refused_at_its_second_line(client, builder):
    crew = (JSONC / "crew.jsonc").read_text().replace('"process": "sequential",', '"process": "sequential",\n  "process": "hierarchical",')

    errors = refused(client, builder, jsonc(crew))

    assert where(errors[0]) == ("crew.jsonc", line_of(crew, '"hierarchical"'), "process")
    assert "twice" in errors[0]["message"]


def test_a_key_written_twice_in_a_jsonc_agent_file_is_refused(client, builder):
    researcher = (JSONC / "agents" / "researcher.jsonc").read_text().replace('"tools": [],', '"tools": [],\n  "role": "Again",')

    errors = refused(client, builder, jsonc(researcher=researcher))

    assert where(errors[0]) == ("agents/researcher.jsonc", line_of(researcher, '"Again"'), "role")


@pytest.mark.parametrize("value", [["a", "b"], 3, True])
def test_an_output_json_that_is_neither_a_schema_nor_a_class_name_says_so(client, builder, value):
    tasks = yaml.safe_load((CLASSIC / "tasks.yaml").read_text())
    tasks["research_task"]["output_json"] = value

    body = client.post("/crews/import?dry_run=true", json=classic(tasks=yaml.safe_dump(tasks, sort_keys=False)), user=builder).json()

    notice = next(n for n in body["notices"] if "output_json" in n)
    assert "Python class" not in notice and "neither a JSON schema" in notice


# 8: uploads too large are refused before they are read ------------------------------------------


class _Unreadable(SimpleUploadedFile):
    def read(self, *args: Any) -> bytes:
        raise AssertionError("read before its size was checked")

    def chunks(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read before its size was checked")


def test_an_upload_over_the_limit_is_a_413_before_it_is_read(client, builder):
    big = _Unreadable("crew.zip", b"PK", "application/zip")
    big.size = sources.MAX_PROJECT_BYTES + 1

    response = client.post("/crews/import", FILES=MultiValueDict({"file": [big]}), user=builder)

    assert response.status_code == 413, response.content
    assert response.json()["code"] == "too_large"
    assert counts() == (0, 0, 0, 0)


def test_a_lone_surrogate_in_a_multipart_map_is_refused_not_looked_up(client, builder):
    agents = (CLASSIC / "agents.yaml").read_text().replace("researcher:\n", "researcher:\n  llm: openai/gpt-4o\n", 1)
    files = MultiValueDict({"file": [SimpleUploadedFile("crew.zip", zipped_classic("name: R\n", agents))]})

    response = client.post("/crews/import", data={"llm_map": '{"openai/gpt-4o": "\\ud800"}'}, FILES=files, user=builder)

    assert response.status_code == 422, response.content
    assert counts() == (0, 0, 0, 0)
