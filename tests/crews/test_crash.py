"""A worker killed mid-run: the run is marked interrupted and resumes without redoing finished work."""

from __future__ import annotations

import signal

import pytest

from crews import runner, runs
from crews.models import Run, RunEvent, RunTask
from tests.crews.run_helpers import (
    TaskReplies,
    event_types,
    fake_llm,
    kickoff_process,
    make_crew,
    wait_for,
)
from tests.fakes.openai_server import FakeLLMServer

TASKS = ["Research", "Report", "Summary"]


@pytest.mark.django_db(transaction=True)
def test_a_killed_run_is_interrupted_then_resumes_from_its_first_unfinished_task(builder):
    with FakeLLMServer() as server:
        server.default = replies = TaskReplies(TASKS, hold=["Report"])
        crew = make_crew(builder, name="Tides", tasks=TASKS, llm=fake_llm(server))
        process = kickoff_process(str(crew.pk), "--input", "topic=tides")
        try:
            # Research done, Report's request in flight (the server holds it): kill the worker.
            wait_for(lambda: replies.counts.get("Report") == 1 or process.poll() is not None,
                     timeout=30, what="the second task's LLM request")
            process.send_signal(signal.SIGKILL)
            assert process.wait(timeout=10) == -signal.SIGKILL
        finally:
            if process.poll() is None:
                process.kill()
            process.communicate()
        run = Run.objects.get(crew=crew)
        assert run.status == Run.Status.RUNNING  # nobody told the database
        assert [r.status for r in run.task_results.order_by("order")] == ["done", "running", "waiting"]

        assert runs.run_mark_stale_interrupted(stale_after=0) == [run.pk]
        run.refresh_from_db()
        assert run.status == Run.Status.INTERRUPTED
        runs.run_resume(actor=builder, run=run)  # queues it (the immediate backend runs it now)
        runner.execute(run.pk)  # what a worker does: a run already taken is left alone

        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, run.error
        assert replies.counts == {"Research": 1, "Report": 2, "Summary": 1}
        assert [r.output for r in run.task_results.order_by("order")] == [
            "Research done", "Report done", "Summary done",
        ]
        assert all(r.status == RunTask.Status.DONE for r in run.task_results.all())
        assert run.output == "Summary done"
        types = event_types(run)
        assert types.count("task.completed") == 3  # Research's once, before the crash
        assert types.index("run.interrupted") < types.index("run.resumed") < types.index("run.succeeded")
        research = run.snapshot["tasks"][0]["id"]
        assert RunEvent.objects.filter(run=run, type="task.started", task_id=research).count() == 1
        seqs = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
        assert seqs == list(range(1, len(seqs) + 1))
