"""Daily cost budgets: a person whose spend today reached their budget starts no run until tomorrow.

"Today" is the site's day (``settings.TIME_ZONE``, UTC unless set otherwise); spend is what the
usage page counts (``planner_site.usage``). A person's own budget wins over the site default.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from planner_site.errors import TooMany
from planner_site.models import DailyBudget
from planner_site.prepared import STAND_IN_ID, Prepared
from planner_site.templatetags.money import usd
from planner_site.usage import day_start, site_today, spent_on


class DailyBudgetSpent(TooMany):
    """Refused until the next day: the person's daily budget is spent (HTTP 429)."""

    code = "daily_budget_spent"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


# Every kickoff reads the budgets (planner_site.prepared: compiled once, like the rate check).
_BUDGETS = Prepared(
    lambda user: DailyBudget.objects.filter(Q(user_id=user) | Q(user__isnull=True)).order_by()
    .values_list("user_id", "cost_usd"),
    user=STAND_IN_ID,
)


def budget_of(user: Any) -> tuple[Decimal | None, Decimal | None]:
    """The person's own daily budget and the site default (each None when unset), in one query."""
    own = default = None
    for user_id, amount in _BUDGETS.rows(user=user.pk):
        value = Decimal(str(amount)).quantize(Decimal("0.01"))  # raw rows: SQLite gives a float
        if user_id is None:
            default = value
        else:
            own = value
    return own, default


def budget_for(user: Any) -> Decimal | None:
    own, default = budget_of(user)
    return own if own is not None else default


def budget_check(*, actor: Any) -> None:
    """Raise ``DailyBudgetSpent`` when ``actor``'s spend today has reached their daily budget."""
    budget = budget_for(actor)
    if budget is None:
        return
    today = site_today()
    spent = spent_on(user_id=actor.pk, day=today)
    if spent < budget:
        return
    retry_after = int((day_start(today + timedelta(days=1)) - timezone.now()).total_seconds()) + 1
    raise DailyBudgetSpent(
        _("Your daily budget of %(budget)s is spent: %(spent)s used today. It renews at midnight "
          "(%(zone)s); an admin can raise it.") % {"budget": usd(budget), "spent": usd(spent),
                                                     "zone": settings.TIME_ZONE},
        retry_after=retry_after,
    )
