"""Admin screens for API tokens (hash only) and the audit log (read-only)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from planner_site.models import ApiToken, AuditEvent


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    exclude = ["token_hash"]

    def has_add_permission(self, request: Any) -> bool:
        return False  # tokens are created by create_api_token or the profile page, shown once


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "action", "target_type", "target_id"]
    list_filter = ["action"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
