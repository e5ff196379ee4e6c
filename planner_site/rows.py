"""New rows written in one prepared INSERT: for the few writes every kickoff makes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field, Model


@functools.cache
def _insert_sql(model: type[Model], vendor: str, rows: int) -> tuple[str, tuple[Field, ...]]:
    """The INSERT of ``rows`` new rows of ``model`` (all its columns but the automatic primary
    key), built once per model, database kind and number of rows."""
    quote = connection.ops.quote_name
    meta = model._meta
    fields = tuple(f for f in meta.concrete_fields if f is not meta.auto_field)
    columns = ", ".join(quote(f.column) for f in fields)
    values = ", ".join([f"({', '.join(['%s'] * len(fields))})"] * rows)
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES {values}"
    if connection.features.can_return_rows_from_bulk_insert:
        sql += f" RETURNING {quote(meta.pk.column)}"
    return sql, fields


def insert_new(objs: Sequence[Model]) -> None:
    """``save()`` (one object) or ``bulk_create()`` for new objects of one model, without the
    ORM building and compiling an InsertQuery on every call (most of their cost).

    Values go through the fields as ``save()`` sends them (``pre_save`` with its
    ``auto_now_add``, then ``get_db_prep_save``: JSON, decimals, datetimes). Sends no signals,
    as ``bulk_create()`` does not: only for models nothing listens to. The primary keys are
    set where the database returns them (SQLite, PostgreSQL), as ``bulk_create()`` sets them.
    """
    if not objs:
        return
    model = type(objs[0])
    meta = model._meta
    if meta.auto_field is None or any(type(obj) is not model for obj in objs):
        raise TypeError("insert_new() takes new objects of one model with an automatic key")
    fields = _insert_sql(model, connection.vendor, 1)[1]
    # As bulk_create does: as many rows a statement as the database takes parameters for.
    size = max(1, connection.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(objs), size):
        _insert_batch(objs[start:start + size])


def _insert_batch(objs: Sequence[Model]) -> None:
    meta = type(objs[0])._meta
    sql, fields = _insert_sql(type(objs[0]), connection.vendor, len(objs))
    params: list[Any] = []
    for obj in objs:
        params += [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        keys = [row[0] for row in cursor.fetchall()] if cursor.description else []
    if len(objs) == 1 and not keys:
        keys = [connection.ops.last_insert_id(cursor, meta.db_table, meta.pk.column)]
    for obj, key in zip(objs, keys or [None] * len(objs), strict=True):
        if key is not None:
            setattr(obj, meta.pk.attname, key)
        obj._state.adding = False
        obj._state.db = connection.alias
