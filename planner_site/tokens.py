"""API tokens: created once and shown once; only a hash is stored."""

from __future__ import annotations

import functools
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from planner_site.models import ApiToken, hash_token

PREFIX = "cp_"


def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; the raw value is returned here and never again."""
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:10], token_hash=hash_token(raw))
    return token, raw


# Stand-ins compiled into the lookup's two reads, then replaced by the hash and the user's id.
_HASH_STAND_IN, _USER_STAND_IN = "token-hash-stand-in", 1_000_001


@functools.cache
def _lookup_sql(vendor: str) -> tuple[str, str]:
    """The ORM's SQL for the token with a hash and for its user, compiled once: compiling was
    most of the lookup's cost, paid by every API request and token websocket."""
    token = ApiToken.objects.filter(token_hash=_HASH_STAND_IN).order_by()  # the hash is unique
    user = get_user_model().objects.filter(pk=_USER_STAND_IN).order_by()
    compiled = []
    for queryset, stand_in in ((token, _HASH_STAND_IN), (user, _USER_STAND_IN)):
        sql, params = queryset.query.get_compiler(using=queryset.db).as_sql()
        if tuple(params) != (stand_in,):  # pragma: no cover - a backend that inlines values
            raise RuntimeError(f"unexpected parameters for a token lookup: {params!r}")
        compiled.append(sql)
    return compiled[0], compiled[1]


def user_for_token(raw: str) -> Any | None:
    if not raw.startswith(PREFIX):
        return None
    token_sql, user_sql = _lookup_sql(connection.vendor)
    token = next(iter(ApiToken.objects.raw(token_sql, [hash_token(raw)])), None)
    if token is None:
        return None
    user = next(iter(get_user_model().objects.raw(user_sql, [token.user_id])), None)
    if user is None or not user.is_active:
        return None
    # Touch at most once a minute: a busy client must not write on every request.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return user
