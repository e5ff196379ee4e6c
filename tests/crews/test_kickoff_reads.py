"""What a kickoff reads: the crew it snapshots, as few queries as it can, and who may run it."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import PlanningConfig
from crews import selectors
from crews.bridge import crew_snapshot
from crews.models import Task
from planner_site.errors import Forbidden, NotFound
from tests.crews.run_helpers import make_agent, make_crew


def a_crew_with_everything(owner: Any, **fields: Any) -> Any:
    """Agents in a name order unlike their ids, planning settings, a task whose agent is not a
    member, tasks in an order unlike their ids, and tasks reading earlier ones."""
    zed = make_agent(owner, "Zed", role="Zed on {topic}")
    amy = make_agent(owner, "Amy", goal="Help with {angle}")
    PlanningConfig.objects.create(agent=amy, max_steps=7)
    outsider = make_agent(owner, "Outsider", backstory="Knows {place}")
    crew = make_crew(owner, agent=zed, tasks=("Research", "Draft", "Report"), **fields)
    crew.agents.add(amy)
    research, draft, report = crew.tasks.order_by("order")
    Task.objects.filter(pk=research.pk).update(order=2)
    Task.objects.filter(pk=report.pk).update(order=0, agent=outsider)
    draft.context.set([report])
    research.context.set([report, draft])
    return crew


def test_the_kickoff_read_snapshots_the_crew_as_crew_get_does(builder: Any) -> None:
    crew = a_crew_with_everything(builder)
    expected = crew_snapshot(selectors.crew_get(user=builder, crew_id=crew.pk, for_write=True))

    assert crew_snapshot(selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk)) == expected
    assert [a["name"] for a in expected["agents"]] == ["Amy", "Zed", "Outsider"]
    assert [t["name"] for t in expected["tasks"]] == ["Report", "Draft", "Research"]
    assert [len(t["context_ids"]) for t in expected["tasks"]] == [0, 1, 2]
    assert expected["agents"][0]["planning_config"]["max_steps"] == 7


def test_the_kickoff_read_takes_five_queries_and_the_snapshot_none(builder: Any) -> None:
    crew = a_crew_with_everything(builder)

    with CaptureQueriesContext(connection) as reads:
        read = selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk)
    with CaptureQueriesContext(connection) as snapshot:
        crew_snapshot(read)

    # The role checks read the builder's groups; then the crew, agents, their planning settings,
    # tasks and links, and one more for the agent of a task that is not a member (with its own).
    assert len(reads) - sum("auth_group" in q["sql"] for q in reads) == 6
    assert len(snapshot) == 0


def test_the_kickoff_reads_a_crew_with_no_tasks_or_agents(builder: Any) -> None:
    crew = make_crew(builder, tasks=())
    crew.agents.clear()

    snapshot = crew_snapshot(selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk))

    assert (snapshot["agents"], snapshot["tasks"]) == ([], [])


def test_the_kickoff_read_is_fresh_after_an_edit(builder: Any) -> None:
    crew = a_crew_with_everything(builder)
    selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk)
    Task.objects.filter(crew=crew, name="Draft").update(description="Now about {season}")

    snapshot = crew_snapshot(selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk))

    assert "Now about {season}" in [t["description"] for t in snapshot["tasks"]]


def test_the_kickoff_read_refuses_who_may_not_run_the_crew(
    builder: Any, other_builder: Any, viewer: Any, admin_user: Any
) -> None:
    private = make_crew(builder, name="Private")
    shared = make_crew(builder, name="Shared", shared=True)

    for user, crew in ((other_builder, private), (other_builder, shared), (viewer, private)):
        with pytest.raises(NotFound):
            selectors.crew_get_for_kickoff(user=user, crew_id=crew.pk)
    with pytest.raises(Forbidden):
        selectors.crew_get_for_kickoff(user=viewer, crew_id=shared.pk)
    with pytest.raises(NotFound):
        selectors.crew_get_for_kickoff(user=builder, crew_id=shared.pk + 1000)
    assert selectors.crew_get_for_kickoff(user=admin_user, crew_id=private.pk) == private


def _outcome(read: Any, user: Any, crew_id: int) -> Any:
    try:
        return read(user=user, crew_id=crew_id).pk
    except (NotFound, Forbidden) as refused:
        return type(refused)


def test_the_kickoff_read_lets_in_exactly_whom_crew_get_for_write_lets_in(
    builder: Any, other_builder: Any, viewer: Any, admin_user: Any
) -> None:
    """Its compiled reads restate who sees a crew: they must agree with crew_visible's rule for
    every role and every kind of crew, so a change to one without the other fails here."""
    mine = make_crew(builder, name="Private")
    shared = make_crew(builder, name="Shared", shared=True)
    theirs = make_crew(other_builder, name="Theirs")
    for user in (builder, other_builder, viewer, admin_user):
        for crew_id in (mine.pk, shared.pk, theirs.pk, theirs.pk + 1000):
            expected = _outcome(
                lambda **kw: selectors.crew_get(**kw, for_write=True), user, crew_id
            )
            assert _outcome(selectors.crew_get_for_kickoff, user, crew_id) == expected, (
                user.username, crew_id,
            )


def test_anything_but_all_on_a_kickoff_read_relation_still_asks_the_database(
    builder: Any,
) -> None:
    crew = a_crew_with_everything(builder)
    read = selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk)
    Task.objects.create(crew=crew, order=9, name="Late", description="", expected_output="")

    assert len(read.tasks.all()) == 3
    assert read.tasks.filter(name="Late").count() == 1
    assert read.agents.filter(name="Amy").exists()


def test_a_crew_whose_tasks_use_its_agents_is_read_in_five_queries(builder: Any) -> None:
    crew = make_crew(builder)

    with CaptureQueriesContext(connection) as reads:
        crew_snapshot(selectors.crew_get_for_kickoff(user=builder, crew_id=crew.pk))

    assert len(reads) - sum("auth_group" in q["sql"] for q in reads) == 5
