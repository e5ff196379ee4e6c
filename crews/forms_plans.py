"""Forms of the kickoff panel: one text field per input the crew's texts ask for."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms

from agents.forms import ServiceErrorsMixin

# Values longer than this get a text area instead of a one-line field.
LONG_VALUE = 80


class KickoffForm(ServiceErrorsMixin, forms.Form):
    """The crew's inputs, defaults filled in. It only collects text: ``services.inputs_validate``
    decides what is missing, and its errors (``inputs.<name>``) land next to each field."""

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        names: Sequence[str],
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(data, prefix="inputs")
        defaults = defaults or {}
        self.service_error_fields = {f"inputs.{name}": name for name in names}
        for name in names:
            value = defaults.get(name)
            if value is not None and not isinstance(value, str):
                value = json.dumps(value, ensure_ascii=False)
            long = isinstance(value, str) and (len(value) > LONG_VALUE or "\n" in value)
            widget = forms.Textarea(attrs={"rows": 3}) if long else forms.TextInput()
            # Not ``required``: the service says which inputs are missing, in its own words,
            # and a browser tooltip would stop the form before the server could.
            widget.attrs["aria-required"] = "true"
            self.fields[name] = forms.CharField(
                label=f"{{{name}}}", required=False, strip=True, initial=value, widget=widget,
            )

    def inputs(self) -> dict[str, str]:
        """What the person typed, every field included (an emptied one is missing, not default)."""
        return {name: self.cleaned_data.get(name, "") for name in self.fields}
