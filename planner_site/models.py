"""Site-wide data: API tokens (hashed) and the audit log."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(_("name"), max_length=100, blank=True)
    prefix = models.CharField(
        _("prefix"), max_length=12, editable=False
    )  # shown so people can tell tokens apart
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class AuditEvent(models.Model):
    """Who changed keys, models, prompts or roles, and who started or stopped runs."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("actor"),
        null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(
        _("action"), max_length=50
    )  # llm.key_changed, prompt.updated, run.started, ...
    target_type = models.CharField(_("target type"), max_length=50)
    target_id = models.CharField(_("target id"), max_length=50, blank=True)
    data = models.JSONField(_("data"), default=dict, blank=True)  # never a secret
    at = models.DateTimeField(_("at"), auto_now_add=True)

    class Meta:
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target_type}:{self.target_id}"


class WorkerBeat(models.Model):
    """A run worker's last sign of life (embedded or ``db_worker``), for /api/health."""

    worker_id = models.CharField(max_length=100, unique=True)
    seen_at = models.DateTimeField()

    class Meta:
        verbose_name = _("worker heartbeat")
        verbose_name_plural = _("worker heartbeats")

    def __str__(self) -> str:
        return self.worker_id


class DailyBudget(models.Model):
    """How much a person may spend on LLM calls in a day (the site's day, ``TIME_ZONE``); the row
    without a person is the site's default for everyone without their own."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("user"),
        null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    cost_usd = models.DecimalField(_("daily budget (USD)"), max_digits=10, decimal_places=2)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("daily budget")
        verbose_name_plural = _("daily budgets")
        constraints = [
            # One row per person and one site default (NULLs are distinct to a plain unique).
            models.UniqueConstraint(
                models.functions.Coalesce("user", models.Value(0)), name="one_daily_budget_per_user"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user or 'site'}: {self.cost_usd} USD/day"
