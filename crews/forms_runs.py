"""The run history's filters: one GET form whose values only ever narrow what a person may see."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.translation import gettext_lazy as _

from crews.models import Crew, Run


class StarterChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return obj.get_full_name() or obj.get_username()


def _date_input() -> forms.DateInput:
    # ISO dates: what an <input type="date"> sends and shows, whatever the language.
    return forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")


class RunFilterForm(forms.Form):
    """Status, crew, who started the run and the days it started in.

    The crew and people offered are those of runs the person sees (``selectors.run_crews`` and
    ``run_starters``); anything else is "not a valid choice", and the list is filtered from
    ``selectors.run_list`` either way, so a filter cannot widen what is shown.
    """

    status = forms.ChoiceField(label=_("Status"), required=False)
    crew = forms.ModelChoiceField(label=_("Crew"), required=False, queryset=None,
                                  empty_label=_("Any crew"))
    started_by = StarterChoiceField(label=_("Started by"), required=False, queryset=None,
                                    empty_label=_("Anyone"))
    since = forms.DateField(label=_("From"), required=False, widget=_date_input())
    until = forms.DateField(label=_("To"), required=False, widget=_date_input())

    def __init__(self, data: QueryDict, *, crews: QuerySet[Crew] | None, starters: QuerySet[Any]) -> None:
        super().__init__(data, auto_id="run-filter-%s")
        self.fields["status"].choices = [("", _("Any status")), *Run.Status.choices]
        if crews is None:  # one crew's history: the crew is chosen already
            del self.fields["crew"]
        else:
            self.fields["crew"].queryset = crews
        self.fields["started_by"].queryset = starters

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and until < since:
            self.add_error("until", _("This day is before the “From” day."))
        return cleaned

    @property
    def active(self) -> bool:
        """Whether any filter was given (the page then offers to clear them)."""
        return any(self.data.get(name) for name in self.fields)

    def filters(self) -> dict[str, Any]:
        """Keyword arguments for ``selectors.run_list``: the valid filters; a bad one is left out
        (and shown as an error next to its input)."""
        self.is_valid()
        cleaned = self.cleaned_data
        crew, starter = cleaned.get("crew"), cleaned.get("started_by")
        filters: dict[str, Any] = {
            "status": cleaned.get("status") or None,
            "started_by_id": starter.pk if starter else None,
            "since": cleaned.get("since"),
            "until": cleaned.get("until"),
        }
        if crew is not None:
            filters["crew_id"] = crew.pk
        return filters

    def query(self) -> str:
        """The filters as given, for page links: ``status=failed&`` (empty when none)."""
        kept = self.data.copy()
        for name in list(kept):
            if name not in self.fields or not kept.get(name):
                del kept[name]
        encoded: str = kept.urlencode()
        return f"{encoded}&" if encoded else ""
