"""Provider failures in plain words: Test connection, the run page and the plan editor, each
against the fake OpenAI server through real litellm."""

from __future__ import annotations

import html
import socket
import time
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.engine.failures import KINDS, kind_of_message
from agents.failures import MESSAGES
from agents.models import LLM
from crews import plans, runner, runs
from crews.models import Plan, Run, RunEvent
from tests.conftest import signed_in
from tests.crews.run_helpers import make_crew, stop_leftover_runs  # noqa: F401 - a fixture
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - a fixture

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_llm(api_base: str, **params: Any) -> LLM:
    llm = LLM(name="Fake", model="openai/test", api_base=api_base, supports_tools=True,
              params={"max_retries": 0, **params})
    llm.set_api_key("sk-test-123456")
    llm.save()
    return llm


def title(kind: str) -> str:
    """The plain message of ``kind`` as the page escapes it."""
    return html.escape(str(MESSAGES[kind][0]))


# Test connection ---------------------------------------------------------------------------------


def test_test_connection_against_the_fake_server_reports_success_and_latency(admin_user, fake_llm_server):
    fake_llm_server.default = Reply.text("OK")
    llm = make_llm(fake_llm_server.base_url)

    page = signed_in(admin_user).post(reverse("agents:llm-test", args=[llm.pk])).content.decode()

    assert "The connection works (answered in" in page and " ms)." in page


def test_test_connection_against_a_401_says_the_key_is_wrong(admin_user, fake_llm_server):
    fake_llm_server.default = Reply.error(401, "Incorrect API key provided", code="invalid_api_key")
    llm = make_llm(fake_llm_server.base_url)

    page = signed_in(admin_user).post(reverse("agents:llm-test", args=[llm.pk]),
                                      HTTP_HX_REQUEST="true").content.decode()

    assert title("auth") in page
    assert "<details" in page and "Incorrect API key provided" in page  # the raw error, one click away
    assert 'data-failure-kind="auth"' in page


def test_test_connection_against_a_closed_port_says_unreachable_within_the_stated_time(admin_user):
    llm = make_llm(f"http://127.0.0.1:{closed_port()}/v1")

    started = time.monotonic()
    page = signed_in(admin_user).post(reverse("agents:llm-test", args=[llm.pk])).content.decode()

    assert time.monotonic() - started < 5
    assert title("unreachable") in page
    assert "within 5 seconds" in page


# Runs: each failure class on the run page ------------------------------------------------------

FAILURES = [
    ("auth", Reply.error(401, "Incorrect API key provided: sk-wr****", code="invalid_api_key")),
    ("auth", Reply.error(403, "Your key has no access to this model")),
    ("model_not_found", Reply.error(404, "The model `test` does not exist", code="model_not_found")),
    ("rate_limited", Reply.error(429, "Rate limit reached for requests", retry_after=0)),
    ("quota", Reply.error(429, "You exceeded your current quota, please check your plan and billing details",
                          type_="insufficient_quota", code="insufficient_quota")),
    ("quota", Reply.error(402, "Payment required")),
    ("context_too_long", Reply.context_length_exceeded()),
    ("content_filter", Reply.error(400, "Your request was rejected as a result of our safety system",
                                   code="content_policy_violation")),
    ("server_error", Reply.error(500, "upstream exploded")),
    ("endpoint_not_found", Reply.error(404, "404 page not found")),
    ("timeout", Reply.text("late").after(3)),
]


def failed_run(builder: Any, llm: LLM) -> Run:
    """A one-task crew on ``llm``, run in this process the way a worker runs it."""
    crew = make_crew(builder, tasks=("Research",), llm=llm)
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED
    return run


@pytest.mark.parametrize(("kind", "reply"), FAILURES, ids=[f"{k}-{r.status}" for k, r in FAILURES])
def test_each_provider_failure_reaches_the_run_page_in_plain_words(builder, kind, reply):
    with FakeLLMServer() as server:
        server.default = reply
        run = failed_run(builder, make_llm(server.base_url, timeout=0.5, first_token_timeout=0.5))

    failed = RunEvent.objects.filter(run=run, type="llm.failed").last()
    assert failed.data["kind"] == kind and "error" in failed.data and "retrying" in failed.data
    assert RunEvent.objects.get(run=run, type="task.failed").data["kind"] == kind
    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert page.count(title(kind)) == 2  # the run's notice and the task's answer
    assert f'data-failure-kind="{kind}"' in page
    assert "<details" in page


def test_an_unreachable_host_fails_the_run_at_once_without_retries(builder):
    llm = make_llm(f"http://127.0.0.1:{closed_port()}/v1", max_retries=3)

    started = time.monotonic()
    run = failed_run(builder, llm)

    assert time.monotonic() - started < 10
    failed = list(RunEvent.objects.filter(run=run, type="llm.failed"))
    assert [e.data["retrying"] for e in failed] == [False]  # not retried three times
    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert title("unreachable") in page and "within 10 seconds" in page


def test_an_admin_sees_a_link_to_the_llm_and_a_builder_does_not(builder, admin_user):
    with FakeLLMServer() as server:
        server.default = Reply.error(401, "Incorrect API key provided")
        llm = make_llm(server.base_url)
        run = failed_run(builder, llm)

    url = reverse("agents:llm-detail", args=[llm.pk])
    assert f'href="{url}"' in signed_in(admin_user).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert f'href="{url}"' not in signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()


