"""The agent form's one "How should this agent work?" choice: what each answer stores, what an
edit preselects, and posts from older pages or scripts that do not send it."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from agents.models import Agent, PlanningConfig
from tests.agents.test_views import agent_data, checked, field_error, make_agent
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def page_data(**overrides: Any) -> dict[str, Any]:
    """The form as the page posts it now: ``work_mode``, neither agent type nor planning mode."""
    return agent_data(agent_type=None, planning_mode=None, **overrides)


def stored(agent: Agent) -> tuple[str, bool, PlanningConfig | None]:
    agent.refresh_from_db()
    return agent.agent_type, agent.planning, PlanningConfig.objects.filter(agent=agent).first()


def test_the_form_asks_one_question_with_a_sentence_per_answer(builder: Any) -> None:
    html = signed_in(builder).get(reverse("agents:agent-create")).content.decode()
    assert "How should this agent work?" in html
    assert checked(html, "work_mode", "react")
    assert "Plan first, then act (Plan-and-Act)" in html and "Plan and execute (a plan-execute agent)" in html
    assert "It lists every step in one call" in html
    assert 'name="agent_type"' not in html and 'name="planning_mode"' not in html
    assert '<details class="advanced planning-advanced">' in html  # closed, and hidden unless chosen


def test_act_step_by_step_saves_a_react_agent_that_does_not_plan(builder: Any) -> None:
    response = signed_in(builder).post(reverse("agents:agent-create"), page_data(work_mode="react"))
    assert response.status_code == 302
    assert stored(Agent.objects.get(owner=builder)) == ("react", False, None)


def test_plan_first_saves_the_advanced_planning_settings_as_the_agents_config(builder: Any) -> None:
    data = page_data(
        work_mode="plan_act", **{"planning-reasoning_effort": "high", "planning-max_attempts": "2"}
    )
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    assert response.status_code == 302
    agent_type, planning, config = stored(Agent.objects.get(owner=builder))
    assert (agent_type, planning) == ("react", False)
    assert config is not None and (config.reasoning_effort, config.max_attempts) == ("high", 2)


def test_plan_and_execute_saves_a_plan_execute_agent_and_drops_its_planning(builder: Any) -> None:
    agent = make_agent(builder, planning_config={"max_steps": 5})
    response = signed_in(builder).post(
        reverse("agents:agent-update", args=[agent.pk]),
        page_data(name="Writer", work_mode="plan_execute", **{"planning-max_steps": "0"}),
    )
    assert response.status_code == 302  # the hidden settings' bad value does not count
    assert stored(agent) == ("plan_execute", False, None)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "react"),
        ({"planning": True}, "plan_act"),
        ({"planning_config": {"max_steps": 4}}, "plan_act"),
        ({"agent_type": "plan_execute"}, "plan_execute"),
        # The engine runs a plan-execute agent as one, whatever its planning says (ENGINE.md §4).
        ({"agent_type": "plan_execute", "planning": True}, "plan_execute"),
    ],
)
def test_editing_an_agent_preselects_the_answer_that_describes_it(
    builder: Any, fields: dict[str, Any], expected: str
) -> None:
    agent = make_agent(builder, **fields)
    client = signed_in(builder)
    html = client.get(reverse("agents:agent-update", args=[agent.pk])).content.decode()
    assert checked(html, "work_mode", expected)
    assert [v for v in ("react", "plan_act", "plan_execute") if checked(html, "work_mode", v)] == [expected]
    detail = client.get(reverse("agents:agent-detail", args=[agent.pk])).content.decode()
    assert f'data-work-mode="{expected}"' in detail


def test_quick_planning_is_shown_as_its_settings_and_saving_keeps_what_it_does(builder: Any) -> None:
    agent = make_agent(builder, planning=True)
    client = signed_in(builder)
    html = client.get(reverse("agents:agent-update", args=[agent.pk])).content.decode()
    assert checked(html, "planning-reasoning_effort", "low")
    assert 'name="planning-max_attempts" value="1"' in html

    data = page_data(name="Writer", work_mode="plan_act", **{
        "planning-reasoning_effort": "low", "planning-max_attempts": "1",
    })
    assert client.post(reverse("agents:agent-update", args=[agent.pk]), data).status_code == 302
    agent_type, planning, config = stored(agent)
    assert (agent_type, planning) == ("react", False)
    assert config is not None and (config.reasoning_effort, config.max_attempts) == ("low", 1)


def test_the_detail_page_says_how_the_agent_works_in_words(builder: Any) -> None:
    agent = make_agent(builder, agent_type="plan_execute")
    html = signed_in(builder).get(reverse("agents:agent-detail", args=[agent.pk])).content.decode()
    assert "Plan and execute (a plan-execute agent)" in html
    assert "a failed step fails the task" in html


def test_an_unknown_answer_is_a_form_error_and_nothing_is_saved(builder: Any) -> None:
    agent = make_agent(builder, planning=True)
    response = signed_in(builder).post(
        reverse("agents:agent-update", args=[agent.pk]), page_data(name="Writer", work_mode="swarm")
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Select a valid choice" in html and 'href="#id_work_mode_0"' in html
    assert stored(agent) == ("react", True, None)


def test_an_error_in_the_advanced_settings_opens_them(builder: Any) -> None:
    data = page_data(work_mode="plan_act", **{"planning-max_steps": "0"})
    response = signed_in(builder).post(reverse("agents:agent-create"), data, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert '<details class="advanced planning-advanced" open>' in html
    assert "greater than or equal to 1" in field_error(html, "id_planning-max_steps")
    assert not Agent.objects.exists()


def test_a_post_without_the_answer_keeps_the_stored_type_and_planning(builder: Any) -> None:
    agent = make_agent(builder, agent_type="plan_execute", planning_config={"max_steps": 4})
    response = signed_in(builder).post(
        reverse("agents:agent-update", args=[agent.pk]), page_data(name="Writer", role="Editor")
    )
    assert response.status_code == 302
    agent_type, planning, config = stored(agent)
    assert (agent.role, agent_type, planning) == ("Editor", "plan_execute", False)
    assert config is not None and config.max_steps == 4


def test_a_post_without_the_answer_keeps_the_older_fields_as_posted(builder: Any) -> None:
    agent = make_agent(builder, planning_config={"max_steps": 4})
    response = signed_in(builder).post(
        reverse("agents:agent-update", args=[agent.pk]),
        agent_data(name="Writer", agent_type="plan_execute", planning_mode="quick"),
    )
    assert response.status_code == 302
    assert stored(agent) == ("plan_execute", True, None)


def test_a_new_agent_posted_with_neither_answer_nor_older_fields_acts_step_by_step(builder: Any) -> None:
    response = signed_in(builder).post(reverse("agents:agent-create"), page_data())
    assert response.status_code == 302
    assert stored(Agent.objects.get(owner=builder)) == ("react", False, None)


def test_a_service_error_about_planning_is_shown_at_the_work_question(
    builder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**kwargs: Any) -> Agent:
        raise ValidationError({"planning": ["This model cannot plan."]})

    monkeypatch.setattr("agents.services.agent_create", refuse)
    response = signed_in(builder).post(reverse("agents:agent-create"), page_data(work_mode="plan_act"))
    html = response.content.decode()

    assert response.status_code == 200
    assert "This model cannot plan." in field_error(html, "id_work_mode")
    assert 'href="#id_work_mode_0"' in html  # the summary above the form points at the question
