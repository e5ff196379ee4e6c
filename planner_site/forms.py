"""Forms of the site's admin pages: invite a person, role, daily budget, API token, filters."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django import forms
from django.contrib.auth import password_validation
from django.utils.translation import gettext_lazy as _

from agents.forms import ServiceErrorsMixin
from planner_site.people import MAX_BUDGET_USD
from planner_site.roles import ADMIN, BUILDER, VIEWER


def role_choices() -> list[tuple[str, Any]]:
    return [
        (ADMIN, _("Admin: LLMs, keys, prompts and people")),
        (BUILDER, _("Builder: their own agents and crews")),
        (VIEWER, _("Viewer: reads shared crews")),
    ]


class InviteForm(ServiceErrorsMixin, forms.Form):
    username = forms.CharField(label=_("Username"), max_length=150)
    email = forms.EmailField(label=_("Email"), required=False, help_text=_("Optional."))
    role = forms.ChoiceField(label=_("Role"), choices=role_choices, initial=BUILDER, widget=forms.RadioSelect)
    password = forms.CharField(
        label=_("First password"), strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=_("Tell them this password; they can change it from their account menu."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        rules = password_validation.password_validators_help_texts()
        if rules:
            self.fields["password"].help_text = " ".join([str(self.fields["password"].help_text), *rules])


class RoleForm(forms.Form):
    role = forms.ChoiceField(label=_("Role"), choices=role_choices, widget=forms.RadioSelect)


class BudgetForm(ServiceErrorsMixin, forms.Form):
    cost_usd = forms.DecimalField(
        label=_("Daily budget (USD)"), required=False, min_value=0, max_value=MAX_BUDGET_USD, decimal_places=2,
        widget=forms.NumberInput(attrs={"step": "0.01", "inputmode": "decimal"}),
    )

    def __init__(self, *args: Any, help_text: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["cost_usd"].help_text = help_text


class TokenForm(forms.Form):
    name = forms.CharField(
        label=_("Name"), max_length=100, required=False,
        help_text=_("What uses it, so you can tell tokens apart (a script, a server)."),
    )


PERIODS = (7, 30, 90)


def period_choices() -> list[tuple[str, Any]]:
    return [(str(n), _("Last %(n)s days") % {"n": n}) for n in PERIODS]


class UsageFilterForm(forms.Form):
    """A period: the last 7, 30 or 90 days, or from a day to a day (at most a year)."""

    days = forms.TypedChoiceField(label=_("Period"), choices=period_choices, coerce=int, required=False)
    first = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    last = forms.DateField(label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data: Any = None, **kwargs: Any) -> None:
        # The form is always bound: the last 30 days unless a period or days are asked for.
        data = data.copy() if data is not None else {}
        if not data.get("days") and not data.get("first") and not data.get("last"):
            data["days"] = "30"
        super().__init__(data, **kwargs)

    @property
    def by_dates(self) -> bool:
        return bool(self.is_valid() and (self.cleaned_data.get("first") or self.cleaned_data.get("last")))

    def period(self, today: date) -> tuple[date, date]:
        data = self.cleaned_data if self.is_valid() else {}
        first, last = data.get("first"), data.get("last")
        if first or last:
            last = min(last or today, today)
            first = first or last - timedelta(days=29)
            if first > last:
                first, last = last, first
            return max(first, last - timedelta(days=365)), last
        days = data.get("days") or 30
        return today - timedelta(days=days - 1), today


class AuditFilterForm(forms.Form):
    action = forms.ChoiceField(label=_("Action"), required=False)
    actor = forms.TypedChoiceField(label=_("Person"), required=False, coerce=int, empty_value=None)
    first = forms.DateField(label=_("From"), required=False, widget=forms.DateInput(attrs={"type": "date"}))
    last = forms.DateField(label=_("To"), required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, actions: list[tuple[str, str]], people: list[tuple[int, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["action"].choices = [("", _("Any action")), *actions]
        self.fields["actor"].choices = [("", _("Anyone")), *people]
