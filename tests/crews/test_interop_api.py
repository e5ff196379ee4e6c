"""Importing CrewAI projects and exporting crews through the API (API.md, "Import and export")."""

from __future__ import annotations

import io
import json
import zipfile
from decimal import Decimal
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils.datastructures import MultiValueDict
from ninja.testing import TestClient

from agents.models import LLM, Agent, PlanningConfig
from crews.models import Crew, Task
from planner_site.api import api
from tests.crews.interop_helpers import CLASSIC, JSONC, counts, line_of, zip_of


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def classic_body(**extra: Any) -> dict[str, Any]:
    return {
        "format": "crewai-yaml",
        "agents_yaml": (CLASSIC / "agents.yaml").read_text(),
        "tasks_yaml": (CLASSIC / "tasks.yaml").read_text(),
        **extra,
    }


def jsonc_body(**extra: Any) -> dict[str, Any]:
    agents = {p.stem: p.read_text() for p in sorted((JSONC / "agents").glob("*.jsonc"))}
    return {"format": "crew-jsonc", "crew_jsonc": (JSONC / "crew.jsonc").read_text(), "agents": agents, **extra}


def upload(client: TestClient, user: Any, data: bytes, *, name: str = "crew.zip", query: str = "",
           **fields: str) -> Any:
    files = MultiValueDict({"file": [SimpleUploadedFile(name, data, "application/zip")]})
    return client.post(f"/crews/import{query}", data=fields, FILES=files, user=user)


def crew_shape(crew: Crew) -> dict[str, Any]:
    """Everything an export must carry, without ids or the crew's name."""
    tasks = list(crew.tasks.order_by("order"))
    agents = sorted(crew.agents.all(), key=lambda a: a.name)

    def agent_shape(agent: Agent) -> dict[str, Any]:
        config = PlanningConfig.objects.filter(agent=agent).values().first()
        if config:
            config = {k: v for k, v in config.items() if k not in ("id", "agent_id")}
        return {
            "name": agent.name.removesuffix(" (2)"), "role": agent.role, "goal": agent.goal,
            "backstory": agent.backstory, "llm": agent.llm_id, "tools": agent.tools,
            "tool_options": agent.tool_options, "agent_type": agent.agent_type, "max_iter": agent.max_iter,
            "max_rpm": agent.max_rpm, "max_execution_time": agent.max_execution_time,
            "max_retry_limit": agent.max_retry_limit, "respect_context_window": agent.respect_context_window,
            "planning": agent.planning, "budget": (agent.budget_max_tool_calls, agent.budget_max_input_tokens),
            "planning_config": config,
        }

    return {
        "description": crew.description, "process": crew.process, "planning": crew.planning,
        "planning_llm": crew.planning_llm_id, "manager_llm": crew.manager_llm_id,
        "review_plan": crew.review_plan, "run_without_plan_on_failure": crew.run_without_plan_on_failure,
        "on_step_failure": crew.on_step_failure, "max_rpm": crew.max_rpm,
        "budget": (crew.budget_max_tokens, crew.budget_max_cost_usd), "default_inputs": crew.default_inputs,
        "memory": crew.memory,
        "agents": [agent_shape(a) for a in agents],
        "tasks": [
            {
                "name": t.name, "description": t.description, "expected_output": t.expected_output,
                "agent": t.agent.name.removesuffix(" (2)") if t.agent else None,
                "context": [c.name for c in t.context.order_by("order")],
                "async_execution": t.async_execution, "human_input": t.human_input,
                "output_schema": t.output_schema, "guardrails": t.guardrails,
                "guardrail_max_retries": t.guardrail_max_retries,
            }
            for t in tasks
        ],
    }


# Importing -------------------------------------------------------------------------------------


def test_the_classic_yaml_research_crew_imports_with_its_tasks_in_file_order(client, builder):
    response = client.post("/crews/import", json=classic_body(crew={"name": "Research"}), user=builder)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "Research" and body["process"] == "sequential"
    assert [t["name"] for t in body["tasks"]] == ["research_task", "reporting_task"]
    first, second = body["tasks"]
    assert second["context_task_ids"] == [first["id"]]
    crew = Crew.objects.get(pk=body["id"])
    assert sorted(a.name for a in crew.agents.all()) == ["reporting_analyst", "researcher"]
    researcher = Agent.objects.get(owner=builder, name="researcher")
    assert researcher.role == "{topic} Senior Data Researcher"  # the folded block's newline is gone
    assert researcher.backstory.startswith("You're a seasoned researcher with a knack")
    assert set(body["input_names"]) == {"topic", "current_year"}


