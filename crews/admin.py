"""Admin screens of the crews app (runs, events and LLM calls are read-only: they are a record)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _

from crews.models import Crew, Plan, PlanLLMCall, PlanVersion, Run, RunEvent, RunTask, Task


class TaskInline(admin.StackedInline):
    model = Task
    extra = 0
    filter_horizontal = ["context"]


@admin.register(Crew)
class CrewAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "process", "planning", "shared"]
    list_filter = ["process", "planning", "shared"]
    search_fields = ["name"]
    filter_horizontal = ["agents"]
    inlines = [TaskInline]


class PlanVersionInline(admin.TabularInline):
    model = PlanVersion
    extra = 0
    readonly_fields = ["number", "note", "created_by", "created_at"]
    exclude = ["tasks"]  # the tasks it was written for: a version is never edited
    can_delete = False


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["id", "crew", "status", "version", "created_at"]
    list_filter = ["status"]
    inlines = [PlanVersionInline]
    readonly_fields = ["prompt_tokens", "completion_tokens", "cost_usd"]


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


class RunTaskInline(ReadOnlyInline):
    model = RunTask


class RunEventInline(ReadOnlyInline):
    model = RunEvent
    fields = ["seq", "type", "task_id", "step_id", "at"]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "crew", "agent", "status", "created_by", "created_at", "cost_usd"]
    list_filter = ["status"]
    inlines = [RunTaskInline, RunEventInline]

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(PlanLLMCall)
class PlanLLMCallAdmin(admin.ModelAdmin):
    """The calls of plans drafted outside a run: accounting records the usage page and the daily
    budgets add up, so they are shown, never added, changed or deleted here."""

    list_display = ["at", "crew", "user", "model", "purpose", "prompt_tokens", "completion_tokens", "cost_usd"]
    list_filter = ["purpose", "model"]
    list_select_related = ["plan__crew", "user"]
    search_fields = ["plan__crew__name", "user__username", "model"]
    date_hierarchy = "at"

    @admin.display(description=_("crew"), ordering="plan__crew__name")
    def crew(self, obj: PlanLLMCall) -> Any:
        return obj.plan.crew

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    # Deleting stays permitted, so a crew or plan whose drafts made calls can still be deleted
    # in the admin (it checks the permission of every row a delete cascades to); the rows
    # themselves offer no delete: no bulk action, no delete page.
    actions = None

    def delete_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        raise PermissionDenied

    def change_view(self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "show_delete": False})
