# Plan versions are immutable: deleting a task no longer deletes its steps from them.

import django.db.models.deletion
from django.db import migrations, models

def fill_snapshots(apps, schema_editor):
    """Steps name their task by id. Versions written before keep no tasks (``[]``): what they
    were written for is not known any more, and the crew's tasks as they are now would make
    every older run report changes that never happened (an empty list reports none)."""
    PlanStep = apps.get_model("crews", "PlanStep")
    PlanStep.objects.update(task_id_snapshot=models.F("task_id"))


def drop_steps_of_deleted_tasks(apps, schema_editor):
    """Going back: a step needs its task again, as when deleting a task deleted its steps."""
    apps.get_model("crews", "PlanStep").objects.filter(task__isnull=True).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("crews", "0004_crew_on_step_failure"),
    ]

    operations = [
        migrations.AddField(
            model_name="planversion",
            name="tasks",
            field=models.JSONField(blank=True, default=list, verbose_name="tasks"),
        ),
        migrations.AddField(
            model_name="planstep",
            name="task_id_snapshot",
            field=models.PositiveBigIntegerField(null=True),
        ),
        migrations.RunPython(fill_snapshots, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="planstep",
            name="task_id_snapshot",
            field=models.PositiveBigIntegerField(),
        ),
        migrations.AlterField(
            model_name="planstep",
            name="task",
            field=models.ForeignKey(
                null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="crews.task"
            ),
        ),
        migrations.AlterModelOptions(
            name="planstep",
            options={
                "ordering": [
                    "version", models.OrderBy(models.F("task__order"), nulls_last=True), "task_id_snapshot", "order",
                ],
                "verbose_name": "plan step",
                "verbose_name_plural": "plan steps",
            },
        ),
        migrations.RunPython(migrations.RunPython.noop, drop_steps_of_deleted_tasks),
    ]
