"""Background tasks (django.tasks): run a crew or an agent, draft or regenerate a plan.

The worker's side: services queue these through ``crews.queue``, which they are registered in
below (the app's ``ready`` imports this module), never by importing it.
"""

from __future__ import annotations

from django.tasks import task

from crews import queue, runner


@task()
def execute_run(run_id: int) -> None:
    runner.execute(run_id)


@task()
def generate_plan(plan_id: int) -> None:
    runner.generate_plan(plan_id)


@task()
def regenerate_plan_task(plan_id: int, task_id: int, feedback: str, actor_id: int | None) -> None:
    runner.regenerate_plan(plan_id, task_id, feedback, actor_id)


queue.worker.execute_run = execute_run
queue.worker.generate_plan = generate_plan
queue.worker.regenerate_plan_task = regenerate_plan_task