def test_a_dry_run_previews_the_crew_with_its_notices_and_stores_nothing(client, builder):
    before = counts()

    response = client.post("/crews/import?dry_run=true", json=classic_body(), user=builder)

    assert response.status_code == 200, response.content
    body = response.json()
    assert counts() == before
    crew = body["crew"]
    assert crew["name"] == "Imported crew"
    assert [(t["key"], t["agent"], t["context"]) for t in crew["tasks"]] == [
        ("research_task", "researcher", []), ("reporting_task", "reporting_analyst", ["research_task"]),
    ]
    assert any(n.startswith("config/agents.yaml, line 3, researcher:") and "allow_delegation" in n
               for n in body["notices"]), body["notices"]
    assert any("output_file" in n for n in body["notices"])
    assert body["unknown_llms"] == body["unknown_tools"] == []


def test_the_jsonc_project_with_comments_and_trailing_commas_imports_its_crew_settings(client, builder):
    demo = LLM.objects.get(model="demo/offline")

    response = client.post("/crews/import", json=jsonc_body(), user=builder)

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["name"], body["planning"]) == ("Research crew", True)
    assert body["default_inputs"] == {"topic": "AI agents", "current_year": "2026"}
    research, report = Task.objects.filter(crew_id=body["id"]).order_by("order")
    assert report.guardrails == {"criteria": ["Every section cites where its facts come from."]}
    assert report.guardrail_max_retries == 2
    researcher = research.agent
    assert (researcher.llm_id, researcher.max_iter) == (demo.pk, 12)  # matched by its model string
    config = researcher.planning_config
    assert (config.reasoning_effort, config.max_steps) == ("high", 6)
    assert report.agent.llm_id == demo.pk  # {"model": ...} works too


def test_an_imported_crew_runs_to_the_end_with_the_demo_model(
    client, builder, django_capture_on_commit_callbacks
):
    crew_id = client.post("/crews/import", json=classic_body(), user=builder).json()["id"]

    with django_capture_on_commit_callbacks(execute=True):
        started = client.post(f"/crews/{crew_id}/kickoff",
                              json={"inputs": {"topic": "tides", "current_year": "2026"}}, user=builder)
    assert started.status_code == 202, started.content

    run = client.get(f"/runs/{started.json()['id']}", user=builder).json()
    assert run["status"] == "succeeded", run["error"]
    assert [t["status"] for t in run["task_outputs"]] == ["done", "done"]


def test_a_name_already_used_gets_a_number_and_the_import_says_so(client, builder):
    client.post("/crews/import", json=classic_body(crew={"name": "Research"}), user=builder)

    response = client.post("/crews/import?dry_run=true", json=classic_body(crew={"name": "Research"}), user=builder)

    crew = response.json()["crew"]
    assert crew["name"] == "Research (2)"
    assert [a["name"] for a in crew["agents"]] == ["researcher (2)", "reporting_analyst (2)"]
    assert any("Research (2)" in n for n in response.json()["notices"])


def test_deprecated_reasoning_becomes_a_planning_config_with_a_notice(client, builder):
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"].update(reasoning=True, max_reasoning_attempts=3)
    body = classic_body(agents_yaml=yaml.safe_dump(agents))

    preview = client.post("/crews/import?dry_run=true", json=body, user=builder).json()
    created = client.post("/crews/import", json=body, user=builder)

    assert any("reasoning is deprecated" in n for n in preview["notices"]), preview["notices"]
    config = Agent.objects.get(owner=builder, name="researcher").planning_config
    assert (config.reasoning_effort, config.max_attempts) == ("medium", 3)
    assert created.status_code == 201


def test_output_json_as_a_schema_becomes_the_tasks_output_schema_and_a_class_name_a_notice(client, builder):
    tasks = yaml.safe_load((CLASSIC / "tasks.yaml").read_text())
    schema = {"type": "object", "properties": {"points": {"type": "array", "items": {"type": "string"}}}}
    tasks["research_task"]["output_json"] = schema
    tasks["reporting_task"]["output_pydantic"] = "Report"
    tasks["reporting_task"]["guardrails"] = ["Cite sources.", "No speculation."]

    response = client.post("/crews/import?dry_run=true", json=classic_body(tasks_yaml=yaml.safe_dump(tasks, sort_keys=False)), user=builder)

    body = response.json()
    first, second = body["crew"]["tasks"]
    assert first["output_schema"] == schema and second["output_schema"] is None
    assert second["guardrails"] == {"criteria": ["Cite sources.", "No speculation."]}
    assert any("output_pydantic" in n for n in body["notices"])


