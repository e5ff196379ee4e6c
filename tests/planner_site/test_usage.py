"""Usage and cost: the page's figures are the sum of the recorded LLM calls (two runs against the
fake OpenAI-compatible server, and a plan drafted outside a run), per day, person, crew and model;
and a spent daily budget refuses a kickoff, through the API and on the crew page, naming the
budget and the spend."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from ninja.testing import TestClient

from crews.models import Plan, PlanLLMCall, Run, RunEvent
from planner_site.api import api
from planner_site.budgets import DailyBudgetSpent, budget_check
from planner_site.models import DailyBudget
from planner_site.templatetags.money import usd
from planner_site.usage import _nice_top, chart, site_today, usage_report
from tests.conftest import signed_in
from tests.crews.run_helpers import TaskReplies, fake_llm, make_crew
from tests.fakes.openai_server import FakeLLMServer
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture
from tests.fakes.plain_models import answers


@pytest.fixture
def client() -> TestClient:
    return TestClient(api)


@pytest.fixture
def priced_llm(fake_llm_server: FakeLLMServer) -> Any:
    fake_llm_server.default = TaskReplies(["Research", "Report"])
    llm = fake_llm(fake_llm_server)
    llm.input_price_per_1k, llm.output_price_per_1k = Decimal("0.5"), Decimal("1.5")
    llm.save()
    return llm


def run_once(client: TestClient, user: Any, crew: Any, capture: Any) -> dict[str, Any]:
    """Kick off through the API; the tests' task backend runs it to the end on commit."""
    with capture(execute=True):
        response = client.post(f"/crews/{crew.pk}/kickoff", json={"inputs": {"topic": "tides"}}, user=user)
    assert response.status_code == 202, response.content
    run = client.get(f"/runs/{response.json()['id']}", user=user).json()
    assert run["status"] == "succeeded", run["error"]
    return run


@pytest.fixture
def two_runs(client, builder, other_builder, priced_llm, django_capture_on_commit_callbacks) -> list[dict[str, Any]]:
    """One run each by bob and olga, each crew two tasks on the priced fake model."""
    return [
        run_once(client, user, make_crew(user, name=f"{user.username}'s crew", llm=priced_llm),
                 django_capture_on_commit_callbacks)
        for user in (builder, other_builder)
    ]


def test_the_usage_page_totals_equal_the_sum_of_the_recorded_calls(
        two_runs, admin_client_: Client, builder: Any) -> None:
    runs = Run.objects.all()
    prompt = sum(r.prompt_tokens for r in runs)
    completion = sum(r.completion_tokens for r in runs)
    cost = sum((r.cost_usd for r in runs), Decimal(0))
    calls = sum(r.llm_calls for r in runs)
    events = RunEvent.objects.filter(type="llm.completed")
    assert calls == events.count() == sum(run["usage"]["llm_calls"] for run in two_runs) >= 4
    assert cost > 0 and prompt > 0

    report = usage_report(first=site_today() - timedelta(days=29), last=site_today())
    assert (report.totals.prompt_tokens, report.totals.completion_tokens, report.totals.calls) == (prompt, completion, calls)
    assert report.totals.cost_usd.quantize(Decimal("0.000001")) == cost
    assert sum(day.cost_usd for day in report.days) == report.totals.cost_usd
    assert sum(row.calls for row in report.users) == sum(row.calls for row in report.crews) == calls
    assert [(row.label, row.calls) for row in report.models] == [("openai/test", calls)]
    assert {row.label for row in report.crews} == {"bob's crew", "olga's crew"}

    page = admin_client_.get(reverse("site:usage")).content.decode()
    assert f'<strong data-total="tokens">{prompt + completion}</strong>' in page
    assert f'<strong data-total="calls">{calls}</strong>' in page
    assert "bob&#x27;s crew" in page and "olga&#x27;s crew" in page and 'class="chart__bar"' in page


def test_a_builder_sees_only_their_own_usage_and_an_admin_may_pick_one_person(
        two_runs, builder: Any, admin_client_: Client) -> None:
    mine = Run.objects.get(created_by=builder)

    page = signed_in(builder).get(reverse("site:usage")).content.decode()
    picked = admin_client_.get(reverse("site:usage"), {"user": builder.pk}).content.decode()

    for html in (page, picked):
        assert f'<strong data-total="calls">{mine.llm_calls}</strong>' in html
        assert "bob&#x27;s crew" in html and "olga&#x27;s crew" not in html
    assert 'id="usage-user"' not in page and "Per person" not in page


