"""Roles are groups: admin (keys, models, prompts, users), builder (own crews), viewer (read-only)."""

from __future__ import annotations

from typing import Any

ADMIN = "admin"
BUILDER = "builder"
VIEWER = "viewer"
ROLES = (ADMIN, BUILDER, VIEWER)


def role_of(user: Any) -> str | None:
    if not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return ADMIN
    names = {g.name for g in user.groups.all()}
    for role in ROLES:
        if role in names:
            return role
    return None


def is_admin(user: Any) -> bool:
    return role_of(user) == ADMIN


def can_build(user: Any) -> bool:
    return role_of(user) in (ADMIN, BUILDER)
