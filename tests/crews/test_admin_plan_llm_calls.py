"""The admin's list of plan LLM calls: shown to admins, never added, changed or deleted there."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.urls import reverse

from crews.models import Plan, PlanLLMCall


@pytest.fixture
def call(demo_crew: Any, builder: Any) -> PlanLLMCall:
    plan = Plan.objects.create(crew=demo_crew, status=Plan.Status.DRAFT, version=1)
    return PlanLLMCall.objects.create(
        plan=plan, user=builder, at=datetime(2026, 3, 4, 10, 30, tzinfo=UTC), model="openai/tide-model",
        purpose="crew_plan", prompt_tokens=1234, completion_tokens=567, cost_usd=Decimal("0.012345"),
    )


def test_an_admin_reads_the_plan_llm_calls_with_crew_person_model_purpose_tokens_and_cost(
    admin_client_: Any, call: PlanLLMCall
) -> None:
    response = admin_client_.get(reverse("admin:crews_planllmcall_changelist"))

    assert response.status_code == 200
    page = response.content.decode()
    for shown in (call.plan.crew.name, "bob", "openai/tide-model", "crew_plan", "1234", "567", "0.012345"):
        assert shown in page, shown
    filtered = admin_client_.get(reverse("admin:crews_planllmcall_changelist"), {"purpose": "refine"})
    assert filtered.status_code == 200 and filtered.context["cl"].result_count == 0
    assert admin_client_.get(reverse("admin:crews_planllmcall_change", args=[call.pk])).status_code == 200


def test_plan_llm_calls_are_never_added_changed_or_deleted_in_the_admin(admin_client_: Any, call: PlanLLMCall) -> None:
    change = reverse("admin:crews_planllmcall_change", args=[call.pk])

    assert admin_client_.get(reverse("admin:crews_planllmcall_add")).status_code == 403
    assert admin_client_.post(change, {"model": "changed", "purpose": "x", "at_0": "2026-03-04", "at_1": "10:30"}).status_code == 403
    assert admin_client_.get(reverse("admin:crews_planllmcall_delete", args=[call.pk])).status_code == 403
    listed = admin_client_.post(
        reverse("admin:crews_planllmcall_changelist"), {"action": "delete_selected", "_selected_action": [call.pk]}
    )
    assert listed.status_code in (200, 302)
    assert PlanLLMCall.objects.get(pk=call.pk).model == "openai/tide-model"


def test_a_builder_is_not_let_into_the_admin(builder_client: Any, call: PlanLLMCall) -> None:
    response = builder_client.get(reverse("admin:crews_planllmcall_changelist"))

    assert response.status_code == 302 and "/login/" in response["Location"]


def test_an_admin_still_deletes_a_crew_or_plan_whose_drafts_made_calls(
    admin_client_: Any, call: PlanLLMCall, demo_crew: Any
) -> None:
    """The admin checks delete permission on every row a delete cascades to: the calls' admin
    refusing it would make their crew and plan undeletable."""
    from crews.models import Crew, Plan

    plan = call.plan
    assert admin_client_.post(reverse("admin:crews_plan_delete", args=[plan.pk]), {"post": "yes"}).status_code == 302
    assert not Plan.objects.filter(pk=plan.pk).exists() and not PlanLLMCall.objects.filter(pk=call.pk).exists()
    assert admin_client_.post(reverse("admin:crews_crew_delete", args=[demo_crew.pk]), {"post": "yes"}).status_code == 302
    assert not Crew.objects.filter(pk=demo_crew.pk).exists()
