"""API tokens: created once and shown once; only a hash is stored."""

from __future__ import annotations

import functools
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.utils import timezone

from planner_site.models import ApiToken, hash_token
from planner_site.prepared import column_converters, converted

PREFIX = "cp_"


def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; the raw value is returned here and never again."""
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:10], token_hash=hash_token(raw))
    return token, raw


_HASH_STAND_IN = "token-hash-stand-in"  # compiled into the lookup, then replaced by the hash


@functools.cache
def _lookup_sql(vendor: str) -> tuple[str, tuple[Any, ...], list[int], list[int]]:
    """The ORM's SQL for the token with a hash and its user, compiled once (compiling was most
    of the lookup's cost, paid by every API request and token websocket); its columns, and
    which of them are the token's and which the user's."""
    queryset = ApiToken.objects.select_related("user").filter(token_hash=_HASH_STAND_IN).order_by()
    compiler = queryset.query.get_compiler(using=queryset.db)
    sql, params = compiler.as_sql()
    if tuple(params) != (_HASH_STAND_IN,):  # pragma: no cover - a backend that inlines values
        raise RuntimeError(f"unexpected parameters for a token lookup: {params!r}")
    columns = tuple(column for column, _sql, _alias in compiler.select)
    token, user = compiler.klass_info, compiler.klass_info["related_klass_infos"][0]
    return sql, columns, list(token["select_fields"]), list(user["select_fields"])


def _from_row(model: Any, row: list[Any], columns: tuple[Any, ...], indexes: list[int], db: Any) -> Any:
    """The model built from its columns of ``row``, converted as the ORM converts them."""
    values = converted(db, row, column_converters(db, "token lookup", list(columns)))
    return model.from_db(db.alias, [columns[i].target.attname for i in indexes], [values[i] for i in indexes])


def user_for_token(raw: str) -> Any | None:
    if not raw.startswith(PREFIX):
        return None
    sql, columns, token_at, user_at = _lookup_sql(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(sql, [hash_token(raw)])
        row = cursor.fetchone()  # the hash is unique
    if row is None:
        return None
    db = connections[connection.alias]  # the thread's own connection, not the proxy to it
    token = _from_row(ApiToken, row, columns, token_at, db)
    user = _from_row(get_user_model(), row, columns, user_at, db)
    if not user.is_active:
        return None
    # Touch at most once a minute: a busy client must not write on every request.
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return user
