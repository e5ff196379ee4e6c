"""``GET /api/usage``: the usage page's tokens and cost per day, person, crew and LLM, as JSON
(admins only), from the same report (``planner_site.usage.usage_report``)."""

# No ``from __future__ import annotations``: ninja reads the operations' annotations.
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.utils.translation import gettext as _
from ninja import Query, Router

from planner_site.errors import Forbidden
from planner_site.roles import is_admin
from planner_site.schemas import errors
from planner_site.schemas_usage import EPOCH, UsageQuery, UsageReportOut, totals_out
from planner_site.usage import Report, site_today, usage_report

router = Router(tags=["usage"])

MAX_DAYS = 366  # as the page: a year at most


def _usage_out(report: Report) -> dict[str, Any]:
    return {
        "from": report.first, "to": report.last, "time_zone": settings.TIME_ZONE,
        "totals": totals_out(report.totals),
        "days": [{"day": row.key, **totals_out(row)} for row in report.days],
        "users": [{"user_id": row.user_id, "username": row.label, **totals_out(row)} for row in report.users],
        "crews": [{"crew_id": row.key[1] if row.key[0] == "crew" else None,
                   "agent_id": row.key[1] if row.key[0] == "agent" else None,
                   "name": row.label, **totals_out(row)} for row in report.crews],
        "llms": [{"model": row.label, **totals_out(row)} for row in report.models],
    }


@router.get(
    "/usage",
    response={200: UsageReportOut, **errors(422)},
    by_alias=True,
    summary="Usage and cost per day, person, crew and LLM",
    description="Admins only (403 for anyone else). The recorded LLM calls of runs and of plans drafted "
                "outside a run, from `from` to `to` (both included, the site's days), at most a year; the "
                "same figures as the usage page. 422 when `from` is after `to`, `to` is after today, or "
                "the period is longer than a year.",
)
def usage(request: HttpRequest, filters: Query[UsageQuery]) -> Any:
    if not is_admin(request.user):
        raise Forbidden(_("Only an admin can see everyone's usage."))
    today = site_today()
    last = filters.last or today
    first = filters.first or max(last - timedelta(days=29), EPOCH)
    if last > today:
        raise ValidationError({"to": _("The last day can be today at the latest.")})
    if first > last:
        raise ValidationError({"from": _("The first day must not be after the last.")})
    if (last - first).days + 1 > MAX_DAYS:
        raise ValidationError({"from": _("A period is at most %(n)s days.") % {"n": MAX_DAYS}})
    return _usage_out(usage_report(first=first, last=last, user_id=filters.user_id))
