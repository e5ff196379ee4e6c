"""Agent pages, the site frame (banner, navigation, sign-in) and keys never reaching a page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agents import services
from agents.models import Agent, PlanningConfig
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db

SECRET_KEY = "sk-test-NEVER-SHOW-ME-0123456789abcdef"


def agent_data(**overrides: Any) -> dict[str, Any]:
    """A complete, valid agent form as a browser would post it."""
    data = {
        "name": "Researcher",
        "role": "{topic} researcher",
        "goal": "Find what matters about {topic}",
        "backstory": "Careful and curious.",
        "llm": "",
        "agent_type": "react",
        "max_iter": "25",
        "max_rpm": "",
        "max_execution_time": "",
        "max_retry_limit": "2",
        "respect_context_window": "on",
        "budget_max_tool_calls": "",
        "budget_max_input_tokens": "",
        "planning_mode": "off",
        "planning-reasoning_effort": "medium",
        "planning-observe_steps": "unknown",
        "planning-max_attempts": "",
        "planning-max_steps": "20",
        "planning-max_replans": "3",
        "planning-max_step_iterations": "15",
        "planning-step_timeout": "",
        "planning-llm": "",
        "planning-system_prompt": "",
        "planning-plan_prompt": "",
        "planning-refine_prompt": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def make_agent(owner: Any, name: str = "Writer", **fields: Any) -> Agent:
    fields.setdefault("role", "Writer")
    fields.setdefault("goal", "Write well")
    return services.agent_create(actor=owner, name=name, **fields)


def field_error(html: str, field_id: str) -> str:
    """The error list Django renders for ``field_id`` (empty when there is none)."""
    marker = f'id="{field_id}_error"'
    start = html.find(marker)
    if start == -1:
        return ""
    return html[start : html.find("</ul>", start)]


def checked(html: str, name: str, value: str | None = None) -> bool:
    """Whether the radio or checkbox ``name`` (with ``value``) is rendered checked."""
    value_part = f'[^>]*value="{re.escape(value)}"' if value else ""
    return (
        re.search(rf'<input[^>]*name="{re.escape(name)}"{value_part}[^>]*\bchecked', html)
        is not None
    )


# Pages render, for the right people ----------------------------------------------------------


def test_every_agent_page_renders_for_its_owner(builder: Any) -> None:
    agent = make_agent(builder)
    client = signed_in(builder)
    for name, args in [
        ("agent-list", []),
        ("agent-create", []),
        ("agent-detail", [agent.pk]),
        ("agent-update", [agent.pk]),
        ("agent-delete", [agent.pk]),
    ]:
        response = client.get(reverse(f"agents:{name}", args=args))
        assert response.status_code == 200, name
        assert b"<html" in response.content


def test_another_builders_agent_is_not_found(builder: Any, other_builder: Any) -> None:
    agent = make_agent(other_builder, "Private")
    client = signed_in(builder)
    for name in ("agent-detail", "agent-update", "agent-delete"):
        url = reverse(f"agents:{name}", args=[agent.pk])
        assert client.get(url).status_code == 404, name
    assert (
        client.post(reverse("agents:agent-update", args=[agent.pk]), agent_data()).status_code
        == 404
    )
    assert client.post(reverse("agents:agent-delete", args=[agent.pk])).status_code == 404
    assert Agent.objects.filter(pk=agent.pk, name="Private").exists()
    assert b"Private" not in client.get(reverse("agents:agent-list")).content


def test_viewer_sees_agents_of_shared_crews_read_only(viewer: Any, demo_crew: Any) -> None:
    agent = demo_crew.agents.first()
    client = signed_in(viewer)
    page = client.get(reverse("agents:agent-detail", args=[agent.pk]))
    assert page.status_code == 200
    assert reverse("agents:agent-update", args=[agent.pk]).encode() not in page.content
    assert b"Read-only" in page.content
    listing = client.get(reverse("agents:agent-list"))
    assert reverse("agents:agent-create").encode() not in listing.content

    assert client.get(reverse("agents:agent-create")).status_code == 403
    assert client.post(reverse("agents:agent-create"), agent_data()).status_code == 403
    assert client.get(reverse("agents:agent-update", args=[agent.pk])).status_code == 403
    assert (
        client.post(reverse("agents:agent-update", args=[agent.pk]), agent_data()).status_code
        == 403
    )
    assert client.post(reverse("agents:agent-delete", args=[agent.pk])).status_code == 403
    assert Agent.objects.filter(pk=agent.pk).exists()


# Round trips -----------------------------------------------------------------------------------


def test_create_an_agent_with_tools_and_custom_planning(builder: Any) -> None:
    client = signed_in(builder)
    data = agent_data(
        tool_calculator="on",
        tool_calculator_max_usage="3",
        tool_calculator_needs_approval="on",
        tool_current_datetime="on",
        tool_text_stats_result_as_answer="on",  # ignored: the tool is not chosen
        planning_mode="custom",
        **{
            "planning-reasoning_effort": "high",
            "planning-observe_steps": "false",
            "planning-max_steps": "7",
            "planning-plan_prompt": "Plan for {role}: {description}",
        },
    )
    response = client.post(reverse("agents:agent-create"), data)
    agent = Agent.objects.get(owner=builder, name="Researcher")
    assert response.status_code == 302
    assert response["Location"] == reverse("agents:agent-detail", args=[agent.pk])
    assert agent.tools == ["calculator", "current_datetime"]
    assert agent.tool_options == {"calculator": {"needs_approval": True, "max_usage": 3}}
    assert agent.planning is False
    config = agent.planning_config
    assert (config.reasoning_effort, config.observe_steps, config.max_steps) == ("high", False, 7)
    assert config.plan_prompt == "Plan for {role}: {description}"

    page = client.get(response["Location"])
    assert b"Researcher" in page.content and b"Asks before each use" in page.content
    assert "Agent “Researcher” created.".encode() in page.content


def test_edit_an_agent_and_switch_planning_from_custom_to_quick(builder: Any) -> None:
    agent = make_agent(builder, planning_config={"max_steps": 5}, tools=["calculator"])
    client = signed_in(builder)
    form = client.get(reverse("agents:agent-update", args=[agent.pk])).content.decode()
    assert checked(form, "work_mode", "plan_act")
    assert 'name="planning-max_steps" value="5"' in form
    assert checked(form, "tool_calculator")

    response = client.post(
        reverse("agents:agent-update", args=[agent.pk]),
        agent_data(name="Writer", role="Editor", planning_mode="quick"),
    )
    assert response.status_code == 302
    agent.refresh_from_db()
    assert (agent.role, agent.planning, agent.tools) == ("Editor", True, [])
    assert not PlanningConfig.objects.filter(agent=agent).exists()


def test_delete_an_agent(builder: Any) -> None:
    agent = make_agent(builder)
    client = signed_in(builder)
    confirm = client.get(reverse("agents:agent-delete", args=[agent.pk]))
    assert b"Delete agent" in confirm.content
    response = client.post(reverse("agents:agent-delete", args=[agent.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("agents:agent-list")
    assert not Agent.objects.filter(pk=agent.pk).exists()


# Validation shows next to the field ----------------------------------------------------------


def test_empty_role_is_shown_next_to_the_role_field(builder: Any) -> None:
    response = signed_in(builder).post(reverse("agents:agent-create"), agent_data(role=""))
    html = response.content.decode()
    assert response.status_code == 200
    assert "This field is required." in field_error(html, "id_role")
    assert 'aria-describedby="id_role_helptext id_role_error"' in html
    assert 'aria-invalid="true"' in html
    assert 'role="alert"' in html and 'href="#id_role"' in html
    assert not Agent.objects.exists()


def test_unknown_placeholder_in_plan_prompt_is_named(builder: Any) -> None:
    data = agent_data(planning_mode="custom", **{"planning-plan_prompt": "Plan {nonsense} now"})
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    error = field_error(response.content.decode(), "id_planning-plan_prompt")
    assert response.status_code == 200
    assert "{nonsense}" in error and "{description}" in error
    assert not Agent.objects.exists()


def test_max_steps_zero_is_refused_next_to_the_field(builder: Any) -> None:
    data = agent_data(planning_mode="custom", **{"planning-max_steps": "0"})
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    assert "greater than or equal to 1" in field_error(
        response.content.decode(), "id_planning-max_steps"
    )
    assert not Agent.objects.exists()


def test_invalid_reasoning_effort_is_refused_next_to_the_field(builder: Any) -> None:
    data = agent_data(planning_mode="custom", **{"planning-reasoning_effort": "extreme"})
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    error = field_error(response.content.decode(), "id_planning-reasoning_effort")
    assert "Select a valid choice" in error
    assert not Agent.objects.exists()


def test_custom_planning_fields_are_ignored_unless_custom_is_chosen(builder: Any) -> None:
    data = agent_data(planning_mode="quick", **{"planning-max_steps": "0"})
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    assert response.status_code == 302
    agent = Agent.objects.get(owner=builder)
    assert agent.planning is True
    assert not PlanningConfig.objects.filter(agent=agent).exists()


def test_tool_max_usage_must_be_positive(builder: Any) -> None:
    data = agent_data(tool_calculator="on", tool_calculator_max_usage="0")
    response = signed_in(builder).post(reverse("agents:agent-create"), data)
    assert "greater than or equal to 1" in field_error(
        response.content.decode(), "id_tool_calculator_max_usage"
    )


def test_a_second_agent_with_the_same_name_is_refused_on_the_name(builder: Any) -> None:
    make_agent(builder, "Researcher")
    response = signed_in(builder).post(reverse("agents:agent-create"), agent_data())
    assert response.status_code == 200
    assert field_error(response.content.decode(), "id_name")
    assert Agent.objects.filter(owner=builder).count() == 1


# htmx ------------------------------------------------------------------------------------------


def test_htmx_form_errors_come_back_as_the_form_partial_only(builder: Any) -> None:
    response = signed_in(builder).post(
        reverse("agents:agent-create"), agent_data(role=""), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith("<form")
    assert 'id="agent-form"' in html and field_error(html, "id_role")


def test_htmx_get_of_the_form_is_the_partial(builder: Any) -> None:
    response = signed_in(builder).get(reverse("agents:agent-create"), HTTP_HX_REQUEST="true")
    assert b"<html" not in response.content and b'id="agent-form"' in response.content


def test_htmx_success_asks_the_browser_to_load_the_agent_page(builder: Any) -> None:
    response = signed_in(builder).post(
        reverse("agents:agent-create"), agent_data(), HTTP_HX_REQUEST="true"
    )
    agent = Agent.objects.get(owner=builder)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("agents:agent-detail", args=[agent.pk])


def test_htmx_delete_confirmation_is_a_fragment(builder: Any) -> None:
    agent = make_agent(builder)
    response = signed_in(builder).get(
        reverse("agents:agent-delete", args=[agent.pk]), HTTP_HX_REQUEST="true"
    )
    assert b"<html" not in response.content
    assert b"Delete agent" in response.content


# The site frame --------------------------------------------------------------------------------


def test_demo_banner_shows_until_an_admin_sets_a_real_default(
    admin_user: Any, builder: Any
) -> None:
    builder_client, admin_client = signed_in(builder), signed_in(admin_user)
    page = builder_client.get(reverse("crews:crew-list")).content.decode()
    assert "offline demo model is in use" in page
    assert reverse("agents:llm-list") not in page
    assert (
        reverse("agents:llm-list")
        in admin_client.get(reverse("agents:agent-list")).content.decode()
    )

    services.llm_create(
        actor=admin_user,
        name="GPT",
        model="openai/gpt-4o-mini",
        api_key=SECRET_KEY,
        is_default=True,
    )
    assert (
        "offline demo model" not in builder_client.get(reverse("crews:crew-list")).content.decode()
    )


def test_navigation_and_user_menu(admin_user: Any, builder: Any) -> None:
    page = signed_in(builder).get(reverse("agents:agent-list")).content.decode()
    assert reverse("crews:crew-list") in page and reverse("agents:agent-list") in page
    assert reverse("admin:index") not in page and reverse("site:people-list") not in page
    assert f'action="{reverse("logout")}"' in page and "Sign out" in page
    assert f'action="{reverse("set_language")}"' in page and 'value="pt-br"' in page
    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    # Admins reach the site's own admin area (people, usage, audit log), not Django's admin.
    assert (
        reverse("site:people-list")
        in signed_in(admin_user).get(reverse("agents:agent-list")).content.decode()
    )


def test_sign_in_page_and_sign_out(client: Any, builder: Any) -> None:
    page = client.get(reverse("login"))
    assert page.status_code == 200 and b'name="username"' in page.content
    bad = client.post(reverse("login"), {"username": "bob", "password": "wrong"})
    assert b'role="alert"' in bad.content
    good = client.post(reverse("login"), {"username": "bob", "password": "pw-bob"})
    assert good.status_code == 302
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("agents:agent-list")).status_code == 302


def test_language_switch_serves_portuguese_forms(builder: Any) -> None:
    client = signed_in(builder)
    response = client.post(reverse("set_language"), {"language": "pt-br", "next": "/agents/"})
    assert response.status_code == 302
    page = client.get(reverse("agents:agent-list"))
    assert b'lang="pt-br"' in page.content


def test_no_page_shows_an_llm_api_key(admin_user: Any, builder: Any) -> None:
    llm = services.llm_create(
        actor=admin_user, name="GPT", model="openai/gpt-4o-mini", api_key=SECRET_KEY
    )
    agent = make_agent(builder, llm=llm, planning_config={"llm": llm})
    from crews import services as crew_services

    crew = crew_services.crew_create(
        actor=builder,
        name="Keyed",
        agents=[agent],
        planning=True,
        planning_llm=llm,
        process="hierarchical",
        manager_llm=llm,
    )
    task = crew_services.task_create(
        actor=builder, crew=crew, name="T", description="D", expected_output="E", agent=agent
    )
    urls = [
        reverse("agents:agent-list"),
        reverse("agents:agent-detail", args=[agent.pk]),
        reverse("agents:agent-update", args=[agent.pk]),
        reverse("agents:agent-create"),
        reverse("agents:agent-delete", args=[agent.pk]),
        reverse("crews:crew-list"),
        reverse("crews:crew-detail", args=[crew.pk]),
        reverse("crews:crew-update", args=[crew.pk]),
        reverse("crews:crew-create"),
        reverse("crews:task-create", args=[crew.pk]),
        reverse("crews:task-update", args=[task.pk]),
    ]
    for client in (signed_in(builder), signed_in(admin_user)):
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, url
            assert SECRET_KEY.encode() not in response.content, url
            assert SECRET_KEY[:20].encode() not in response.content, url
