"""Forms of the knowledge pages: add a source (a file or pasted text), correct a memory."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from agents.forms import ServiceErrorsMixin
from knowledge.models import KnowledgeSource


class SourceForm(ServiceErrorsMixin, forms.Form):
    title = forms.CharField(
        label=_("Title"), required=False, max_length=KnowledgeSource._meta.get_field("title").max_length,
        help_text=_("How the prompt names the source. Empty: the file's name."),
    )
    file = forms.FileField(label=_("File"), required=False)
    text = forms.CharField(label=_("Or paste text"), required=False, widget=forms.Textarea(attrs={"rows": 5}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Filled per form, in the reader's language (a lazy string % values is English at import).
        self.fields["file"].help_text = gettext(
            "Plain text (.txt), Markdown (.md), PDF, CSV or JSON, up to %(mb)s MB."
        ) % {"mb": settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES // (1024 * 1024)}

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("file") and not (data.get("text") or "").strip():
            raise forms.ValidationError(_("Choose a file or paste some text."))
        return data


class MemoryForm(forms.Form):
    text = forms.CharField(label=_("What the crew remembers"), max_length=4_000,
                           widget=forms.Textarea(attrs={"rows": 2}))
