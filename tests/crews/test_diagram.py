"""The crew diagram: laid out from the tasks, drawn as SVG on the crew page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse
from django.utils import translation

from agents import services as agent_services
from crews import services
from crews.diagram import crew_diagram, manager_of
from crews.models import Crew
from tests.conftest import signed_in

pytestmark = pytest.mark.django_db


def four_tasks(owner: Any, **crew: Any) -> Crew:
    writer = agent_services.agent_create(actor=owner, name="Writer <b>", role="R", goal="G")
    made = services.crew_create(actor=owner, name="Flow crew", agents=[writer], **crew)
    tasks = [services.task_create(actor=owner, crew=made, name=name, description="D", expected_output="E",
                                  agent=writer if name != "Orphan" else None)
             for name in ("Research", "Outline", "Draft", "Orphan")]
    # Draft reads Research (skipping Outline) and Outline (adjacent: the order's arrow shows it).
    services.task_update(actor=owner, task=tasks[2], context=[tasks[0], tasks[1]])
    return made


def test_the_layout_draws_the_order_and_only_the_links_that_skip_a_task(builder: Any) -> None:
    crew = four_tasks(builder)
    diagram = crew_diagram(crew.tasks.order_by("order").prefetch_related("context").select_related("agent"))

    assert [b.number for b in diagram.boxes] == [1, 2, 3, 4]
    assert len(diagram.arrows) == 3
    assert [(link.source, link.target) for link in diagram.links] == [(1, 3)]
    tops = [b.y for b in diagram.boxes]
    assert tops == sorted(tops) and len(set(tops)) == 4  # one column, top to bottom
    assert diagram.height > diagram.boxes[-1].bottom and diagram.width >= 360
    assert diagram.manager is None and diagram.manager_lines == []


def test_a_long_name_is_shortened_in_the_box_and_kept_whole_in_its_tooltip(builder: Any) -> None:
    crew = four_tasks(builder)
    task = crew.tasks.get(name="Research")
    task.name = "Research every single source there is about the topic"
    task.save()
    [box, *_] = crew_diagram(crew.tasks.order_by("order").prefetch_related("context")).boxes
    assert box.title.endswith("…") and len(box.title) <= 25 and box.full_title == task.name


def test_the_crew_page_shows_the_diagram_with_the_links_and_the_manager(builder: Any) -> None:
    crew = four_tasks(builder, process="hierarchical", manager_llm=agent_services.llm_ensure_demo())
    page = signed_in(builder).get(reverse("crews:crew-detail", args=[crew.pk])).content.decode()

    svg = page[page.index("<svg class=\"diagram__svg\""):page.index("</svg>")]
    assert svg.count('class="diagram__task') == 4 and svg.count('class="diagram__arrow"') == 3
    assert svg.count('class="diagram__link"') == 1 and svg.count('class="diagram__manager-line"') == 4
    assert "Manager: Offline demo model" in svg
    assert "Writer &lt;b&gt;" in svg and "<b>" not in svg  # names are escaped
    assert "No agent" in svg
    assert re.search(r"<desc[^>]*>1\. Research \(Writer &lt;b&gt;\), 2\. Outline", svg)
    assert "Task 3 reads the output of task 1." in svg
    # The run panel comes first: running the crew is what most visits are for.
    assert page.index('id="kickoff"') < page.index('id="diagram-heading"') < page.index('id="tasks"')


def test_a_manager_without_an_llm_of_its_own_is_the_site_default_in_the_readers_language() -> None:
    label = manager_of("hierarchical", None)  # as a run's view keeps it, before it knows its reader
    with translation.override("pt-br"):
        assert str(label) == "o LLM padrão do site"
    assert str(label) == "the site default LLM"
    assert manager_of("hierarchical", "Big model") == "Big model" and manager_of("sequential", "Big model") is None


def test_a_crew_without_tasks_has_no_diagram(builder: Any) -> None:
    crew = services.crew_create(actor=builder, name="Empty crew")
    page = signed_in(builder).get(reverse("crews:crew-detail", args=[crew.pk])).content.decode()
    assert "diagram__svg" not in page


def test_the_plan_editor_shows_each_tasks_step_count_in_the_diagram(builder: Any, django_capture_on_commit_callbacks: Any) -> None:
    from tests.crews.test_plan_views import draft, steps

    crew = four_tasks(builder)
    crew.tasks.filter(name="Orphan").update(agent=crew.agents.get())  # every task needs an agent to run
    client = signed_in(builder)
    plan = draft(client, crew, django_capture_on_commit_callbacks)
    page = client.get(reverse("crews:plan-detail", args=[plan.pk])).content.decode()

    svg = page[page.index('<svg class="diagram__svg"'):page.index("</svg>")]
    counts = [int(n) for n in re.findall(r'class="diagram__steps"[^>]*>(\d+) steps?<', svg)]
    assert counts == [len(steps(plan, task)) for task in crew.tasks.order_by("order")] and len(counts) == 4
    assert all(counts) and svg.count('class="diagram__link"') == 1


def test_moving_a_task_with_htmx_redraws_the_diagram_out_of_band(builder: Any) -> None:
    crew = four_tasks(builder)
    orphan = crew.tasks.get(name="Orphan")
    answer = signed_in(builder).post(reverse("crews:task-move", args=[orphan.pk]), {"direction": "up"},
                                     HTTP_HX_REQUEST="true").content.decode()

    oob = answer[answer.index('<div id="crew-diagram-slot" hx-swap-oob="true">'):]
    titles = re.findall(r'class="diagram__title"[^>]*>(\d+\. \w+)<', oob)
    assert titles == ["1. Research", "2. Outline", "3. Orphan", "4. Draft"]