def test_the_period_filter_counts_only_its_days(two_runs, admin_client_: Client) -> None:
    yesterday = site_today() - timedelta(days=1)

    page = admin_client_.get(reverse("site:usage"), {"first": "2020-01-01", "last": yesterday.isoformat()})

    assert page.status_code == 200 and '<strong data-total="calls">0</strong>' in page.content.decode()
    assert admin_client_.get(reverse("site:usage"), {"days": "7"}).status_code == 200
    assert admin_client_.get(reverse("site:usage"), {"days": "nonsense", "first": "bad"}).status_code == 200


def test_a_spent_daily_budget_refuses_a_kickoff_naming_budget_and_spend(
        two_runs, client: TestClient, builder: Any) -> None:
    DailyBudget.objects.create(user=builder, cost_usd=Decimal("0.01"))  # bob spent a few cents already
    crew = Run.objects.get(created_by=builder).crew
    spent = Run.objects.get(created_by=builder).cost_usd
    assert spent >= Decimal("0.01")

    response = client.post(f"/crews/{crew.pk}/kickoff", json={"inputs": {"topic": "tides"}}, user=builder)

    assert response.status_code == 429, response.content
    body = response.json()
    assert body["code"] == "daily_budget_spent"
    assert body["detail"].startswith("Your daily budget of $0.0100 is spent: $")
    assert 0 < int(response["Retry-After"]) <= 86401
    assert Run.objects.filter(created_by=builder).count() == 1

    page = signed_in(builder).post(reverse("crews:crew-kickoff", args=[crew.pk]),
                                   {"action": "run", "topic": "tides"})
    assert page.status_code == 429
    assert "Your daily budget of $0.0100 is spent" in page.content.decode()
    assert Run.objects.filter(created_by=builder).count() == 1


def test_the_site_default_applies_to_people_without_their_own_budget(two_runs, builder: Any, other_builder: Any) -> None:
    DailyBudget.objects.create(user=None, cost_usd=Decimal("0.01"))
    DailyBudget.objects.create(user=other_builder, cost_usd=Decimal("100"))

    with pytest.raises(DailyBudgetSpent):
        budget_check(actor=builder)
    budget_check(actor=other_builder)  # their own budget wins over the default


def test_asking_an_agent_is_refused_too_once_the_budget_is_spent(two_runs, client: TestClient, builder: Any) -> None:
    DailyBudget.objects.create(user=builder, cost_usd=Decimal("0"))
    agent = Run.objects.get(created_by=builder).crew.agents.get()

    response = client.post(f"/agents/{agent.pk}/kickoff", json={"message": "Hi"}, user=builder)

    assert response.status_code == 429 and response.json()["code"] == "daily_budget_spent"


def test_the_kickoff_operation_lists_the_budget_refusal_in_openapi() -> None:
    operation = api.get_openapi_schema()["paths"]["/api/crews/{id}/kickoff"]["post"]
    assert 429 in operation["responses"] and "daily_budget_spent" in operation["description"]


def test_chart_bars_are_scaled_to_a_round_top_line() -> None:
    from planner_site.usage import Row

    days = [Row(key=date(2026, 1, d), cost_usd=Decimal(v)) for d, v in ((1, "0"), (2, "0.3"), (3, "0.15"))]
    drawn = chart(days, "cost_usd")

    assert drawn.top == Decimal("0.5")
    assert [bar.height for bar in drawn.bars] == [0, 96.0, 48.0]
    assert [bar.y + bar.height for bar in drawn.bars] == [160, 160, 160]
    assert (_nice_top(0), _nice_top(7), _nice_top(120), _nice_top(1000)) == (1.0, 10.0, 200.0, 1000.0)


# Plans drafted outside a run ---------------------------------------------------------------------

DRAFT = {"plans": [{"task_number": 1, "steps": ["Gather tide tables"]}, {"task_number": 2, "steps": ["Write it up"]}]}