# Refusals: each says where, and nothing is stored ----------------------------------------------


def test_malformed_yaml_names_the_file_and_line_and_imports_nothing(client, builder):
    before = counts()
    tasks = (CLASSIC / "tasks.yaml").read_text().replace("  agent: researcher", "  agent: researcher: writer")
    line = line_of(tasks, "agent: researcher: writer")

    response = client.post("/crews/import", json=classic_body(tasks_yaml=tasks), user=builder)

    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_project"
    error = body["errors"][0]
    assert error["file"] == "config/tasks.yaml" and error["line"] == line, body
    assert "not valid YAML" in body["detail"] and f"line {line}" in body["detail"]
    assert counts() == before


def test_a_task_naming_an_unknown_agent_is_refused_at_its_line(client, builder):
    before = counts()
    tasks = (CLASSIC / "tasks.yaml").read_text().replace("agent: reporting_analyst", "agent: writer")

    response = client.post("/crews/import", json=classic_body(tasks_yaml=tasks), user=builder)

    assert response.status_code == 422
    error = response.json()["errors"][0]
    where = ("config/tasks.yaml", line_of(tasks, "agent: writer"), "reporting_task.agent")
    assert (error["file"], error["line"], error["key"]) == where
    assert "There is no agent writer" in error["message"]
    assert counts() == before


def test_a_cycle_in_context_is_refused_naming_it(client, builder):
    before = counts()
    tasks = yaml.safe_load((CLASSIC / "tasks.yaml").read_text())
    tasks["research_task"]["context"] = ["reporting_task"]

    response = client.post("/crews/import", json=classic_body(tasks_yaml=yaml.safe_dump(tasks, sort_keys=False)), user=builder)

    assert response.status_code == 422
    error = response.json()["errors"][0]
    assert error["key"] == "research_task.context.0"
    assert "cycle: research_task → reporting_task → research_task" in error["message"]
    assert counts() == before


def test_an_unknown_tool_and_llm_are_listed_until_mapped(client, builder):
    before = counts()
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"].update(llm="openai/gpt-4o", tools=["SerperDevTool"])
    body = classic_body(agents_yaml=yaml.safe_dump(agents))

    refused = client.post("/crews/import", json=body, user=builder)

    assert refused.status_code == 422
    error = refused.json()
    assert (error["code"], error["unknown_llms"], error["unknown_tools"]) == (
        "unknown_names", ["openai/gpt-4o"], ["SerperDevTool"])
    assert {e["key"] for e in error["errors"]} == {"researcher.llm", "researcher.tools.0"}
    assert counts() == before

    demo = LLM.objects.get(model="demo/offline")
    mapped = client.post("/crews/import", user=builder, json={
        **body, "llm_map": {"openai/gpt-4o": demo.pk}, "tool_map": {"SerperDevTool": None}})
    assert mapped.status_code == 201, mapped.content
    researcher = Agent.objects.get(owner=builder, name="researcher")
    assert (researcher.llm_id, researcher.tools) == (demo.pk, [])


def test_an_over_long_text_is_refused_with_the_models_limit(client, builder):
    before = counts()
    limit = Agent._meta.get_field("role").max_length
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["reporting_analyst"]["role"] = "x" * (limit + 1)

    response = client.post("/crews/import", json=classic_body(agents_yaml=yaml.safe_dump(agents)), user=builder)

    error = response.json()["errors"][0]
    assert (error["key"], str(limit)) == ("reporting_analyst.role", error["message"].split()[-1].rstrip("."))
    assert counts() == before


def test_a_wrong_type_and_a_missing_field_are_each_named(client, builder):
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"]["max_iter"] = "many"
    del agents["reporting_analyst"]["goal"]

    response = client.post("/crews/import", json=classic_body(agents_yaml=yaml.safe_dump(agents)), user=builder)

    assert {e["key"] for e in response.json()["errors"]} == {"researcher.max_iter", "reporting_analyst.goal"}


def test_a_viewer_cannot_import(client, viewer):
    response = client.post("/crews/import", json=classic_body(), user=viewer)

    assert response.status_code == 403
    assert Crew.objects.count() == 0


