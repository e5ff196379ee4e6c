"""The one way to write to the audit log."""

from __future__ import annotations

from typing import Any

from planner_site.models import AuditEvent
from planner_site.rows import insert_new


def audit(*, actor: Any, action: str, target: Any, **data: Any) -> AuditEvent:
    user = actor if getattr(actor, "is_authenticated", False) else None
    event = AuditEvent(
        actor=user,
        action=action,
        target_type=target._meta.model_name,
        target_id=str(target.pk),
        data=data,
    )
    insert_new([event])  # every kickoff writes one: the INSERT is prepared once
    return event
