"""What a planned run costs the database outside its event storage (#20): hops, transactions and
the statements of its plan, its start and its changes of state."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from crews import runner
from crews.models import Plan, PlanStep, Run, RunEvent
from tests.crews.run_helpers import planned_run

# The event storage's own statements (crews.bridge, crews.sink): not counted here.
EVENT_STORAGE = ('"last_seq" = "last_seq" +', 'INSERT INTO "crews_runevent"', 'INSERT INTO "crews_runllmcall"',
                 'UPDATE "crews_runtask"', "SAVEPOINT", "RELEASE SAVEPOINT")


def _service_transactions(sqls: list[str]) -> int:
    """Transactions that do more than store events: the claim's, the services', the plan's."""
    count, opened, services = 0, False, False
    for sql in sqls:
        if sql.startswith("BEGIN"):
            opened, services = True, False
        elif sql.startswith("COMMIT"):
            count += opened and services
            opened = False
        elif opened and not any(marker in sql for marker in EVENT_STORAGE):
            services = True
    return count


@pytest.mark.django_db(transaction=True)
def test_a_planned_run_stores_approves_and_follows_its_plan_in_one_hop_and_one_transaction(
    builder: Any, monkeypatch: Any
) -> None:
    hops: list[str] = []
    real_db = runner.db

    def counting_db(fn: Any) -> Any:
        call = real_db(fn)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            hops.append(getattr(fn, "__name__", repr(fn)))
            return await call(*args, **kwargs)

        return counted

    monkeypatch.setattr(runner, "db", counting_db)
    run = planned_run(builder, monkeypatch)

    with CaptureQueriesContext(connection) as queries:
        runner.execute(run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    sqls = [q["sql"] for q in queries.captured_queries]
    # The plan stored approved and followed, the end; the claim and the start (which sets the run
    # planning) are made in the run's own thread before its loop takes over (runner.execute).
    assert hops == ["_store_and_follow", hops[1]] and "run_finish" in hops[1], hops
    assert _service_transactions(sqls) == 4
    plan_sql = [s for s in sqls if '"crews_plan"' in s.split(" WHERE ")[0] and "planstep" not in s]
    assert len(plan_sql) == 1 and plan_sql[0].startswith('INSERT INTO "crews_plan"'), plan_sql
    assert not any(s.startswith("SELECT") and 'FROM "crews_planstep"' in s for s in sqls)
    # Whether the crew remembers and has sources: one read.
    assert sum(1 for s in sqls if '"knowledge_knowledgesource"' in s or 'FROM "crews_crew"' in s) == 1
    run_changes = [s for s in sqls if s.startswith('UPDATE "crews_run" ') and "last_seq" not in s]
    assert len(run_changes) == 4, run_changes  # claimed, planning, running with its plan, succeeded

    # What the plan's hop leaves is what storing, approving and following it one by one did.
    plan = Plan.objects.get(pk=run.plan_id)
    assert (plan.status, plan.version, plan.approved_version, plan.next_step_uid) == (Plan.Status.APPROVED, 1, 1, 3)
    assert plan.prompt_tokens > 0 and plan.warnings == [] and plan.llm_id == run.snapshot["crew"]["planning_llm_id"]
    assert run.plan_version == 1 and run.planning_plan_id is None
    research, report = (t["id"] for t in run.snapshot["tasks"])
    assert list(PlanStep.objects.filter(version__plan=plan).order_by("uid").values_list(
        "uid", "task_id", "task_id_snapshot", "order", "text")) == [
        (1, research, research, 0, "Look it up"), (2, report, report, 0, "Sum up")]
    events = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("type", "data"))
    types = [t for t, _data in events]
    at = types.index("crew_plan.completed")
    assert types[at:at + 3] == ["crew_plan.completed", "crew_plan.approved", "run.running"]
    assert events[at][1] == events[at + 1][1] == {"plan_id": plan.pk, "version": 1}
    assert events[at + 2][1] == {"from": "planning"}
    assert types.index("run.planning") < types.index("llm.started")


@pytest.mark.django_db(transaction=True)
def test_a_services_event_goes_in_its_change_of_states_transaction_without_a_savepoint(
    builder: Any, monkeypatch: Any
) -> None:
    """run.started, run.planning, run.succeeded: stored with the change they tell, no savepoint."""
    run = planned_run(builder, monkeypatch)
    with CaptureQueriesContext(connection) as queries:
        runner.execute(run.pk)
    sqls = [q["sql"] for q in queries.captured_queries]
    assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED
    assert not [sql for sql in sqls if "SAVEPOINT" in sql]
    kinds = set(RunEvent.objects.filter(run=run).values_list("type", flat=True))
    assert {"run.started", "run.planning", "run.succeeded"} <= kinds