# Zips ------------------------------------------------------------------------------------------


def test_a_zip_with_its_project_under_a_top_folder_imports(client, builder):
    data = zip_of({
        "research_crew/README.md": "A crew",
        "research_crew/src/research_crew/config/agents.yaml": (CLASSIC / "agents.yaml").read_text(),
        "research_crew/src/research_crew/config/tasks.yaml": (CLASSIC / "tasks.yaml").read_text(),
    })

    response = upload(client, builder, data)

    assert response.status_code == 201, response.content
    assert response.json()["name"] == "research_crew"


def test_a_zipped_jsonc_project_imports_and_a_missing_agent_file_is_named(client, builder):
    files = {"crew.jsonc": (JSONC / "crew.jsonc").read_text(),
             "agents/researcher.jsonc": (JSONC / "agents" / "researcher.jsonc").read_text()}

    refused = upload(client, builder, zip_of(files))
    files["agents/reporting_analyst.jsonc"] = (JSONC / "agents" / "reporting_analyst.jsonc").read_text()
    imported = upload(client, builder, zip_of(files))

    error = refused.json()["errors"][0]
    assert (error["file"], error["line"], error["key"]) == ("crew.jsonc", 6, "agents.1")
    assert imported.status_code == 201, imported.content


def test_malformed_jsonc_names_its_line(client, builder):
    text = (JSONC / "crew.jsonc").read_text().replace('"process": "sequential",', '"process": ,')

    response = client.post("/crews/import", json=jsonc_body(crew_jsonc=text), user=builder)

    error = response.json()["errors"][0]
    assert (error["file"], error["line"]) == ("crew.jsonc", 28), error


# Export ----------------------------------------------------------------------------------------


@pytest.fixture
def rich_crew(client, builder, admin_user) -> Crew:
    """A crew using every setting the export must carry."""
    body = client.post("/crews/import", json=jsonc_body(), user=builder).json()
    crew = Crew.objects.get(pk=body["id"])
    crew.description = "Finds things out.\nThen writes them up.\n"
    crew.review_plan, crew.on_step_failure, crew.memory = True, "adapt", True
    crew.budget_max_tokens, crew.budget_max_cost_usd = 50_000, Decimal("1.2500")
    crew.default_inputs = {"topic": "tides", "depth": {"levels": [1, 2]}}
    crew.save()
    research, report = crew.tasks.order_by("order")
    research.name = "Research the field"
    research.description = 'List {topic} facts.\nAnswer as JSON: {"facts": []}\n- one\n- two'
    research.output_schema = {"type": "object", "properties": {"facts": {"type": "array"}}}
    research.expected_output = "  Facts, indented,\n\tone per line.\n\n"
    research.guardrails = {"criteria": ["Be precise.", "Cite.", "Be precise."], "min_chars": 20, "pattern": "facts"}
    research.human_input = True
    research.save()
    agent = research.agent
    agent.name, agent.agent_type, agent.budget_max_tool_calls = "Lead Researcher", "plan_execute", 7
    agent.tools, agent.tool_options = ["http_get"], {"http_get": {"needs_approval": True}}
    agent.role, agent.backstory = "  Lead {topic} researcher", "\tTabbed in.\nEnds with a line break.\n"
    agent.goal = "Trailing spaces on a line   \nthen more"
    agent.save()
    return crew


def export(client: TestClient, user: Any, crew: Crew, fmt: str = "crewai-yaml") -> zipfile.ZipFile:
    response = client.get(f"/crews/{crew.pk}/export?format={fmt}", user=user)
    assert response.status_code == 200, response.content
    return zipfile.ZipFile(io.BytesIO(response.content))


def test_an_export_holds_both_layouts_with_literal_blocks_and_braces_intact(client, builder, rich_crew):
    archive = export(client, builder, rich_crew)

    assert archive.namelist() == [
        "config/agents.yaml", "config/tasks.yaml", "config/crew.yaml", "crew.jsonc",
        "agents/lead_researcher.jsonc", "agents/reporting_analyst.jsonc",
    ]
    tasks_yaml = archive.read("config/tasks.yaml").decode()
    assert "research_the_field:\n  description: |\n    List {topic} facts.\n" in tasks_yaml
    assert 'Answer as JSON: {"facts": []}' in tasks_yaml
    assert list(yaml.safe_load(tasks_yaml)) == ["research_the_field", "reporting_task"]
    crew_jsonc = json.loads(archive.read("crew.jsonc"))
    assert crew_jsonc["tasks"][1]["context"] == ["research_the_field"]
    assert crew_jsonc["agents"] == ["lead_researcher", "reporting_analyst"]
    assert export(client, builder, rich_crew, "crew-jsonc").namelist()[0] == "crew.jsonc"


