"""What each LLM call of a run was sent: kept by the worker, read back by the run page and the API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.urls import reverse
from ninja.testing import TestClient

from agents.models import LLM, Agent
from crews.bridge import payload_of
from crews.engine.planner import SUBMIT_TOOL
from crews.models import Crew, Run, RunEvent, RunLLMCall, Task
from crews.run_view import RunView, llm_call_url, render_event_html
from planner_site.api import api
from tests.conftest import signed_in
from tests.crews.run_helpers import stop_leftover_runs  # noqa: F401 - a fixture
from tests.fakes.openai_server import FakeLLMServer, Reply

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")

KEY = "fake-key-0123456789abcdef"  # not sk-shaped: only the run's own keys catch it
DESCRIPTION = 'Do the Research work about {topic} <script>alert("x")</script>, never say ' + KEY
STEPS = ["Find the tide tables", "Read about spring tides"]


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


def planner(request: Any) -> bool:  # the crew planner's call: its plan comes as a tool call
    return (request.body.get("tool_choice") or {}).get("function", {}).get("name") == SUBMIT_TOOL


def reply(request: Any) -> Reply:
    if planner(request):
        return Reply.tool_call(SUBMIT_TOOL, {"plans": [{"task_number": 1, "steps": STEPS}]})
    return Reply.text("Thought: I now know the final answer\nFinal Answer: <b>done</b>")


@pytest.fixture
def finished_run(client, builder, django_capture_on_commit_callbacks) -> Run:
    """A planning crew on an LLM with a key, against the fake OpenAI server through real litellm:
    its plan drafted, approved and run through the API (the immediate task backend)."""
    with FakeLLMServer() as server:
        server.default = reply
        llm = LLM(name="Fake", model="openai/test", api_base=server.base_url, supports_tools=True)
        llm.set_api_key(KEY)
        llm.save()
        agent = Agent.objects.create(owner=builder, name="Writer", role="Writer", goal="Write", llm=llm)
        crew = Crew.objects.create(owner=builder, name="Tides", planning=True, planning_llm=llm)
        crew.agents.set([agent])
        Task.objects.create(crew=crew, order=0, name="Research", agent=agent, description=DESCRIPTION,
                            expected_output="The Research result")
        with django_capture_on_commit_callbacks(execute=True):
            drafted = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "tides"}}, user=builder)
        assert client.get(f"/plans/{drafted.json()['id']}", user=builder).json()["status"] == "draft"
        assert client.post(f"/plans/{drafted.json()['id']}/approve", user=builder).status_code == 200
        with django_capture_on_commit_callbacks(execute=True):
            started = client.post(f"/crews/{crew.pk}/kickoff", user=builder,
                                  json={"inputs": {"topic": "tides"}, "plan_id": drafted.json()["id"]})
        assert started.status_code == 202, started.content
    run = Run.objects.get(pk=started.json()["id"])
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def task_call(run: Run) -> RunLLMCall:
    """The kept call of the run's first LLM call for a step of its task."""
    ends = RunEvent.objects.filter(run=run, type="llm.completed", task_id__isnull=False).exclude(step_id="")
    return RunLLMCall.objects.get(run=run, seq=ends.order_by("seq").values_list("seq", flat=True)[0])


def test_every_llm_call_of_a_run_is_kept_with_its_completed_events_seq(finished_run):
    ends = list(RunEvent.objects.filter(run=finished_run, type__in=["llm.completed", "llm.failed"])
                .values_list("seq", "data"))
    kept = {c.seq: c for c in RunLLMCall.objects.filter(run=finished_run)}

    assert ends and sorted(kept) == [seq for seq, _data in ends]
    for seq, data in ends:
        assert (kept[seq].purpose, kept[seq].model) == (data["purpose"], data["model"])
    assert all("messages" not in data for _seq, data in ends)  # never in the events themselves


def test_a_tasks_call_holds_the_task_text_and_the_approved_steps_the_model_was_sent(finished_run):
    call = task_call(finished_run)

    sent = "\n".join(str(m.get("content")) for m in call.messages)
    assert 'Do the Research work about tides <script>alert("x")</script>' in sent
    assert "Plan for this task:\n1. Find the tide tables\n2. Read about spring tides" in sent  # as approved
    assert "Step 1: Find the tide tables" in sent
    assert call.reply["content"].endswith("Final Answer: <b>done</b>") and call.error == ""