@pytest.fixture
def drafted(client, builder, priced_llm, fake_llm_server, django_capture_on_commit_callbacks) -> Plan:
    """bob drafts a plan with "Draft plan"'s API outside any run, on the priced fake model."""
    fake_llm_server.default = answers(DRAFT)
    crew = make_crew(builder, name="Harbour crew", llm=priced_llm, planning=True, planning_llm=priced_llm)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/crews/{crew.pk}/plans", json={"inputs": {"topic": "tides"}}, user=builder)
    assert response.status_code == 202, response.content
    plan = Plan.objects.get(pk=response.json()["id"])
    assert plan.status == Plan.Status.DRAFT and not Run.objects.filter(crew=crew).exists(), plan.error
    return plan


def test_a_plan_drafted_outside_a_run_counts_in_usage_as_its_recorded_calls(
        drafted: Plan, admin_client_: Client, builder: Any, fake_llm_server: FakeLLMServer) -> None:
    calls = list(PlanLLMCall.objects.filter(plan=drafted))
    assert len(calls) == fake_llm_server.request_count >= 1
    assert {(c.user_id, c.model, c.purpose) for c in calls} == {(builder.pk, "openai/test", "crew_plan")}
    prompt, completion = sum(c.prompt_tokens for c in calls), sum(c.completion_tokens for c in calls)
    cost = sum((c.cost_usd for c in calls), Decimal(0))
    assert (prompt, completion, cost) == (drafted.prompt_tokens, drafted.completion_tokens, drafted.cost_usd)
    assert cost > 0

    report = usage_report(first=site_today(), last=site_today())
    assert (report.totals.prompt_tokens, report.totals.completion_tokens, report.totals.calls) == (
        prompt, completion, len(calls))
    assert report.totals.cost_usd == cost
    assert [(row.label, row.calls) for row in report.crews] == [("Harbour crew", len(calls))]
    assert [(row.label, row.cost_usd) for row in report.users] == [("bob", cost)]

    page = admin_client_.get(reverse("site:usage")).content.decode()
    assert f'<strong data-total="tokens">{prompt + completion}</strong>' in page
    assert f'<strong data-total="calls">{len(calls)}</strong>' in page
    assert "Harbour crew" in page


def test_regenerating_a_task_outside_a_run_counts_too(
        drafted: Plan, client: TestClient, builder: Any, django_capture_on_commit_callbacks: Any) -> None:
    before = drafted.llm_calls.count()
    task_id = drafted.crew.tasks.order_by("order").first().pk

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/plans/{drafted.pk}/tasks/{task_id}/regenerate", json={}, user=builder)

    assert response.status_code == 202, response.content
    drafted.refresh_from_db()
    calls = list(drafted.llm_calls.all())
    assert len(calls) > before and {c.user_id for c in calls} == {builder.pk}
    assert sum(c.prompt_tokens + c.completion_tokens for c in calls) == drafted.prompt_tokens + drafted.completion_tokens
    assert usage_report(first=site_today(), last=site_today()).totals.calls == len(calls)


def test_a_budget_spent_by_drafting_refuses_the_next_kickoff_and_draft(
        drafted: Plan, client: TestClient, builder: Any) -> None:
    budget = drafted.cost_usd.quantize(Decimal("0.01"), rounding="ROUND_DOWN")  # just under what it cost
    assert budget < drafted.cost_usd
    DailyBudget.objects.create(user=builder, cost_usd=budget)

    kickoff = client.post(f"/crews/{drafted.crew_id}/kickoff", json={"inputs": {"topic": "tides"}}, user=builder)
    draft = client.post(f"/crews/{drafted.crew_id}/plans", json={"inputs": {"topic": "tides"}}, user=builder)

    for response in (kickoff, draft):
        assert response.status_code == 429, response.content
        assert response.json()["code"] == "daily_budget_spent"
        assert f"Your daily budget of {usd(budget)} is spent: {usd(drafted.cost_usd)} used today" in (
            response.json()["detail"])
    assert not Run.objects.exists() and Plan.objects.count() == 1


def test_a_spent_budget_refuses_regenerating_a_task_too(
        drafted: Plan, client: TestClient, builder: Any, fake_llm_server: FakeLLMServer,
        django_capture_on_commit_callbacks: Any) -> None:
    DailyBudget.objects.create(user=builder, cost_usd=drafted.cost_usd.quantize(Decimal("0.01"), rounding="ROUND_DOWN"))
    task_id = drafted.crew.tasks.order_by("order").first().pk
    asked = fake_llm_server.request_count

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/plans/{drafted.pk}/tasks/{task_id}/regenerate", json={}, user=builder)

    assert response.status_code == 429, response.content
    assert response.json()["code"] == "daily_budget_spent"
    drafted.refresh_from_db()
    assert drafted.regenerating_task_ids == [] and fake_llm_server.request_count == asked


