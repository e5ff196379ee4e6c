"""The one way to write to the audit log."""

from __future__ import annotations

from typing import Any

from planner_site.models import AuditEvent


def audit(*, actor: Any, action: str, target: Any, **data: Any) -> AuditEvent:
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEvent.objects.create(
        actor=user,
        action=action,
        target_type=target._meta.model_name,
        target_id=str(target.pk),
        data=data,
    )
