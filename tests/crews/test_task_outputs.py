"""Structured output and guardrails through the API and the worker (issue #18): the task fields
saved and validated, a run against the fake OpenAI server through real litellm, its JSON in the
run's task results and its downloads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ninja.testing import TestClient

from agents.models import LLM, Agent
from crews.models import Crew, Run, RunEvent, Task
from planner_site.api import api
from tests.conftest import signed_in
from tests.crews.api_helpers import assert_invalid
from tests.crews.run_helpers import stop_leftover_runs  # noqa: F401 - a fixture
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.plain_models import form_of

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")

SCHEMA = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["city", "days"],
    },
}
TRIPS = [{"city": "Lisbon", "days": 2, "tags": ["food", "tram"]}, {"city": "Porto", "days": 1}]


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


@pytest.fixture
def crew(builder: Any) -> Crew:
    agent = Agent.objects.create(owner=builder, name="Planner", role="Trip planner", goal="Plan trips")
    crew = Crew.objects.create(owner=builder, name="Trips")
    crew.agents.set([agent])
    return crew


def task_body(crew: Crew, **fields: Any) -> dict[str, Any]:
    agent = crew.agents.get()
    return {"name": "Trips", "description": "Plan trips", "expected_output": "Trips", "agent_id": agent.pk, **fields}


def test_a_task_keeps_its_schema_and_checks_and_the_api_returns_them(client, crew, builder) -> None:
    checks = {"criteria": ["Names Lisbon", "  "], "max_chars": 900, "must_contain": ["Lisbon"], "pattern": "^\\["}
    created = client.post(f"/crews/{crew.pk}/tasks", user=builder,
                          json=task_body(crew, output_schema=SCHEMA, guardrails=checks, guardrail_max_retries=1))
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["output_schema"] == SCHEMA
    assert body["guardrails"] == {"criteria": ["Names Lisbon"], "min_chars": None, "max_chars": 900,
                                  "must_contain": ["Lisbon"], "must_not_contain": [], "pattern": "^\\["}
    assert body["guardrail_max_retries"] == 1
    changed = client.patch(f"/tasks/{body['id']}", user=builder, json={"output_schema": None, "guardrails": {}})
    assert changed.status_code == 200, changed.content
    assert changed.json()["output_schema"] is None
    assert Task.objects.get(pk=body["id"]).guardrails == {}


@pytest.mark.parametrize(("fields", "field"), [
    ({"output_schema": {"type": "wrong"}}, "output_schema"),
    ({"output_schema": {"type": "string"}}, "output_schema"),
    ({"guardrails": {"pattern": "("}}, "guardrails.pattern"),
    ({"guardrails": {"min_chars": 9, "max_chars": 3}}, "guardrails.max_chars"),
    ({"guardrail_max_retries": 11}, "guardrail_max_retries"),
])
def test_a_bad_schema_or_check_is_refused_naming_it(client, crew, builder, fields, field) -> None:
    response = client.post(f"/crews/{crew.pk}/tasks", user=builder, json=task_body(crew, **fields))
    assert_invalid(response, field)
    assert not Task.objects.exists()


@pytest.fixture
def finished_run(client, crew, builder, django_capture_on_commit_callbacks) -> tuple[Run, list[Any]]:
    """Trips (a schema and a criterion) then Report, run through the API on the fake server."""
    with FakeLLMServer() as server:
        server.add(
            Reply.json([{"city": "Porto", "days": 1}]),  # natively shaped, but fails the criterion
            Reply.json({"passed": False, "reasons": ["Lisbon is missing."]}),
            Reply.text(json.dumps(TRIPS)),  # the retry: the reasons were in its request
            Reply.json({"passed": True, "reasons": []}),
            Reply.text("A report on two trips."),
        )
        llm = LLM.objects.create(name="Fake", model="openai/test", api_base=server.base_url, supports_tools=False)
        Agent.objects.filter(crews=crew).update(llm=llm)
        trips = client.post(f"/crews/{crew.pk}/tasks", user=builder, json=task_body(
            crew, output_schema=SCHEMA, guardrails={"criteria": ["Names Lisbon"]})).json()
        client.post(f"/crews/{crew.pk}/tasks", user=builder, json=task_body(
            crew, name="Report", description="Write a report", context_task_ids=[trips["id"]]))
        with django_capture_on_commit_callbacks(execute=True):
            started = client.post(f"/crews/{crew.pk}/kickoff", user=builder, json={"inputs": {}})
        assert started.status_code == 202, started.content
        requests = list(server.requests)
    run = Run.objects.get(pk=started.json()["id"])
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run, requests


def test_a_run_checks_retries_and_passes_the_json_on(client, finished_run, builder) -> None:
    run, requests = finished_run
    assert [form_of(r) for r in requests] == ["json_schema", "json_schema", "plain", "json_schema", "plain"]
    assert "- Lisbon is missing." in requests[2].last_user_text()
    assert '"city": "Lisbon"' in requests[4].last_user_text()  # the later task receives the JSON
    events = RunEvent.objects.filter(run=run)
    purposes = [e.data["purpose"] for e in events.filter(type="llm.completed").order_by("seq")]
    assert purposes == ["react", "guardrail", "react", "guardrail", "react"]
    checks = [(e.type, e.data) for e in events.filter(type__startswith="guardrail.").order_by("seq")]
    trips_id = run.task_results.get(order=0).task_id_snapshot  # an id, as API.md's ids are
    assert checks == [
        ("guardrail.failed", {"task_id": trips_id, "attempt": 1, "reasons": ["Lisbon is missing."], "retrying": True}),
        ("guardrail.passed", {"task_id": trips_id, "attempt": 2}),
    ]
    started = events.filter(type="task.started").order_by("seq")
    assert [e.data["task_id"] for e in started] == [t.task_id_snapshot for t in run.task_results.order_by("order")]
    body = client.get(f"/runs/{run.pk}", user=builder).json()
    assert [t["output_json"] for t in body["task_outputs"]] == [TRIPS, None]
    assert json.loads(body["task_outputs"][0]["output"]) == TRIPS
    assert body["usage"]["llm_calls"] == 5  # the checks count like any call


def test_the_json_downloads_as_json_and_csv_for_who_sees_the_run(finished_run, builder, other_builder) -> None:
    run, _ = finished_run
    task_id = run.task_results.get(order=0).task_id_snapshot
    web = signed_in(builder)
    as_json = web.get(f"/api/runs/{run.pk}/tasks/{task_id}/output.json")
    assert as_json.status_code == 200
    assert as_json["Content-Disposition"] == f'attachment; filename="run-{run.pk}-task-{task_id}.json"'
    assert json.loads(as_json.content) == TRIPS
    as_csv = web.get(f"/api/runs/{run.pk}/tasks/{task_id}/output.csv")
    assert as_csv.status_code == 200 and as_csv["Content-Type"].startswith("text/csv")
    assert as_csv.content.decode() == 'city,days,tags\r\nLisbon,2,"[""food"", ""tram""]"\r\nPorto,1,\r\n'
    report_id = run.task_results.get(order=1).task_id_snapshot
    assert web.get(f"/api/runs/{run.pk}/tasks/{report_id}/output.csv").status_code == 404
    assert signed_in(other_builder).get(f"/api/runs/{run.pk}/tasks/{task_id}/output.json").status_code == 404


def test_the_run_page_shows_the_table_the_downloads_and_each_check(finished_run, builder) -> None:
    from django.urls import reverse

    run, _ = finished_run
    task_id = run.task_results.get(order=0).task_id_snapshot
    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    table = page[page.index('class="output-table"'):page.index("</section>", page.index('class="output-table"'))]
    assert "<th scope=\"col\">city</th><th scope=\"col\">days</th><th scope=\"col\">tags</th>" in table
    assert "<td>Lisbon</td><td>2</td><td>[&quot;food&quot;, &quot;tram&quot;]</td>" in table
    assert f'href="/api/runs/{run.pk}/tasks/{task_id}/output.csv"' in table
    assert "Checks failed (attempt 1): the agent answers again" in page
    assert "Lisbon is missing." in page
    assert "Checks passed (attempt 2)" in page
    assert page.count('class="output-table"') == 1  # the Report task has none


# Review of #18: schemas that would reach out or stall, CSV formulas, stale JSON ------------------------


@pytest.mark.parametrize(("schema", "words"), [
    ({"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/evil.json"}}},
     "http://127.0.0.1:9/evil.json"),
    ({"type": "object", "properties": {"a": {"$dynamicRef": "other.json#meta"}}}, "other.json#meta"),
    ({"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}, "#/$defs/missing"),
    ({"type": "object", "$defs": {"n": {"$ref": "#/$defs/gone"}}, "properties": {"a": {"$ref": "#/$defs/n"}}},
     "#/$defs/gone"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}, "^(a+)+$"),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "(?<=a+)b"}}}, "(?<=a+)b"),
])
def test_a_schema_that_reaches_out_or_stalls_is_refused_naming_why(client, crew, builder, schema, words) -> None:
    response = client.post(f"/crews/{crew.pk}/tasks", user=builder, json=task_body(crew, output_schema=schema))
    body = assert_invalid(response, "output_schema")
    assert words in body["errors"][0]["message"], body
    assert not Task.objects.exists()


def test_local_refs_patterns_and_names_that_look_like_keywords_are_kept(client, crew, builder) -> None:
    schema = {
        "type": "object",
        "$defs": {"day": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
        "properties": {"when": {"$ref": "#/$defs/day"}, "pattern": {"type": "string"},
                       "patternProperties": {"type": "string"}, "$ref": {"type": "string"}},
    }
    created = client.post(f"/crews/{crew.pk}/tasks", user=builder, json=task_body(crew, output_schema=schema))
    assert created.status_code == 201, created.content


def test_a_guardrail_pattern_that_repeats_a_repetition_is_refused(client, crew, builder) -> None:
    response = client.post(f"/crews/{crew.pk}/tasks", user=builder,
                           json=task_body(crew, guardrails={"pattern": "^(a+)+$"}))
    body = assert_invalid(response, "guardrails.pattern")
    assert "repeats" in body["errors"][0]["message"]
    ok = client.post(f"/crews/{crew.pk}/tasks", user=builder,
                     json=task_body(crew, guardrails={"pattern": "^[a-z]+(,[a-z]+)*$"}))
    assert ok.status_code == 201, ok.content


def test_csv_cells_that_a_spreadsheet_would_run_are_defused() -> None:
    import csv
    import io

    from crews.output_table import as_csv, table_of

    rows = [{"name": '=HYPERLINK("http://x")', "n": -3, "note": "+1", "at": "@SUM(A1)",
             "tab": "\tx", "cr": "\rx", "minus": "-3", "safe": "a=b"}]
    assert list(csv.reader(io.StringIO(as_csv(rows), newline="")))[1] == [
        '\'=HYPERLINK("http://x")', "-3", "'+1", "'@SUM(A1)", "'\tx", "'\rx", "'-3", "a=b",
    ]
    assert as_csv(["-5 apples", 7, -2.5]) == "value\r\n'-5 apples\r\n7\r\n-2.5\r\n"
    # The page's table shows the text as it is.
    assert table_of(rows)[1][0][0] == '=HYPERLINK("http://x")'


def test_a_task_started_again_drops_its_old_json(finished_run, builder) -> None:
    from crews.bridge import record_event

    run, _ = finished_run
    trips = run.task_results.get(order=0)
    assert trips.output_json == TRIPS
    record_event(run.pk, "task.started", {"task_id": trips.task_id_snapshot}, task_id=trips.task_id_snapshot)
    trips.refresh_from_db()
    assert trips.output_json is None
    record_event(run.pk, "task.failed", {"error": "Out of time."}, task_id=trips.task_id_snapshot)
    trips.refresh_from_db()
    assert trips.output_json is None
    web = signed_in(builder)
    assert web.get(f"/api/runs/{run.pk}/tasks/{trips.task_id_snapshot}/output.json").status_code == 404
