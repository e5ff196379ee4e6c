"""Refusals an LLM makes during a run or a draft are stored on it (issue #14): the next run
starts from them and never sends the refused form again."""

from __future__ import annotations

from typing import Any

import pytest

from agents.bridge import llm_spec
from agents.models import LLM
from tests.fakes.openai_server import Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401
from tests.fakes.plain_models import forms_sent, refuses_json_schema


def plan_or_answer(request: Any) -> Reply:
    if (request.body or {}).get("response_format"):
        return Reply.json({"plans": [{"task_number": 1, "steps": ["Look it up"]}]})
    return Reply.text("Final Answer: done")


@pytest.mark.django_db(transaction=True)
def test_a_refusal_met_while_drafting_a_plan_is_stored_on_the_llm(builder: Any, fake_llm_server: Any) -> None:
    from crews import plans, runner
    from tests.crews.run_helpers import fake_llm, make_crew

    fake_llm_server.default = refuses_json_schema(plan_or_answer)
    llm = fake_llm(fake_llm_server)
    LLM.objects.filter(pk=llm.pk).update(supports_tools=False)
    crew = make_crew(builder, tasks=["Research"], llm=llm, planning_llm=llm)

    plan = plans.plan_draft(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.generate_plan(plan.pk)

    plan.refresh_from_db()
    assert plan.status == "draft", plan.error
    llm.refresh_from_db()
    assert llm.accepts("json_schema") is False
    assert llm_spec(llm).refuses == frozenset({"json_schema"})


@pytest.mark.django_db(transaction=True)
def test_a_refusal_met_during_a_run_is_stored_and_the_next_run_never_sends_that_form(
    builder: Any, fake_llm_server: Any
) -> None:
    from crews import runner, runs
    from tests.crews.run_helpers import fake_llm, make_crew

    fake_llm_server.default = refuses_json_schema(plan_or_answer)
    llm = fake_llm(fake_llm_server)
    LLM.objects.filter(pk=llm.pk).update(supports_tools=False)
    crew = make_crew(builder, tasks=["Research"], llm=llm, planning=True, planning_llm=llm)

    first = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(first.pk)

    llm.refresh_from_db()
    assert llm.accepts("json_schema") is False
    assert llm.capabilities["learned_at"]
    sent = len(fake_llm_server.requests)
    second = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(second.pk)
    assert "json_schema" in forms_sent(fake_llm_server)[:sent]
    assert "json_schema" not in forms_sent(fake_llm_server)[sent:]