def test_a_runs_own_draft_counts_once_as_its_llm_completed_events(
        client: TestClient, builder: Any, priced_llm: Any, fake_llm_server: FakeLLMServer,
        django_capture_on_commit_callbacks: Any) -> None:
    tasks = TaskReplies(["Research", "Report"])
    # The crew planner's call asks for a structured answer; the tasks' calls are plain ReAct text.
    fake_llm_server.default = lambda request: (
        answers(DRAFT)(request) if request.body.get("tool_choice") or request.body.get("response_format")
        else tasks(request))
    crew = make_crew(builder, name="Harbour crew", llm=priced_llm, planning=True, planning_llm=priced_llm)

    run = run_once(client, builder, crew, django_capture_on_commit_callbacks)

    events = RunEvent.objects.filter(run_id=run["id"], type="llm.completed")
    assert events.filter(data__purpose="crew_plan").count() == 1
    assert Plan.objects.filter(crew=crew).count() == 1 and PlanLLMCall.objects.count() == 0
    report = usage_report(first=site_today(), last=site_today())
    assert report.totals.calls == events.count() == run["usage"]["llm_calls"] == fake_llm_server.request_count
    assert report.totals.prompt_tokens == run["usage"]["prompt_tokens"]


# The usage API ---------------------------------------------------------------------------------


def test_the_usage_api_gives_the_pages_figures_for_runs_and_drafts(
        two_runs, drafted: Plan, admin_client_: Client, builder: Any) -> None:
    today = site_today()
    response = admin_client_.get("/api/usage", {"from": (today - timedelta(days=6)).isoformat(), "to": today.isoformat()})

    assert response.status_code == 200, response.content
    body = response.json()
    report = usage_report(first=today - timedelta(days=6), last=today)
    assert (body["from"], body["to"]) == ((today - timedelta(days=6)).isoformat(), today.isoformat())
    assert body["totals"] == {"prompt_tokens": report.totals.prompt_tokens, "completion_tokens": report.totals.completion_tokens,
                              "tokens": report.totals.tokens, "cost_usd": round(float(report.totals.cost_usd), 6),
                              "calls": report.totals.calls}
    runs_and_draft = Run.objects.all()
    assert body["totals"]["calls"] == sum(r.llm_calls for r in runs_and_draft) + drafted.llm_calls.count()
    assert len(body["days"]) == 7 and sum(day["calls"] for day in body["days"]) == body["totals"]["calls"]
    assert {row["username"] for row in body["users"]} == {"bob", "olga"}
    crews = {row["name"]: row for row in body["crews"]}
    assert set(crews) == {"bob's crew", "olga's crew", "Harbour crew"}
    assert crews["Harbour crew"]["crew_id"] == drafted.crew_id and crews["Harbour crew"]["agent_id"] is None
    assert [(row["model"], row["calls"]) for row in body["llms"]] == [("openai/test", body["totals"]["calls"])]

    mine = admin_client_.get("/api/usage", {"user_id": builder.pk}).json()
    assert [row["username"] for row in mine["users"]] == ["bob"]


def test_the_usage_api_is_for_admins_only(builder: Any, viewer: Any) -> None:
    for user in (builder, viewer):
        response = signed_in(user).get("/api/usage")
        assert response.status_code == 403 and response.json()["code"] == "forbidden"
    assert Client().get("/api/usage").status_code == 401


@pytest.mark.parametrize("query", [
    {"from": "2026-03-02", "to": "2026-03-01"},
    {"to": "2999-01-01"},
    {"from": "2020-01-01", "to": "2022-01-01"},
    {"from": "0001-01-01"},
    {"from": "yesterday"},
    {"user_id": "0"},
])
def test_the_usage_api_refuses_a_bad_period_with_422(admin_client_: Client, query: dict[str, str]) -> None:
    response = admin_client_.get("/api/usage", query)
    assert response.status_code == 422, response.content
    assert response.json()["errors"]


def test_the_usage_operation_is_in_the_openapi_document() -> None:
    operation = api.get_openapi_schema()["paths"]["/api/usage"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"from", "to", "user_id"}
    assert {200, 401, 403, 422} <= set(operation["responses"])
