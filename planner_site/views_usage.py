"""Usage and cost (admins: everyone's, or one person's; others: their own) and the audit log
(admins, read-only)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from agents.views import HtmxHttpRequest, domain_errors
from planner_site import selectors
from planner_site.budgets import budget_for
from planner_site.forms import PERIODS, AuditFilterForm, UsageFilterForm
from planner_site.roles import is_admin
from planner_site.usage import site_today, spent_on, usage_report
from planner_site.views_people import require_admin


def _people_choices() -> list[tuple[int, str]]:
    return list(get_user_model().objects.order_by("username").values_list("pk", "username"))


def period_links() -> list[tuple[int, str]]:
    return [(n, _("Last %(n)s days") % {"n": n}) for n in PERIODS]


@require_GET
@domain_errors
def usage(request: HtmxHttpRequest) -> HttpResponse:
    admin = is_admin(request.user)
    form = UsageFilterForm(request.GET)
    first, last = form.period(site_today())
    user_id: int | None = request.user.pk
    people: list[tuple[int, str]] = []
    if admin:
        people = _people_choices()
        chosen = request.GET.get("user", "")
        user_id = int(chosen) if chosen.isdigit() and any(pk == int(chosen) for pk, _n in people) else None
    report = usage_report(first=first, last=last, user_id=user_id)
    person = f"&user={user_id}" if admin and user_id is not None else ""
    periods = [{"days": n, "label": label, "url": f"?days={n}{person}",
                "current": not form.by_dates and (last - first).days + 1 == n} for n, label in period_links()]
    context: dict[str, Any] = {
        "form": form, "report": report, "admin": admin, "people": people, "chosen_user": user_id,
        "everyone": admin and user_id is None, "periods": periods,
        # A person's row keeps the period on screen.
        "period_query": urlencode({"first": first, "last": last} if form.by_dates else {"days": (last - first).days + 1}),
    }
    if not admin:
        context["budget"] = budget_for(request.user)
        context["spent_today"] = spent_on(user_id=request.user.pk, day=site_today())
    return render(request, "site/usage.html", context)


# The audit log ---------------------------------------------------------------------------------

ACTION_LABELS = {
    "llm.created": _("LLM added"),
    "llm.updated": _("LLM changed"),
    "llm.deleted": _("LLM deleted"),
    "llm.key_changed": _("LLM key changed"),
    "llm.key_cleared": _("LLM key removed"),
    "llm.default_set": _("Default LLM chosen"),
    "llm.tested": _("LLM connection tested"),
    "prompt.updated": _("Prompt changed"),
    "run.started": _("Run started"),
    "run.stopped": _("Run stopped"),
    "run.resumed": _("Run resumed"),
    "run.tool_approved": _("Tool call approved"),
    "run.tool_denied": _("Tool call denied"),
    "user.invited": _("Person invited"),
    "user.role_changed": _("Role changed"),
    "user.deactivated": _("Person deactivated"),
    "user.reactivated": _("Person reactivated"),
    "budget.set": _("Daily budget set"),
    "budget.cleared": _("Daily budget removed"),
    "token.created": _("API token created"),
    "token.revoked": _("API token revoked"),
}

PAGE_SIZE = 50


@require_GET
@domain_errors
def audit_list(request: HtmxHttpRequest) -> HttpResponse:
    require_admin(request)
    actions = [(a, f"{ACTION_LABELS.get(a, a)} ({a})") for a in selectors.audit_actions()]
    form = AuditFilterForm(request.GET or None, actions=actions, people=_people_choices())
    filters = form.cleaned_data if form.is_valid() else {}
    events = selectors.audit_events(
        action=filters.get("action") or "", actor_id=filters.get("actor"),
        first=filters.get("first"), last=filters.get("last"),
    )
    page = Paginator(events, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [{"event": e, "label": ACTION_LABELS.get(e.action, e.action), "data": sorted(e.data.items())}
            for e in page]
    kept = {k: v for k, v in request.GET.items() if k != "page" and v}
    return render(request, "site/audit_list.html", {
        "form": form, "page": page, "rows": rows, "query": ("&" + urlencode(kept)) if kept else "",
    })
