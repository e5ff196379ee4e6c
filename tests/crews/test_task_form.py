"""The task form's answer shape and checks (issue #18): the schema box (what the builder writes,
and what a person without JavaScript types), the checks as lines, errors next to their field."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse

from crews.models import Crew
from tests.conftest import signed_in
from tests.crews.test_views import field_error, task_data

SCHEMA = {"type": "array", "items": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_a_task_saves_its_schema_and_checks_from_the_form(builder: Any, demo_crew: Crew) -> None:
    client = signed_in(builder)
    response = client.post(reverse("crews:task-create", args=[demo_crew.pk]), task_data(
        output_schema=json.dumps(SCHEMA), criteria="Names a city\n\n  Is short  ", min_chars="10",
        must_contain="Lisbon\nPorto", must_not_contain="", pattern=r"^\[", guardrail_max_retries="2",
    ))
    assert response.status_code == 302, response.content.decode()[:2000]
    task = demo_crew.tasks.get(name="Summary")
    assert task.output_schema == SCHEMA
    assert task.guardrails == {"criteria": ["Names a city", "Is short"], "min_chars": 10,
                               "must_contain": ["Lisbon", "Porto"], "pattern": r"^\["}
    assert task.guardrail_max_retries == 2
    page = client.get(reverse("crews:task-update", args=[task.pk])).content.decode()
    assert "Names a city\nIs short</textarea>" in page
    assert 'data-schema-builder hidden' in page and "schema-builder.js" in page


def test_a_task_without_checks_keeps_the_defaults(builder: Any, demo_crew: Crew) -> None:
    response = signed_in(builder).post(reverse("crews:task-create", args=[demo_crew.pk]), task_data())
    assert response.status_code == 302
    task = demo_crew.tasks.get(name="Summary")
    assert (task.output_schema, task.guardrails, task.guardrail_max_retries) == (None, {}, 3)


def test_a_bad_schema_or_pattern_is_shown_next_to_its_field(builder: Any, demo_crew: Crew) -> None:
    url = reverse("crews:task-create", args=[demo_crew.pk])
    client = signed_in(builder)
    html = client.post(url, task_data(output_schema='{"type": "string"}')).content.decode()
    assert "must have" in field_error(html, "id_output_schema")
    html = client.post(url, task_data(output_schema='{"type": "object", "required": "x"}')).content.decode()
    assert "not a valid JSON schema" in field_error(html, "id_output_schema")
    html = client.post(url, task_data(pattern="(", min_chars="9", max_chars="3")).content.decode()
    assert "not a valid regular expression" in field_error(html, "id_pattern")
    assert "fewer than the least" in field_error(html, "id_max_chars")
    assert not demo_crew.tasks.filter(name="Summary").exists()


def test_a_schema_with_a_remote_ref_or_a_slow_pattern_is_shown_next_to_its_field(
    builder: Any, demo_crew: Crew
) -> None:
    url = reverse("crews:task-create", args=[demo_crew.pk])
    client = signed_in(builder)
    remote = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    html = client.post(url, task_data(output_schema=json.dumps(remote))).content.decode()
    assert "https://example.com/a.json" in field_error(html, "id_output_schema")
    html = client.post(url, task_data(pattern="(x+)*y")).content.decode()
    assert "repeats" in field_error(html, "id_pattern")
    assert not demo_crew.tasks.filter(name="Summary").exists()


# The schema builder's round trip, in node (the file exports its two conversions to CommonJS) --------


def builder_round_trips(schemas: list[Any]) -> list[Any]:
    """``toSchema(fromSchema(s))`` for each schema, or ``None`` where the builder leaves it to the box."""
    import shutil
    import subprocess
    from pathlib import Path

    import pytest

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = Path(__file__).resolve().parents[2] / "static" / "schema-builder.js"
    program = (
        "const b = require(process.argv[1]);"
        "const out = JSON.parse(process.argv[2]).map(s => { const m = b.fromSchema(s);"
        " return m === null ? null : JSON.parse(JSON.stringify(b.toSchema(m.root, m.fields))); });"
        "process.stdout.write(JSON.stringify(out));"
    )
    done = subprocess.run([node, "-e", program, str(script), json.dumps(schemas)],
                          capture_output=True, text=True, timeout=30, check=True)
    return json.loads(done.stdout)


def test_the_builder_keeps_what_it_shows_and_leaves_the_rest_to_the_box() -> None:
    city = {"type": "string", "description": "Where"}
    shown = [
        {"type": "object", "properties": {"city": city, "tags": {"type": "array", "items": {"type": "string"}}},
         "required": ["city"]},
        {"type": "array", "items": {"type": "object", "properties": {
            "stops": {"type": "array", "description": "In order",
                      "items": {"type": "object", "properties": {"city": city}}}}}},
        {"type": "object", "properties": {"__proto__": {"type": "string"}, "constructor": {"type": "integer"}}},
    ]
    assert builder_round_trips(shown) == shown
    dropped_before = [
        {"type": "object", "description": "A trip", "properties": {"city": city}},
        {"type": "array", "description": "Trips", "items": {"type": "object", "properties": {"city": city}}},
        {"type": "array", "items": {"type": "object", "description": "A trip", "properties": {"city": city}}},
        {"type": "object", "properties": {"stops": {"type": "array", "items": {
            "type": "object", "description": "A stop", "properties": {"city": city}}}}},
        {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "description": "A tag"}}}},
        {"type": "object", "properties": {"city": {"type": "toString"}}},
        {"type": "object", "properties": {"city": {"type": "string", "description": 7}}},
    ]
    assert builder_round_trips(dropped_before) == [None] * len(dropped_before)
