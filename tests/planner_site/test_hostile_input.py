"""Hostile input to the API and the forms (issue #16): a 422 naming the field, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents.models import Agent, PromptTemplateVersion
from crews.models import Crew, Run, Task
from planner_site.body_checks import MAX_DEPTH, MAX_INPUT_KEYS
from planner_site.tokens import token_create
from tests.crews.run_helpers import make_crew

SURROGATE_MESSAGE = "Text may not contain a lone surrogate (such as \\ud800): it is not valid Unicode."


@pytest.fixture
def api(builder: Any) -> Client:
    _token, raw = token_create(user=builder)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.fixture
def crew(builder: Any) -> Crew:
    return make_crew(builder, name="Tides")


def send(client: Client, method: str, path: str, body: str | bytes, **extra: Any) -> Any:
    return getattr(client, method)(path, data=body, content_type="application/json", **extra)


def assert_invalid(response: Any, field: str, message: str | None = None) -> dict[str, Any]:
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"detail", "code", "errors"}, body
    assert body["errors"][0]["field"] == field, body
    if message is not None:
        assert body["errors"][0]["message"] == message, body
    return body


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# Lone surrogates -------------------------------------------------------------------------------

# Each write that takes text: (method, path, body with \ud800 escaped, field named).
SURROGATE_WRITES = [
    ("post", "/api/crews", '{"name": "T\\ud800"}', "name"),
    ("post", "/api/agents", '{"name": "W", "role": "r", "goal": "g\\ud800"}', "goal"),
    ("post", "/api/crews/{crew}/tasks",
     '{"name": "T", "description": "d", "expected_output": "\\udfff"}', "expected_output"),
    ("patch", "/api/tasks/{task}", '{"description": "a\\uDBFFb"}', "description"),
    ("patch", "/api/crews/{crew}", '{"default_inputs": {"topic": "\\ud800"}}', "default_inputs.topic"),
    ("post", "/api/crews/{crew}/kickoff", '{"inputs": {"topic": "\\ud800"}}', "inputs.topic"),
    ("post", "/api/crews/{crew}/plans", '{"inputs": {"topic": ["x", "\\ud800"]}}', "inputs.topic.1"),
    ("post", "/api/agents/{agent}/kickoff", '{"message": "\\ud800"}', "message"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "field"), SURROGATE_WRITES)
def test_a_lone_surrogate_in_any_written_text_is_a_422_naming_the_field(
    api, crew, method, path, body, field
):
    task = crew.tasks.first()
    path = path.format(crew=crew.pk, task=task.pk, agent=task.agent_id)

    response = send(api, method, path, body)

    assert_invalid(response, field, SURROGATE_MESSAGE)


def test_a_lone_surrogate_in_a_key_names_the_object_holding_it(api, crew):
    response = send(api, "post", f"/api/crews/{crew.pk}/kickoff", '{"inputs": {"\\ud800": "x"}}')

    assert_invalid(response, "inputs", SURROGATE_MESSAGE)


def test_a_surrogate_pair_is_text_like_any_other(api, crew):
    response = send(api, "patch", f"/api/crews/{crew.pk}", '{"description": "waves \\ud83c\\udf0a"}')

    assert response.status_code == 200, response.content
    assert response.json()["description"] == "waves \N{WATER WAVE}"


def test_a_kickoff_refused_for_a_surrogate_leaves_no_run_and_the_next_one_shows(api, builder, crew):
    refused = send(api, "post", f"/api/crews/{crew.pk}/kickoff", '{"inputs": {"topic": "\\ud800"}}')
    accepted = send(api, "post", f"/api/crews/{crew.pk}/kickoff", '{"inputs": {"topic": "tides"}}')

    assert_invalid(refused, "inputs.topic")
    assert accepted.status_code == 202, accepted.content
    assert Run.objects.count() == 1
    page = Client()
    page.force_login(builder)
    assert page.get(f"/runs/{accepted.json()['id']}/").status_code == 200


# Depth -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/crews/{crew}/kickoff", '{"inputs": {"topic": %s}}', "inputs.topic.0.0"),
        ("post", "/api/crews/{crew}/plans", '{"inputs": {"topic": %s}}', "inputs.topic.0.0"),
        ("patch", "/api/crews/{crew}", '{"default_inputs": {"topic": %s}}', "default_inputs.topic.0.0"),
        ("post", "/api/crews", '{"name": "Deep", "default_inputs": {"a": %s}}', "default_inputs.a.0.0"),
    ],
)
def test_nesting_deeper_than_the_limit_is_a_422_naming_the_field(api, crew, method, path, body, field):
    response = send(api, method, path.format(crew=crew.pk), body % nested(2_500))

    assert_invalid(response, field, f"Nested deeper than {MAX_DEPTH} levels.")
    assert not Crew.objects.filter(name="Deep").exists()


def test_nesting_up_to_the_limit_is_accepted(api, crew):
    # The body, default_inputs and topic are three levels: the list may have the rest.
    body = '{"default_inputs": {"topic": ' + nested(MAX_DEPTH - 3) + "}}"

    response = send(api, "patch", f"/api/crews/{crew.pk}", body)

    assert response.status_code == 200, response.content


def test_a_plan_body_nested_too_deep_is_a_422(api, crew):
    plan_body = '{"tasks": [{"task_id": 1, "steps": ' + nested(2_500) + "}]}"

    response = send(api, "put", "/api/plans/1", plan_body, HTTP_IF_MATCH="1")

    assert_invalid(response, "tasks.0.steps.0")


def test_nesting_beyond_the_parsers_recursion_limit_is_a_422_not_a_crash(api, crew):
    response = send(api, "post", f"/api/crews/{crew.pk}/kickoff", "[" * 100_000)

    assert_invalid(response, "body", f"Nested deeper than {MAX_DEPTH} levels.")


# Lengths, names and input objects ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "field", "limit"),
    [
        ("/api/agents/{agent}", "goal", 4_000),
        ("/api/agents/{agent}", "backstory", 8_000),
        ("/api/agents/{agent}", "role", 300),
        ("/api/crews/{crew}", "description", 4_000),
        ("/api/crews/{crew}", "name", 100),
        ("/api/tasks/{task}", "description", 20_000),
        ("/api/tasks/{task}", "expected_output", 8_000),
    ],
)
def test_a_text_longer_than_its_model_field_is_a_422_and_its_limit_is_accepted(
    api, crew, path, field, limit
):
    task = crew.tasks.first()
    path = path.format(crew=crew.pk, task=task.pk, agent=task.agent_id)

    too_long = send(api, "patch", path, json.dumps({field: "x" * (limit + 1)}))
    just_right = send(api, "patch", path, json.dumps({field: "x" * limit}))

    assert_invalid(too_long, field)
    assert just_right.status_code == 200, just_right.content


def test_a_megabyte_of_planning_prompt_is_refused(api, crew):
    agent = crew.tasks.first().agent_id
    body = {"planning_config": {"plan_prompt": "x" * 1_000_000}}

    response = send(api, "patch", f"/api/agents/{agent}", json.dumps(body))

    assert_invalid(response, "planning_config.plan_prompt")


def test_a_prompt_text_longer_than_its_model_field_is_a_422(admin_user):
    _token, raw = token_create(user=admin_user)
    limit = PromptTemplateVersion._meta.get_field("text").max_length

    response = send(Client(), "put", "/api/prompts/observe", json.dumps({"text": "x" * (limit + 1)}),
                    HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert_invalid(response, "text")


@pytest.mark.parametrize("path", ["/api/crews", "/api/agents"])
def test_names_are_trimmed_and_may_not_be_blank(api, path):
    body = {"name": "  Tidy  ", "role": "r", "goal": "g"} if "agents" in path else {"name": "  Tidy  "}

    blank = send(api, "post", path, json.dumps({**body, "name": "   "}))
    trimmed = send(api, "post", path, json.dumps(body))

    assert_invalid(blank, "name")
    assert trimmed.status_code == 201, trimmed.content
    assert trimmed.json()["name"] == "Tidy"


def test_a_task_name_is_trimmed_and_may_not_be_blank(api, crew):
    task = crew.tasks.first()

    blank = send(api, "patch", f"/api/tasks/{task.pk}", '{"name": " "}')
    trimmed = send(api, "patch", f"/api/tasks/{task.pk}", '{"name": " Survey "}')

    assert_invalid(blank, "name")
    assert Task.objects.get(pk=task.pk).name == "Survey" == trimmed.json()["name"]


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("patch", "/api/crews/{crew}", "default_inputs", "default_inputs"),
        ("post", "/api/crews/{crew}/kickoff", "inputs", "inputs"),
        ("post", "/api/crews/{crew}/plans", "inputs", "inputs"),
    ],
)
def test_an_object_of_inputs_holds_a_limited_number_of_names(api, crew, method, path, body, field):
    inputs = {f"k{i}": "v" for i in range(MAX_INPUT_KEYS + 1)}

    response = send(api, method, path.format(crew=crew.pk), json.dumps({body: inputs}))

    assert_invalid(response, field)


# Body size ---------------------------------------------------------------------------------------


def test_a_body_over_the_upload_limit_is_the_apis_413(api, crew, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"description": "x" * 20_000})

    response = send(api, "patch", f"/api/crews/{crew.pk}", body)

    assert response.status_code == 413, response.content
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response.json() == {
        "detail": "The request body is larger than 10000 bytes.",
        "code": "too_large",
        "errors": [{"field": "body", "message": "The request body is larger than 10000 bytes."}],
    }


# Strict types ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/crews/{crew}", {"shared": 0}, "shared"),
        ("/api/crews/{crew}", {"planning": "true"}, "planning"),
        ("/api/crews/{crew}", {"max_rpm": True}, "max_rpm"),
        ("/api/crews/{crew}", {"max_rpm": "5"}, "max_rpm"),
        ("/api/agents/{agent}", {"budget": {"max_tool_calls": False}}, "budget.max_tool_calls"),
        ("/api/agents/{agent}", {"max_iter": 2.0}, "max_iter"),
        ("/api/tasks/{task}", {"human_input": 1}, "human_input"),
    ],
)
def test_booleans_and_integers_are_strict(api, crew, path, body, field):
    task = crew.tasks.first()
    path = path.format(crew=crew.pk, task=task.pk, agent=task.agent_id)

    response = send(api, "patch", path, json.dumps(body))

    assert_invalid(response, field)


# Integrity errors ----------------------------------------------------------------------------------


def test_a_crew_name_taken_says_so_and_another_integrity_error_does_not(api, builder, crew, monkeypatch):
    from django.db import IntegrityError

    taken = send(api, "post", "/api/crews", '{"name": "Tides"}')

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise IntegrityError("CHECK constraint failed: default_inputs")

    monkeypatch.setattr(Crew, "save", refuse)
    other = send(api, "post", "/api/crews", '{"name": "Fresh"}')

    assert_invalid(taken, "name", "You already have a crew with this name.")
    body = assert_invalid(other, "body")
    assert "already" not in body["detail"]


# Stored data ---------------------------------------------------------------------------------------


@pytest.fixture
def odd_run(builder: Any, crew: Crew) -> Run:
    """A finished run whose stored JSON holds a lone surrogate and deep nesting, as older data may."""
    from crews.bridge import record_event

    deep: Any = "bottom \ud800"
    for _level in range(900):  # SQLite's JSON check allows 1,000 levels
        deep = [deep]
    run = Run.objects.create(
        crew=crew, created_by=builder, status=Run.Status.SUCCEEDED,
        inputs={"topic": "tides \ud800", "deep": deep, "\udfffkey": 1}, output="Done",
    )  # fmt: skip
    record_event(run.pk, "run.started", {})
    record_event(run.pk, "tool.completed", {"name": "search", "output": "x\ud800", "deep": deep})
    record_event(run.pk, "run.succeeded", {"output": "Done \udbff"})
    return run


def test_a_run_holding_odd_stored_data_shows_on_its_page_and_the_api(api, builder, odd_run):
    page = Client()
    page.force_login(builder)

    responses = [
        page.get(f"/runs/{odd_run.pk}/"),
        page.get(f"/runs/{odd_run.pk}/", HTTP_HX_REQUEST="true"),
        page.get(f"/runs/{odd_run.pk}/output.md"),
        page.get(f"/crews/{odd_run.crew_id}/runs/"),
        api.get(f"/api/runs/{odd_run.pk}"),
        api.get(f"/api/runs/{odd_run.pk}/events"),
        api.get("/api/runs"),
    ]

    assert [r.status_code for r in responses] == [200] * len(responses)
    for response in responses:
        response.content.decode("utf-8")  # valid UTF-8 throughout
    assert len(responses[5].json()["items"]) == 3


@pytest.mark.django_db(transaction=True)
async def test_a_run_holding_odd_stored_data_replays_on_both_sockets(builder, odd_run):
    from channels.testing import WebsocketCommunicator

    from planner_site.asgi import application
    from tests.crews.test_consumers import session_headers

    headers = await _headers(builder, session_headers)
    for path, frames in ((f"/ws/api/runs/{odd_run.pk}/", 3), (f"/ws/runs/{odd_run.pk}/", 1)):
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, _ = await communicator.connect()
        assert connected
        received = [await communicator.receive_from(timeout=3) for _ in range(frames)]
        assert all(isinstance(frame, str) for frame in received)
        for frame in received:
            frame.encode("utf-8")  # a frame a websocket can carry
        await communicator.disconnect()


async def _headers(builder: Any, make: Any) -> Any:
    from channels.db import database_sync_to_async

    return await database_sync_to_async(make)(builder)


# Forms ---------------------------------------------------------------------------------------------


def test_the_crew_form_refuses_a_lone_surrogate_in_its_json_inputs(builder, crew):
    page = Client()
    page.force_login(builder)

    response = page.post(
        f"/crews/{crew.pk}/edit/",
        {"name": "Tides", "process": "sequential", "plan_mode": "none",
         "on_step_failure": "continue", "extra_inputs": '{"year": "\\ud800"}'},
    )  # fmt: skip

    assert response.status_code == 200  # the form again, with its error
    assert SURROGATE_MESSAGE in response.content.decode()
    assert Crew.objects.get(pk=crew.pk).default_inputs == {}


def test_the_crew_form_refuses_deep_json_inputs_and_too_many_names(builder, crew):
    page = Client()
    page.force_login(builder)
    form = {"name": "Tides", "process": "sequential", "plan_mode": "none", "on_step_failure": "continue"}

    deep = page.post(f"/crews/{crew.pk}/edit/", {**form, "extra_inputs": '{"a": ' + nested(2_500) + "}"})
    many = page.post(
        f"/crews/{crew.pk}/edit/",
        {**form, "extra_inputs": json.dumps({f"k{i}": i for i in range(MAX_INPUT_KEYS + 1)})},
    )

    assert f"Nested deeper than {MAX_DEPTH} levels." in deep.content.decode()
    assert f"At most {MAX_INPUT_KEYS} inputs." in many.content.decode()
    assert Crew.objects.get(pk=crew.pk).default_inputs == {}


def test_the_forms_trim_names_refuse_blank_ones_and_cap_free_texts(builder, crew):
    page = Client()
    page.force_login(builder)
    agent = Agent.objects.get(pk=crew.tasks.first().agent_id)

    blank = page.post(
        "/crews/new/", {"name": "   ", "process": "sequential", "plan_mode": "none",
                        "on_step_failure": "continue", "description": "x"},
    )  # fmt: skip
    long = page.post(
        "/crews/new/", {"name": "Long", "process": "sequential", "plan_mode": "none",
                        "on_step_failure": "continue", "description": "x" * 4_001},
    )  # fmt: skip
    goal = page.post(
        f"/agents/{agent.pk}/edit/",
        {"name": agent.name, "role": "r", "goal": "g" * 4_001, "agent_type": "react", "max_iter": 25,
         "max_retry_limit": 2},
    )  # fmt: skip

    assert blank.status_code == long.status_code == goal.status_code == 200
    assert "This field is required." in blank.content.decode()
    assert "Ensure this value has at most 4000 characters (it has 4001)." in long.content.decode()
    assert "at most 4000 characters" in goal.content.decode()
    assert not Crew.objects.filter(name="Long").exists()


def test_the_llm_form_refuses_a_lone_surrogate_or_deep_nesting_in_its_params(admin_user):
    from agents.models import LLM

    page = Client()
    page.force_login(admin_user)
    form = {"name": "Odd", "model": "openai/odd", "context_window": 8192, "supports_tools": "unknown"}

    surrogate = page.post("/llms/new/", {**form, "params": '{"stop": "\\ud800"}'})
    deep = page.post("/llms/new/", {**form, "params": '{"stop": ' + "[" * 100_000})

    assert surrogate.status_code == deep.status_code == 200  # the form again, with its error
    assert SURROGATE_MESSAGE in surrogate.content.decode()
    assert f"Nested deeper than {MAX_DEPTH} levels." in deep.content.decode()
    assert not LLM.objects.filter(name="Odd").exists()


def test_a_crew_id_beyond_64_bits_is_a_404_on_kickoff(api):
    response = send(api, "post", "/api/crews/25152693443204882375808909312/kickoff", '{"inputs": {}}')

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"


# Review findings 12, 14, 15 ------------------------------------------------------------------------


def test_stored_emoji_read_back_as_they_are_without_the_surrogate_walk(crew, monkeypatch):
    from planner_site import stored_json

    walked: list[Any] = []
    real = stored_json.readable
    monkeypatch.setattr(stored_json, "readable", lambda data: walked.append(data) or real(data))
    emoji = {"mood": "fine 🙂😀", "🚀": ["go 🙂", {"deep": "👍🏽"}]}
    Crew.objects.filter(pk=crew.pk).update(default_inputs=emoji)

    assert Crew.objects.get(pk=crew.pk).default_inputs == emoji
    assert walked == []  # valid pairs (SQLite keeps them as \ud83d\ude42) need no walk

    Crew.objects.filter(pk=crew.pk).update(default_inputs={"a": "x \ud800 🙂", "b": "🙂\udc00", "c": "\udfff"})
    assert Crew.objects.get(pk=crew.pk).default_inputs == {"a": "x \\ud800 🙂", "b": "🙂\\udc00", "c": "\\udfff"}
    assert len(walked) == 1


@pytest.mark.parametrize(("text", "read"), [
    ("\ud800\ud83d\ude42", "\\ud800🙂"),  # a high before a pair
    ("\ud83d\ude42\ude42", "🙂\\ude42"),  # a low after a pair
    ("end \udbff", "end \\udbff"),
])
def test_a_lone_surrogate_beside_a_pair_is_still_made_readable(crew, text, read):
    Crew.objects.filter(pk=crew.pk).update(default_inputs={"t": text})

    assert Crew.objects.get(pk=crew.pk).default_inputs == {"t": read}


@pytest.mark.parametrize(("body", "field"), [
    ('{"default_inputs": {"x": 1e400}}', "default_inputs.x"),
    ('{"default_inputs": {"x": [1, -1e400]}}', "default_inputs.x.1"),
    ('{"default_inputs": {"x": 1.5e308}, "budget": {"max_cost_usd": 1e999}}', "budget.max_cost_usd"),
])
def test_a_number_too_large_for_a_float_is_a_422_naming_the_field(api, crew, body, field):
    response = send(api, "patch", f"/api/crews/{crew.pk}", body)

    assert_invalid(response, field, "A number too large to store (beyond ±1.8e308).")
    crew.refresh_from_db()
    assert crew.default_inputs != {"x": 1.5e308}


def test_a_forms_json_box_refuses_a_number_too_large_for_a_float():
    from django.core.exceptions import ValidationError

    from planner_site.body_checks import CheckedJSONField

    with pytest.raises(ValidationError, match="A number too large to store"):
        CheckedJSONField().clean('{"x": 1e400}')
    assert CheckedJSONField().clean('{"x": 1e300}') == {"x": 1e300}


def test_a_form_post_over_the_upload_limit_is_a_friendly_413_page(builder, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
    page = Client()
    page.force_login(builder)

    response = page.post("/crews/new/", {"name": "T", "description": "x" * 5_000})

    assert response.status_code == 413
    text = response.content.decode()
    assert "<html" in text and "Too large" in text
    assert "larger than the site accepts (1000 bytes)" in text


def test_an_api_request_over_the_upload_limit_in_a_form_body_is_the_apis_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000

    response = api.post("/api/crews/import", {"format": "crew-jsonc", "crew_jsonc": "x" * 5_000})

    assert response.status_code == 413, response.content
    assert response.json()["code"] == "too_large"


def test_an_api_request_with_too_many_query_fields_is_the_apis_422(api):
    query = "&".join(f"f{i}=1" for i in range(1_001))

    response = api.get(f"/api/crews?{query}")

    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"detail", "code", "errors"} and body["code"] == "too_many_fields"


def test_a_page_request_with_too_many_fields_says_so(builder):
    page = Client()
    page.force_login(builder)

    response = page.post("/crews/new/", {f"f{i}": "1" for i in range(1_001)})

    assert response.status_code == 400
    assert "more than 1000 fields" in response.content.decode()
