from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("crews", "0008_text_ceilings_and_task_checks"),
    ]

    operations = [
        migrations.AddField(
            model_name="crew",
            name="memory",
            field=models.BooleanField(
                default=False,
                help_text="After each task, save what was learned; before each task, recall what is relevant.",
                verbose_name="remember between runs",
            ),
        ),
    ]
