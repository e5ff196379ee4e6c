"""Forms of the import page: the project (uploaded or pasted), then a choice per unknown name."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from agents.forms import ServiceErrorsMixin
from agents.models import LLM
from crews.interop import sources


class _MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class _MultipleFileField(forms.FileField):
    """Several files in one input (Django's documented recipe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", _MultipleFileInput(attrs={"accept": ".zip,.yaml,.yml,.jsonc,.json"}))
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        single = super().clean
        if isinstance(data, (list, tuple)):
            return [single(item, initial) for item in data]
        return [single(data, initial)] if data else []


class CrewImportForm(ServiceErrorsMixin, forms.Form):
    """Where the project comes from: new files win, then pasted YAML, then the files kept from an
    earlier upload on this page (``project``, their texts as JSON)."""

    files = _MultipleFileField(
        label=_("Project files"),
        required=False,
        help_text=_("A .zip of a CrewAI project, or its files: agents.yaml and tasks.yaml, or crew.jsonc "
                    "and the agents' .jsonc files. At most 5 MB in all, 256 KB a file."),
    )
    name = forms.CharField(
        label=_("Crew name"), required=False, max_length=100,
        help_text=_("For pasted YAML, which does not name the crew. Empty: “Imported crew”."),
    )
    agents_yaml = forms.CharField(
        label=_("agents.yaml"), required=False, strip=False, widget=forms.Textarea(attrs={"rows": 12}),
    )
    tasks_yaml = forms.CharField(
        label=_("tasks.yaml"), required=False, strip=False, widget=forms.Textarea(attrs={"rows": 12}),
    )
    project = forms.CharField(required=False, widget=forms.HiddenInput)

    def clean_files(self) -> list[Any]:
        """Refused by their size, before anything reads them."""
        uploads = self.cleaned_data["files"]
        if sum(upload.size or 0 for upload in uploads) > sources.MAX_PROJECT_BYTES:
            raise forms.ValidationError(sources.too_large(), code="too_large")
        return uploads

    def pasted(self) -> bool:
        return bool(self.cleaned_data["agents_yaml"].strip() or self.cleaned_data["tasks_yaml"].strip())


def _field_name(kind: str, name: str) -> str:
    """A mapping field's name, from the name it settles: a choice posted for one project's name
    never applies to another name (a project changed between Preview and Import)."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{kind}_{digest}"


class ImportMappingForm(forms.Form):
    """One choice per LLM or tool name this site lacks: one of the site's, or leave it unset."""

    def __init__(
        self,
        data: Mapping[str, Any] | None = None,
        *,
        llm_names: Sequence[str],
        tool_names: Sequence[str],
        llms: Sequence[LLM],
        tools: Sequence[str],
    ) -> None:
        super().__init__(data, prefix="map")
        self.llm_names, self.tool_names = list(llm_names), list(tool_names)
        llm_choices = [("", _("Leave unset (the site's default LLM)")), *((str(llm.pk), llm.name) for llm in llms)]
        tool_choices = [("", _("Leave it out")), *((tool, tool) for tool in tools)]
        for name in self.llm_names:
            self.fields[_field_name("llm", name)] = forms.ChoiceField(
                label=_("LLM “%(name)s”") % {"name": name}, choices=llm_choices, required=False,
            )
        for name in self.tool_names:
            self.fields[_field_name("tool", name)] = forms.ChoiceField(
                label=_("Tool “%(name)s”") % {"name": name}, choices=tool_choices, required=False,
            )

    def answered(self) -> bool:
        """Every name has its choice in the post: the person saw each one (a select always posts)."""
        return self.data is not None and all(self.add_prefix(name) in self.data for name in self.fields)

    def llm_map(self) -> dict[str, int | None]:
        values = {name: self.cleaned_data.get(_field_name("llm", name)) for name in self.llm_names}
        return {name: int(value) if value else None for name, value in values.items()}

    def tool_map(self) -> dict[str, str | None]:
        return {name: self.cleaned_data.get(_field_name("tool", name)) or None for name in self.tool_names}
