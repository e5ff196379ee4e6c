"""Reads for the site's admin pages: people, API tokens and the audit log."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.utils.translation import gettext as _

from planner_site.errors import NotFound
from planner_site.models import ApiToken, AuditEvent, DailyBudget
from planner_site.roles import ADMIN, ROLES
from planner_site.usage import day_start, site_today


@dataclass
class Person:
    user: Any
    role: str | None
    runs_this_month: int
    budget: Any  # their own daily budget (Decimal) or None


def _role(user: Any) -> str | None:
    """``roles.role_of`` from prefetched groups (no query per person)."""
    if user.is_superuser:
        return ADMIN
    names = {g.name for g in user.groups.all()}
    return next((role for role in ROLES if role in names), None)


def people_list() -> list[Person]:
    """Everyone, with their role, their runs since the first of this month (the site's month)
    and their own daily budget: four queries whatever the number of people."""
    month_start = day_start(site_today().replace(day=1))
    users = (
        get_user_model().objects.order_by("username").prefetch_related("groups")
        .annotate(runs_this_month=Count("runs", filter=Q(runs__created_at__gte=month_start)))
    )
    budgets = dict(DailyBudget.objects.filter(user__isnull=False).values_list("user_id", "cost_usd"))
    return [Person(user=u, role=_role(u), runs_this_month=u.runs_this_month, budget=budgets.get(u.pk))
            for u in users]


def person_get(*, user_id: int) -> Any:
    user = get_user_model().objects.filter(pk=user_id).prefetch_related("groups").first()
    if user is None:
        raise NotFound(_("No such person."))
    return user


def person_role(user: Any) -> str | None:
    return _role(user)


def site_budget() -> Any:
    return DailyBudget.objects.filter(user__isnull=True).values_list("cost_usd", flat=True).first()


def tokens_of(*, user: Any) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).order_by("-created_at")


def tokens_all() -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("user").order_by("user__username", "-created_at")


def audit_actions() -> list[str]:
    return sorted(set(AuditEvent.objects.order_by().values_list("action", flat=True).distinct()))


def audit_events(*, action: str = "", actor_id: int | None = None, first: date | None = None,
                 last: date | None = None) -> QuerySet[AuditEvent]:
    """The audit log, newest first, filtered by action, person and days (both included)."""
    events = AuditEvent.objects.select_related("actor").order_by("-at", "-id")
    if action:
        events = events.filter(action=action)
    if actor_id is not None:
        events = events.filter(actor_id=actor_id)
    if first is not None:
        events = events.filter(at__gte=day_start(first))
    if last is not None:
        events = events.filter(at__lt=day_start(last + timedelta(days=1)))
    return events
