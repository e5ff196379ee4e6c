"""Crew and task pages: who sees what, inline form errors, reordering with and without htmx."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from agents import services as agent_services
from crews import services
from crews.models import Crew, Task
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def crew_data(**overrides: Any) -> dict[str, Any]:
    """A complete, valid crew form as a browser would post it (unchecked boxes are absent)."""
    data: dict[str, Any] = {
        "name": "Launch crew",
        "description": "Plans a launch.",
        "process": "sequential",
        "manager_llm": "",
        "planning_llm": "",
        "on_step_failure": "continue",  # a radio group: one choice is always checked
        "max_rpm": "",
        "budget_max_tokens": "",
        "budget_max_cost_usd": "",
        "extra_inputs": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def task_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "Summary",
        "description": "Summarise the report on {topic}.",
        "expected_output": "Three sentences.",
        "agent": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def private_crew(owner: Any) -> Crew:
    agent = agent_services.agent_create(actor=owner, name="Hidden agent", role="R", goal="G")
    crew = services.crew_create(actor=owner, name="Private crew", agents=[agent])
    services.task_create(
        actor=owner,
        crew=crew,
        name="Hidden task",
        description="D",
        expected_output="E",
        agent=agent,
    )
    return crew


def field_error(html: str, field_id: str) -> str:
    marker = f'id="{field_id}_error"'
    start = html.find(marker)
    return "" if start == -1 else html[start : html.find("</ul>", start)]


def task_names(crew: Crew) -> list[str]:
    return list(crew.tasks.order_by("order").values_list("name", flat=True))


# Pages render, for the right people ----------------------------------------------------------


def test_every_crew_page_renders_for_its_owner(builder: Any, demo_crew: Crew) -> None:
    client = signed_in(builder)
    task = demo_crew.tasks.first()
    for name, args in [
        ("crew-list", []),
        ("crew-create", []),
        ("crew-detail", [demo_crew.pk]),
        ("crew-update", [demo_crew.pk]),
        ("crew-delete", [demo_crew.pk]),
        ("task-create", [demo_crew.pk]),
        ("task-update", [task.pk]),
        ("task-delete", [task.pk]),
    ]:
        response = client.get(reverse(f"crews:{name}", args=args))
        assert response.status_code == 200, name
        assert b"<html" in response.content


def test_another_builders_crew_and_tasks_are_not_found(builder: Any, other_builder: Any) -> None:
    crew = private_crew(other_builder)
    task = crew.tasks.get()
    client = signed_in(builder)
    for name, args in [
        ("crew-detail", [crew.pk]),
        ("crew-update", [crew.pk]),
        ("crew-delete", [crew.pk]),
        ("task-create", [crew.pk]),
        ("task-update", [task.pk]),
        ("task-delete", [task.pk]),
    ]:
        assert client.get(reverse(f"crews:{name}", args=args)).status_code == 404, name
    assert client.post(reverse("crews:crew-update", args=[crew.pk]), crew_data()).status_code == 404
    assert client.post(reverse("crews:crew-delete", args=[crew.pk])).status_code == 404
    assert (
        client.post(reverse("crews:task-move", args=[task.pk]), {"direction": "up"}).status_code
        == 404
    )
    assert client.post(reverse("crews:task-delete", args=[task.pk])).status_code == 404
    assert Crew.objects.filter(pk=crew.pk).exists() and Task.objects.filter(pk=task.pk).exists()
    assert b"Private crew" not in client.get(reverse("crews:crew-list")).content


def test_viewer_sees_a_shared_crew_read_only(viewer: Any, demo_crew: Crew) -> None:
    client = signed_in(viewer)
    task = demo_crew.tasks.first()
    page = client.get(reverse("crews:crew-detail", args=[demo_crew.pk])).content.decode()
    assert "Read-only" in page and "Research" in page
    for hidden in (
        reverse("crews:crew-update", args=[demo_crew.pk]),
        reverse("crews:task-create", args=[demo_crew.pk]),
        reverse("crews:task-move", args=[task.pk]),
        reverse("crews:task-update", args=[task.pk]),
    ):
        assert hidden not in page
    assert (
        reverse("crews:crew-create") not in client.get(reverse("crews:crew-list")).content.decode()
    )

    assert client.get(reverse("crews:crew-create")).status_code == 403
    assert client.post(reverse("crews:crew-create"), crew_data()).status_code == 403
    assert (
        client.post(reverse("crews:crew-update", args=[demo_crew.pk]), crew_data()).status_code
        == 403
    )
    assert client.post(reverse("crews:crew-delete", args=[demo_crew.pk])).status_code == 403
    assert (
        client.post(reverse("crews:task-create", args=[demo_crew.pk]), task_data()).status_code
        == 403
    )
    assert (
        client.post(reverse("crews:task-move", args=[task.pk]), {"direction": "down"}).status_code
        == 403
    )
    assert client.post(reverse("crews:task-delete", args=[task.pk])).status_code == 403
    assert task_names(demo_crew) == ["Research", "Report"]


def test_another_builder_sees_a_shared_crew_without_edit_controls(
    other_builder: Any, demo_crew: Crew
) -> None:
    client = signed_in(other_builder)
    page = client.get(reverse("crews:crew-detail", args=[demo_crew.pk])).content.decode()
    assert "Read-only" in page
    assert reverse("crews:crew-update", args=[demo_crew.pk]) not in page
    assert (
        client.post(reverse("crews:crew-update", args=[demo_crew.pk]), crew_data()).status_code
        == 404
    )


def test_crew_page_shows_the_discovered_inputs(builder: Any, demo_crew: Crew) -> None:
    page = (
        signed_in(builder).get(reverse("crews:crew-detail", args=[demo_crew.pk])).content.decode()
    )
    assert "{topic}" in page and "{current_year}" in page
    assert "AI LLMs" in page  # the default value of {topic}
    assert 'id="kickoff"' in page


# Crew round trips ------------------------------------------------------------------------------


def test_create_a_crew_with_agents_and_default_inputs(builder: Any) -> None:
    agent = agent_services.agent_create(actor=builder, name="Writer", role="W", goal="G")
    response = signed_in(builder).post(
        reverse("crews:crew-create"),
        crew_data(agents=[agent.pk], planning="on", shared="on", extra_inputs='{"year": 2026}'),
    )
    crew = Crew.objects.get(owner=builder, name="Launch crew")
    assert response.status_code == 302
    assert response["Location"] == reverse("crews:crew-detail", args=[crew.pk])
    assert list(crew.agents.all()) == [agent]
    assert (crew.planning, crew.shared, crew.default_inputs) == (True, True, {"year": 2026})


def test_edit_a_crew_fills_one_row_per_discovered_input(builder: Any, demo_crew: Crew) -> None:
    client = signed_in(builder)
    url = reverse("crews:crew-update", args=[demo_crew.pk])
    form = client.get(url).content.decode()
    assert 'name="input__topic"' in form and 'name="input__current_year"' in form
    agents = list(demo_crew.agents.values_list("pk", flat=True))
    response = client.post(
        url,
        crew_data(
            name="AI LLMs",
            agents=agents,
            planning="on",
            input__topic="Robots",
            input__current_year="",
            extra_inputs='{"audience": "kids"}',
        ),
    )
    assert response.status_code == 302
    demo_crew.refresh_from_db()
    assert demo_crew.default_inputs == {"topic": "Robots", "audience": "kids"}
    assert demo_crew.shared is False  # unchecked box


def test_delete_a_crew(builder: Any, demo_crew: Crew) -> None:
    response = signed_in(builder).post(reverse("crews:crew-delete", args=[demo_crew.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("crews:crew-list")
    assert not Crew.objects.filter(pk=demo_crew.pk).exists()


# Crew validation ----------------------------------------------------------------------------


def test_empty_crew_name_is_shown_next_to_the_field(builder: Any) -> None:
    response = signed_in(builder).post(reverse("crews:crew-create"), crew_data(name=""))
    assert response.status_code == 200
    assert "This field is required." in field_error(response.content.decode(), "id_name")


def test_hierarchical_crew_without_manager_llm_is_refused_on_that_field(builder: Any) -> None:
    response = signed_in(builder).post(
        reverse("crews:crew-create"), crew_data(process="hierarchical")
    )
    assert response.status_code == 200
    assert "manager LLM" in field_error(response.content.decode(), "id_manager_llm")
    assert not Crew.objects.exists()


def test_another_users_agent_cannot_join_a_crew(builder: Any, other_builder: Any) -> None:
    theirs = agent_services.agent_create(actor=other_builder, name="Theirs", role="R", goal="G")
    response = signed_in(builder).post(reverse("crews:crew-create"), crew_data(agents=[theirs.pk]))
    assert response.status_code == 200
    assert field_error(response.content.decode(), "id_agents")
    assert not Crew.objects.filter(owner=builder).exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "Enter a valid JSON."),
        ('["a list"]', "JSON object"),
        ('{"bad name": 1}', "bad name"),
    ],
)
def test_bad_default_inputs_are_shown_next_to_the_json_field(
    builder: Any, text: str, message: str
) -> None:
    response = signed_in(builder).post(reverse("crews:crew-create"), crew_data(extra_inputs=text))
    assert response.status_code == 200
    assert message in field_error(response.content.decode(), "id_extra_inputs")


def test_a_second_crew_with_the_same_name_is_refused_on_the_name(
    builder: Any, demo_crew: Crew
) -> None:
    response = signed_in(builder).post(reverse("crews:crew-create"), crew_data(name="AI LLMs"))
    assert response.status_code == 200
    assert field_error(response.content.decode(), "id_name")


def test_the_crew_form_sets_what_happens_when_a_step_fails(builder: Any) -> None:
    client = signed_in(builder)
    page = client.get(reverse("crews:crew-create")).content.decode()
    assert "Let the agent replan the rest, and show me the changes" in page

    response = client.post(reverse("crews:crew-create"), crew_data(on_step_failure="adapt"))
    bad = client.post(reverse("crews:crew-create"), crew_data(name="Other", on_step_failure="panic"))

    assert response.status_code == 302
    assert Crew.objects.get(name="Launch crew").on_step_failure == "adapt"
    assert bad.status_code == 200 and field_error(bad.content.decode(), "id_on_step_failure")


def test_htmx_crew_form_errors_are_the_partial_only(builder: Any) -> None:
    response = signed_in(builder).post(
        reverse("crews:crew-create"), crew_data(name=""), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert "<html" not in html and html.lstrip().startswith("<form")
    assert field_error(html, "id_name")


# Tasks -----------------------------------------------------------------------------------------


def test_add_a_task_that_uses_an_earlier_tasks_output(builder: Any, demo_crew: Crew) -> None:
    research = demo_crew.tasks.get(name="Research")
    agent = research.agent
    response = signed_in(builder).post(
        reverse("crews:task-create", args=[demo_crew.pk]),
        task_data(agent=agent.pk, context=[research.pk], human_input="on"),
    )
    task = demo_crew.tasks.get(name="Summary")
    assert response.status_code == 302
    assert (
        response["Location"]
        == reverse("crews:crew-detail", args=[demo_crew.pk]) + f"#task-{task.pk}"
    )
    assert (task.order, task.agent, task.human_input) == (2, agent, True)
    assert list(task.context.all()) == [research]


def test_edit_and_delete_a_task(builder: Any, demo_crew: Crew) -> None:
    client = signed_in(builder)
    research = demo_crew.tasks.get(name="Research")
    response = client.post(
        reverse("crews:task-update", args=[research.pk]),
        task_data(name="Deep research", agent=research.agent_id, async_execution="on"),
    )
    assert response.status_code == 302
    research.refresh_from_db()
    assert (research.name, research.async_execution) == ("Deep research", True)

    response = client.post(reverse("crews:task-delete", args=[research.pk]))
    assert response.status_code == 302
    assert task_names(demo_crew) == ["Report"]
    assert demo_crew.tasks.get().order == 0


def test_empty_task_description_is_shown_next_to_the_field(builder: Any, demo_crew: Crew) -> None:
    response = signed_in(builder).post(
        reverse("crews:task-create", args=[demo_crew.pk]), task_data(description="")
    )
    assert "This field is required." in field_error(response.content.decode(), "id_description")


def test_context_task_that_comes_later_is_refused_on_the_context_field(
    builder: Any, demo_crew: Crew
) -> None:
    research = demo_crew.tasks.get(name="Research")
    report = demo_crew.tasks.get(name="Report")
    client = signed_in(builder)
    form = client.get(reverse("crews:task-update", args=[research.pk])).content.decode()
    assert f'name="context" value="{report.pk}"' not in form  # only earlier tasks are offered
    assert "None: no task comes before this one." in form
    response = client.post(
        reverse("crews:task-update", args=[research.pk]),
        task_data(name="Research", context=[report.pk]),
    )
    assert response.status_code == 200
    assert "Only earlier tasks" in field_error(response.content.decode(), "id_context")
    assert not research.context.exists()


def test_task_agent_of_another_user_is_refused_on_the_agent_field(
    builder: Any, other_builder: Any, demo_crew: Crew
) -> None:
    theirs = agent_services.agent_create(actor=other_builder, name="Theirs", role="R", goal="G")
    response = signed_in(builder).post(
        reverse("crews:task-create", args=[demo_crew.pk]), task_data(agent=theirs.pk)
    )
    assert response.status_code == 200
    assert field_error(response.content.decode(), "id_agent")
    assert not demo_crew.tasks.filter(name="Summary").exists()


def test_htmx_task_form_errors_are_the_partial_only(builder: Any, demo_crew: Crew) -> None:
    response = signed_in(builder).post(
        reverse("crews:task-create", args=[demo_crew.pk]),
        task_data(name=""),
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    assert "<html" not in html and 'id="task-form"' in html and field_error(html, "id_name")


# Reordering ------------------------------------------------------------------------------------


def add_summary(builder: Any, crew: Crew) -> Task:
    return services.task_create(
        actor=builder, crew=crew, name="Summary", description="S", expected_output="E"
    )


def test_move_a_task_up_with_a_plain_form(builder: Any, demo_crew: Crew) -> None:
    summary = add_summary(builder, demo_crew)
    client = signed_in(builder)
    response = client.post(reverse("crews:task-move", args=[summary.pk]), {"direction": "up"})
    assert response.status_code == 302
    assert response["Location"].endswith(f"#task-{summary.pk}")
    assert task_names(demo_crew) == ["Research", "Summary", "Report"]
    page = client.get(response["Location"]).content.decode()
    assert "moved up" in page


def test_move_a_task_with_htmx_swaps_the_task_list(builder: Any, demo_crew: Crew) -> None:
    summary = add_summary(builder, demo_crew)
    response = signed_in(builder).post(
        reverse("crews:task-move", args=[summary.pk]), {"direction": "up"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and html.lstrip().startswith('<section id="tasks"')
    assert html.index("Summary") < html.index("Report")
    assert 'hx-swap-oob="innerHTML"' in html and "moved up" in html
    assert task_names(demo_crew) == ["Research", "Summary", "Report"]


def test_a_move_that_breaks_context_order_is_refused(builder: Any, demo_crew: Crew) -> None:
    report = demo_crew.tasks.get(name="Report")
    client = signed_in(builder)
    response = client.post(
        reverse("crews:task-move", args=[report.pk]), {"direction": "up"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert 'role="alert"' in html and "uses the output of Research" in html
    assert task_names(demo_crew) == ["Research", "Report"]

    response = client.post(reverse("crews:task-move", args=[report.pk]), {"direction": "up"})
    page = client.get(response["Location"]).content.decode()
    assert "uses the output of Research" in page
    assert task_names(demo_crew) == ["Research", "Report"]


def test_moving_the_first_task_up_changes_nothing(builder: Any, demo_crew: Crew) -> None:
    research = demo_crew.tasks.get(name="Research")
    response = signed_in(builder).post(
        reverse("crews:task-move", args=[research.pk]), {"direction": "up"}
    )
    assert response.status_code == 302
    assert task_names(demo_crew) == ["Research", "Report"]


def test_htmx_crew_page_request_is_the_task_list_partial(builder: Any, demo_crew: Crew) -> None:
    response = signed_in(builder).get(
        reverse("crews:crew-detail", args=[demo_crew.pk]), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert "<html" not in html and html.lstrip().startswith('<section id="tasks"')


def test_htmx_task_delete_confirmation_is_a_fragment(builder: Any, demo_crew: Crew) -> None:
    task = demo_crew.tasks.first()
    response = signed_in(builder).get(
        reverse("crews:task-delete", args=[task.pk]), HTTP_HX_REQUEST="true"
    )
    assert b"<html" not in response.content and b"Delete task" in response.content


def test_user_text_is_escaped(builder: Any) -> None:
    crew = services.crew_create(actor=builder, name="<script>alert(1)</script>")
    services.task_create(
        actor=builder,
        crew=crew,
        name="<b>bold</b>",
        description="<img src=x onerror=alert(1)>",
        expected_output="E",
    )
    html = signed_in(builder).get(reverse("crews:crew-detail", args=[crew.pk])).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<img src=x" not in html and "<b>bold</b>" not in html


@pytest.mark.parametrize(("mode", "planning", "review"), [("review", True, True), ("auto", True, False),
                                                          ("none", False, False)])
def test_the_plan_choice_sets_planning_and_review_and_the_edit_form_shows_it(
        builder: Any, mode: str, planning: bool, review: bool) -> None:
    client = signed_in(builder)
    form = client.get(reverse("crews:crew-create")).content.decode()
    assert re.search(r'value="review"[^>]*checked', form)  # a new crew has its plan reviewed
    assert "Draft a plan I review first" in form and "Plan and run at once" in form and "No plan" in form

    response = client.post(reverse("crews:crew-create"), crew_data(name=f"Crew {mode}", plan_mode=mode))
    crew = Crew.objects.get(name=f"Crew {mode}")
    assert response.status_code == 302 and (crew.planning, crew.review_plan) == (planning, review)
    edit = client.get(reverse("crews:crew-update", args=[crew.pk])).content.decode()
    assert re.search(rf'value="{mode}"[^>]*checked', edit)