@pytest.mark.parametrize("fmt", ["crewai-yaml", "crew-jsonc"])
def test_importing_an_export_gives_an_equal_crew(client, builder, rich_crew, fmt):
    archive = export(client, builder, rich_crew, fmt)
    data = client.get(f"/crews/{rich_crew.pk}/export?format={fmt}", user=builder).content

    response = upload(client, builder, data)

    assert response.status_code == 201, response.content
    copy = Crew.objects.get(pk=response.json()["id"])
    assert copy.name == f"{rich_crew.name} (2)"
    assert crew_shape(copy) == crew_shape(rich_crew)
    assert archive.namelist()[0] == ("config/agents.yaml" if fmt == "crewai-yaml" else "crew.jsonc")


def test_an_export_never_holds_a_key_or_an_address(client, builder, admin_user):
    llm = LLM(name="Hosted", model="openai/gpt-4o-mini", api_base="https://llm.internal.example/v1")
    llm.set_api_key("sk-secret-key-0123456789")
    llm.save()
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"]["llm"] = "Hosted"
    crew_id = client.post("/crews/import", json=classic_body(agents_yaml=yaml.safe_dump(agents)), user=builder).json()["id"]

    response = client.get(f"/crews/{crew_id}/export", user=builder)

    content = b"".join(zipfile.ZipFile(io.BytesIO(response.content)).read(n)
                       for n in zipfile.ZipFile(io.BytesIO(response.content)).namelist())
    assert b"Hosted" in content
    for secret in (b"sk-secret", b"0123456789", b"llm.internal.example", llm.api_key_encrypted.encode()):
        assert secret not in content and secret not in response.content


def test_export_answers_a_zip_with_a_file_name_through_the_real_url(builder, rich_crew):
    client = Client()
    client.force_login(builder)

    response = client.get(f"/api/crews/{rich_crew.pk}/export?format=crew-jsonc")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == 'attachment; filename="research_crew.crew-jsonc.zip"'


def test_another_users_crew_cannot_be_exported(client, other_builder, rich_crew):
    assert client.get(f"/crews/{rich_crew.pk}/export", user=other_builder).status_code == 404


def test_the_openapi_document_lists_every_status_of_import_and_export(client):
    paths = api.get_openapi_schema()["paths"]
    assert set(map(str, paths["/api/crews/import"]["post"]["responses"])) >= {"200", "201", "401", "403", "422"}
    assert set(map(str, paths["/api/crews/{id}/export"]["get"]["responses"])) >= {"200", "401", "403", "404", "422"}
    zipped = paths["/api/crews/{id}/export"]["get"]["responses"][200]["content"]
    assert "application/zip" in zipped


def test_a_zip_and_its_maps_upload_as_multipart_through_the_real_url(builder):
    client = Client()
    client.force_login(builder)
    agents = yaml.safe_load((CLASSIC / "agents.yaml").read_text())
    agents["researcher"]["llm"] = "openai/gpt-4o"
    data = zip_of({"config/agents.yaml": yaml.safe_dump(agents),
                   "config/tasks.yaml": (CLASSIC / "tasks.yaml").read_text()})
    demo = LLM.objects.get(model="demo/offline")

    def post(**fields: str) -> Any:
        return client.post("/api/crews/import", {"file": SimpleUploadedFile("crew.zip", data), **fields})

    refused = post()
    imported = post(llm_map=json.dumps({"openai/gpt-4o": demo.name}))

    assert refused.status_code == 422 and refused.json()["unknown_llms"] == ["openai/gpt-4o"]
    assert imported.status_code == 201, imported.content
    assert Agent.objects.get(owner=builder, name="researcher").llm_id == demo.pk


def test_a_hierarchical_crew_without_a_manager_llm_is_refused_by_the_crews_own_rule(client, builder):
    response = client.post("/crews/import", json=classic_body(crew={"process": "hierarchical"}), user=builder)

    error = response.json()["errors"][0]
    assert (error["file"], error["key"]) == ("crew", "process")
    assert error["message"] == "A hierarchical crew needs a manager LLM."
    assert counts() == (0, 0, 0, 0)
