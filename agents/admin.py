"""Admin screens of the agents app; the LLM key is write-only (only its last characters show)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from agents.forms import LLM_FORM_FIELDS, OneDefaultLLMMixin
from agents.models import LLM, Agent, PlanningConfig, PromptTemplate, PromptTemplateVersion
from agents.services import llm_server_identity
from planner_site.audit import audit


class LLMAdminForm(OneDefaultLLMMixin, forms.ModelForm):
    # render_value=False: the stored key never comes back into the page, not even as ciphertext.
    api_key = forms.CharField(
        label=_("API key"), required=False, widget=forms.PasswordInput(render_value=False),
        help_text=_("Leave empty to keep the current key. Tick 'clear key' to remove it."),
    )
    clear_api_key = forms.BooleanField(label=_("Clear key"), required=False)

    class Meta:
        model = LLM
        fields = LLM_FORM_FIELDS


@admin.register(LLM)
class LLMAdmin(admin.ModelAdmin):
    form = LLMAdminForm
    list_display = ["name", "model", "api_base", "key_tail", "is_default", "builtin"]
    readonly_fields = ["key_tail", "builtin", "capabilities"]
    search_fields = ["name", "model"]

    @admin.display(description=_("key"))
    def key_tail(self, obj: LLM) -> str:
        if not obj.api_key_set:
            return "—"
        return f"••••{obj.api_key_tail}" if obj.api_key_tail else "••••"

    def save_model(self, request: Any, obj: LLM, form: Any, change: bool) -> None:
        if form.cleaned_data.get("clear_api_key"):
            obj.set_api_key("")
            audit(actor=request.user, action="llm.key_cleared", target=obj) if obj.pk else None
        elif form.cleaned_data.get("api_key"):
            obj.set_api_key(form.cleaned_data["api_key"])
        if change and {"model", "api_base"} & set(form.changed_data):
            # Another model or server: what was learned about the old one says nothing about it.
            old = LLM.objects.filter(pk=obj.pk).first()
            if old is None or llm_server_identity(old) != llm_server_identity(obj):
                obj.capabilities = {}
        if obj.is_default:
            LLM.objects.filter(is_default=True).exclude(pk=obj.pk).update(is_default=False)
        super().save_model(request, obj, form, change)
        audit(actor=request.user, action="llm.updated" if change else "llm.created", target=obj)


class PromptTemplateVersionInline(admin.TabularInline):
    model = PromptTemplateVersion
    extra = 0
    readonly_fields = ["number", "text", "created_by", "created_at"]
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False  # new versions come from the prompt editor and API, which validate them


@admin.register(PromptTemplate)
class PromptTemplateAdmin(admin.ModelAdmin):
    # The key as it is, the title in the admin's language: the key field's choices are the
    # engine's English titles.
    list_display = ["key_name", "shown_title"]
    inlines = [PromptTemplateVersionInline]
    # Read-only: the pages show the engine's translated title for every seeded key
    # (``display_title``), so an edited one would show nowhere.
    fields = ["key_name", "title"]
    readonly_fields = ["key_name", "title"]

    def has_add_permission(self, request: Any) -> bool:
        return False  # one template per prompt the engine sends, seeded (agents.services.prompt_seed)

    @admin.display(description=_("key"), ordering="key")
    def key_name(self, obj: PromptTemplate) -> str:
        return obj.key

    @admin.display(description=_("title"), ordering="title")
    def shown_title(self, obj: PromptTemplate) -> str:
        return obj.display_title


class PlanningConfigInline(admin.StackedInline):
    model = PlanningConfig
    extra = 0


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "role", "owner", "llm", "agent_type", "planning"]
    list_filter = ["agent_type", "planning"]
    search_fields = ["name", "role"]
    inlines = [PlanningConfigInline]
