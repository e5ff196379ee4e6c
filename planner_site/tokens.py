"""API tokens: created once and shown once; only a hash is stored."""

from __future__ import annotations

import secrets
from typing import Any

from django.utils import timezone

from planner_site.models import ApiToken, hash_token

PREFIX = "cp_"


def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; the raw value is returned here and never again."""
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:10], token_hash=hash_token(raw))
    return token, raw


def user_for_token(raw: str) -> Any | None:
    if not raw.startswith(PREFIX):
        return None
    # The hash is unique: no ordering (the model's is by date) for the one row.
    token = ApiToken.objects.select_related("user").filter(token_hash=hash_token(raw)).order_by().first()
    if token is None or not token.user.is_active:
        return None
    # Touch at most once a minute: a busy client must not write on every request.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user