def test_a_failed_drafting_shows_the_plain_message_in_the_plan_editor(builder):
    with FakeLLMServer() as server:
        server.default = Reply.error(401, "Incorrect API key provided")
        llm = make_llm(server.base_url)
        crew = make_crew(builder, tasks=("Research",), llm=llm, planning=True, planning_llm=llm)
        plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
        runner.generate_plan(plan.pk)

    assert Plan.objects.get(pk=plan.pk).status == Plan.Status.FAILED
    page = signed_in(builder).get(reverse("crews:plan-detail", args=[plan.pk])).content.decode()
    assert title("auth") in page and "Incorrect API key provided" in page


# The words ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kind"), [
    ("litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key", "auth"),
    ("litellm.NotFoundError: NotFoundError: OpenAIException - The model `x` does not exist", "model_not_found"),
    ("litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached", "rate_limited"),
    ("litellm.RateLimitError: You exceeded your current quota", "quota"),
    ("litellm.ContextWindowExceededError: maximum context length is 4096 tokens", "context_too_long"),
    ("litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.", "unreachable"),
    ("no complete answer within 600 s", "timeout"),
    ("no first token within 60 s", "timeout"),
    ("rejected as a result of our safety system", "content_filter"),
    ("litellm.InternalServerError: OpenAIException - boom", "server_error"),
    ("The planner's answer could not be used: no steps.", "other"),
])
def test_a_stored_error_message_is_read_as_its_kind(text, kind):
    assert kind_of_message(text) == kind


def test_every_kind_has_a_plain_message_and_advice():
    assert set(MESSAGES) == set(KINDS)
    assert all(str(t) and str(a) for t, a in MESSAGES.values())


def test_a_drafting_against_an_unreachable_host_gives_up_at_once(builder):
    llm = make_llm(f"http://127.0.0.1:{closed_port()}/v1", max_retries=3)
    crew = make_crew(builder, tasks=("Research",), llm=llm, planning=True, planning_llm=llm)
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)

    started = time.monotonic()
    runner.generate_plan(plan.pk)

    assert time.monotonic() - started < 10
    page = signed_in(builder).get(reverse("crews:plan-detail", args=[plan.pk])).content.decode()
    assert title("unreachable") in page and "within 10 seconds" in page


# Only an LLM call's error is worded by kind; the LLM is the run's own (review findings 5, 18) -----


@pytest.mark.parametrize("error", [
    "Missing input {api_key}: give it a value on the kickoff form.",
    "The planner's answer could not be used: Expecting value: line 1 column 401 (char 400).",
    "task 'Billing report' has no usable step",
])
def test_a_plan_that_failed_for_another_reason_shows_its_own_error(builder, error):
    crew = make_crew(builder, tasks=("Research",), planning=True)
    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    plans.plan_fail(plan_id=plan.pk, error=error)

    page = signed_in(builder).get(reverse("crews:plan-detail", args=[plan.pk])).content.decode()

    assert "data-failure-kind" not in page
    assert not any(title(kind) in page for kind in KINDS)
    assert html.escape(error) in page


def test_a_drafting_an_llm_error_ended_keeps_its_kind_out_of_the_apis_warnings(builder):
    with FakeLLMServer() as server:
        server.default = Reply.error(404, "404 page not found")
        llm = make_llm(server.base_url)
        crew = make_crew(builder, tasks=("Research",), llm=llm, planning=True, planning_llm=llm)
        plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
        runner.generate_plan(plan.pk)

    plan = Plan.objects.get(pk=plan.pk)
    assert plans.plan_failure_kind(plan) == "endpoint_not_found"
    page = signed_in(builder).get(reverse("crews:plan-detail", args=[plan.pk])).content.decode()
    assert title("endpoint_not_found") in page and "/v1" in page
    assert signed_in(builder).get(f"/api/plans/{plan.pk}").json()["warnings"] == []


def test_the_failure_links_the_runs_own_llm_not_another_with_the_same_model(builder, admin_user):
    decoy = make_llm("http://127.0.0.1:9/v1")
    LLM.objects.update(is_default=False)
    LLM.objects.filter(pk=decoy.pk).update(name="Decoy", is_default=True)
    with FakeLLMServer() as server:
        server.default = Reply.error(401, "Incorrect API key provided")
        llm = make_llm(server.base_url)
        run = failed_run(builder, llm)

    page = signed_in(admin_user).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert reverse("agents:llm-detail", args=[llm.pk]) in page
    assert reverse("agents:llm-detail", args=[decoy.pk]) not in page


def test_a_run_that_failed_for_another_reason_after_an_llm_failure_shows_its_own_error(builder):
    crew = make_crew(builder, tasks=("Research",))
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    task_id = run.snapshot["tasks"][0]["id"]
    events = [
        ("llm.failed", {"model": "openai/test", "purpose": "step", "error": "401 Incorrect API key provided",
                        "retrying": False, "kind": "auth"}),
        ("run.failed", {"error": "The budget of 1000 tokens is spent."}),
    ]
    first = RunEvent.objects.filter(run=run).count() + 1
    for seq, (type_, data) in enumerate(events, start=first):
        RunEvent.objects.create(run=run, seq=seq, type=type_, task_id=task_id, data=data, at=timezone.now())
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="The budget of 1000 tokens is spent.")

    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()

    assert "The budget of 1000 tokens is spent." in page
    assert page.count(title("auth")) == 0