def test_the_llms_key_is_never_kept_or_shown(finished_run, builder):
    call = task_call(finished_run)

    for kept in RunLLMCall.objects.filter(run=finished_run):
        stored = json.dumps([kept.messages, kept.tools, kept.reply, kept.error])
        assert KEY not in stored
    assert "never say [redacted]" in json.dumps(call.messages)
    fragment = signed_in(builder).get(llm_call_url(finished_run.pk, call.seq), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and KEY not in fragment.content.decode()


def test_the_api_returns_a_call_to_its_runs_owner_only(client, finished_run, builder, other_builder):
    call = task_call(finished_run)

    got = client.get(f"/runs/{finished_run.pk}/llm-calls/{call.seq}", user=builder)

    assert got.status_code == 200, got.content
    body = got.json()
    assert set(body) == {"seq", "purpose", "model", "messages", "tools", "response_format", "reply", "error"}
    assert (body["seq"], body["messages"], body["reply"]["content"]) == (call.seq, call.messages, call.reply["content"])
    assert client.get(f"/runs/{finished_run.pk}/llm-calls/{call.seq}", user=other_builder).status_code == 404
    assert client.get(f"/runs/{finished_run.pk}/llm-calls/1", user=builder).status_code == 404  # run.queued


def test_the_api_serves_a_call_through_the_real_url(finished_run, builder):
    call = task_call(finished_run)

    got = signed_in(builder).get(f"/api/runs/{finished_run.pk}/llm-calls/{call.seq}")

    assert got.status_code == 200 and got.json()["purpose"] == call.purpose


def test_the_page_fragment_shows_each_message_escaped_and_the_reply(finished_run, builder, other_builder):
    call = task_call(finished_run)
    url = reverse("crews:run-llm-call", args=[finished_run.pk, call.seq])

    fragment = signed_in(builder).get(url, HTTP_HX_REQUEST="true")

    html = fragment.content.decode()
    assert fragment.status_code == 200 and "<html" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html and "<script>alert" not in html
    assert ">User<" in html and ">Reply<" in html and "Final Answer: &lt;b&gt;done&lt;/b&gt;" in html
    assert "<pre" in html  # whitespace kept as sent
    assert signed_in(other_builder).get(url, HTTP_HX_REQUEST="true").status_code == 404
    page = signed_in(builder).get(url)
    assert page.status_code == 200 and "<html" in page.content.decode()


def test_the_run_page_rows_of_ended_calls_load_what_was_sent_when_opened(finished_run, builder):
    call = task_call(finished_run)

    page = signed_in(builder).get(reverse("crews:run-detail", args=[finished_run.pk])).content.decode()

    url = llm_call_url(finished_run.pk, call.seq)
    assert f'hx-get="{url}" hx-trigger="toggle once"' in page
    assert page.count('class="entry entry--llm"') == RunLLMCall.objects.filter(run=finished_run).count()


def test_the_socket_renders_an_ended_calls_row_as_the_page_does(finished_run):
    call = task_call(finished_run)
    view = RunView.build(finished_run, upto=call.seq - 1)

    html = render_event_html(view, payload_of(RunEvent.objects.get(run=finished_run, seq=call.seq)), can_write=True)

    row = next(line for line in html.splitlines() if 'class="entry entry--llm"' in line)
    assert 'hx-swap-oob="true"' in row and f'hx-get="{llm_call_url(finished_run.pk, call.seq)}"' in row
    assert row.replace(' hx-swap-oob="true"', "") in RunView.build(finished_run).tasks[0].steps[0].activity[0].html()


def test_a_call_that_was_not_kept_says_so(finished_run, builder):
    call = task_call(finished_run)
    RunLLMCall.objects.filter(pk=call.pk).delete()  # as for a run from before calls were kept

    fragment = signed_in(builder).get(llm_call_url(finished_run.pk, call.seq), HTTP_HX_REQUEST="true")

    assert fragment.status_code == 200 and "was not kept" in fragment.content.decode()
