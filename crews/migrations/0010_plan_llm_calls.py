from decimal import Decimal

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("crews", "0009_crew_memory"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="PlanLLMCall",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(db_index=True, verbose_name="at")),
                ("model", models.CharField(blank=True, max_length=200, verbose_name="model")),
                ("purpose", models.CharField(blank=True, max_length=50, verbose_name="purpose")),
                (
                    "prompt_tokens",
                    models.PositiveIntegerField(default=0, verbose_name="prompt tokens"),
                ),
                (
                    "completion_tokens",
                    models.PositiveIntegerField(default=0, verbose_name="completion tokens"),
                ),
                (
                    "cost_usd",
                    models.DecimalField(
                        decimal_places=6,
                        default=Decimal("0"),
                        max_digits=12,
                        verbose_name="cost (USD)",
                    ),
                ),
                (
                    "plan",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="llm_calls",
                        to="crews.plan",
                        verbose_name="plan",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                        verbose_name="person",
                    ),
                ),
            ],
            options={
                "verbose_name": "plan LLM call",
                "verbose_name_plural": "plan LLM calls",
                "ordering": ["at", "id"],
            },
        ),
    ]
