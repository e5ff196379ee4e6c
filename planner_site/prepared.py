"""Querysets compiled once, run many times with other values: for the reads every run makes.

Bench (bench/runs.py --ab prepared, 2026-12-02): server CPU per run in (c) 154 → 133 ms, −14 %.

Compiling a queryset to SQL is most of the CPU of a small read (the ORM resolves lookups, joins
and ordering each time), and some reads are made by every kickoff, run and claim. ``Prepared``
builds its queryset once per database vendor with *stand-in* values, compiles it, finds each
stand-in among the parameters, and from then on swaps in the real values: the same SQL and the
same parameters as the queryset would give, without compiling it again. Use it only where a
benchmark shows the read is hot; a queryset is clearer everywhere else.

    run_by_id = Prepared(lambda run: Run.objects.filter(pk=run), run=STAND_IN_ID)
    run = run_by_id.one(Run, run=42)           # a model instance, or None
    rows = run_by_id.rows(run=42)              # tuples, for a values_list() queryset

A stand-in must be a value the query would not contain otherwise (an unlikely id such as
``STAND_IN_ID``), and must come back among the parameters as it went in: a backend that writes
values into the SQL itself fails loudly at the first compile, never silently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)

# Values no real query holds: ids far beyond any table's, a moment no clock shows.
STAND_IN_ID = 987_654_321_001
STAND_IN_ID_2 = 987_654_321_002
STAND_IN_TIME = datetime(2001, 2, 3, 4, 5, 6, 789, tzinfo=UTC)
# For a 32-bit integer column that is not an id (a version number, an event's seq): Django
# compiles a comparison with a value beyond the column's range on PostgreSQL to no SQL at all
# (EmptyResultSet), so its stand-in stays within the range.
STAND_IN_NUMBER = 2_147_480_001


class Prepared:
    def __init__(self, build: Callable[..., QuerySet[Any]], **stand_ins: Any) -> None:
        self._build = build
        self._stand_ins = stand_ins
        self._compiled: dict[str, tuple[str, list[Any], dict[int, str]]] = {}
        self._lock = threading.Lock()
        # Per database alias: how to make instances of the queryset's model straight from its
        # rows (its columns' converters), when it selects just that model's columns in order;
        # None when it selects anything else (``all`` then leaves it to a raw queryset).
        self._making: dict[tuple[str, type[Model]], _Maker | None] = {}

    def sql(self, using: str = "default", **values: Any) -> tuple[str, list[Any]]:
        """The SQL and parameters of ``build(**values)`` on the database ``using``."""
        values = _within_64_bits(values)
        if values.keys() != self._stand_ins.keys():
            raise TypeError(f"expected values for {sorted(self._stand_ins)}, got {sorted(values)}")
        connection = connections[using]
        compiled = self._compiled.get(connection.vendor)
        if compiled is None:
            with self._lock:
                compiled = self._compiled[connection.vendor] = self._compile(using)
        sql, params, slots = compiled
        params = list(params)
        for index, name in slots.items():
            params[index] = self._prep(values[name], connection)
        return sql, params

    def rows(self, using: str = "default", **values: Any) -> list[tuple[Any, ...]]:
        if _matches_nothing(values):
            return []
        sql, params = self.sql(using, **values)
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def all(self, model: type[M], using: str = "default", **values: Any) -> list[M]:
        """Instances of ``model`` (the queryset's own), as ``list(queryset)`` gives them.

        A raw queryset finds its columns' models, order and converters anew for every query,
        about half the CPU of these small reads (the kickoff's, #20): for a queryset of the
        model's own columns in order, the converters are found once per database instead.
        """
        if _matches_nothing(values):
            return []
        sql, params = self.sql(using, **values)
        key = (using, model)
        if key not in self._making:
            self._making[key] = _Maker.of(self._build(**self._stand_ins), model, using)
        maker = self._making[key]
        if maker is None:
            return list(model.objects.raw(sql, params).using(using))
        with connections[using].cursor() as cursor:
            cursor.execute(sql, params)
            return [maker.make(row) for row in cursor.fetchall()]

    def one(self, model: type[M], using: str = "default", **values: Any) -> M | None:
        found = self.all(model, using, **values)
        return found[0] if found else None

    def _compile(self, using: str) -> tuple[str, list[Any], dict[int, str]]:
        connection = connections[using]
        queryset = self._build(**self._stand_ins)
        sql, params = queryset.query.get_compiler(using=using).as_sql()
        params = list(params)
        slots: dict[int, str] = {}
        for name, stand_in in self._stand_ins.items():
            prepared = self._prep(stand_in, connection)
            # isinstance: PostgreSQL's backend hands a 32-bit column's value back as psycopg's
            # Int4 (an int); the real value then goes in as a plain int, as the ORM would send
            # one beyond that range.
            found = [i for i, p in enumerate(params) if isinstance(p, type(prepared)) and p == prepared]
            if not found:
                raise RuntimeError(
                    f"stand-in {name}={stand_in!r} is not among the parameters {params!r}"
                )
            slots.update(dict.fromkeys(found, name))
        return sql, params, slots

    @staticmethod
    def _prep(value: Any, connection: Any) -> Any:
        """A value as the backend's parameters hold it (datetimes are adapted by the backend)."""
        if isinstance(value, datetime):
            return connection.ops.adapt_datetimefield_value(value)
        return value


def column_converters(db: Any, key: Any, columns: list[Any]) -> list[tuple[int, list[Any], Any]]:
    """The converters of ``columns`` (index, converters, column, for those that have any) on the
    connection ``db``, as the ORM finds them for every query: found once per connection and
    ``key``, and kept on the connection itself, since they hold its ``ops`` (a table keyed by the
    connection would keep every thread's connection alive)."""
    kept = db.__dict__.setdefault("_planner_converters", {})
    found = kept.get(key)
    if found is None:
        found = kept[key] = [
            (i, converters, column) for i, column in enumerate(columns)
            if (converters := db.ops.get_db_converters(column) + column.get_db_converters(db))
        ]
    return found


def converted(db: Any, row: Any, converters: list[tuple[int, list[Any], Any]]) -> list[Any]:
    """``row``'s values converted as the ORM converts them (``column_converters``)."""
    values = list(row)
    for i, convert, column in converters:
        value = values[i]
        for one in convert:
            value = one(value, column, db)
        values[i] = value
    return values


class _Maker:
    """Instances of a model from rows of all its columns in order, converted as the ORM does."""

    def __init__(self, model: type[Model], using: str) -> None:
        self.model, self.using = model, using
        self.columns = [field.get_col(model._meta.db_table) for field in model._meta.concrete_fields]

    @classmethod
    def of(cls, queryset: QuerySet[Any], model: type[Model], using: str) -> _Maker | None:
        """The maker for ``queryset``'s rows, or None unless it selects exactly ``model``'s
        concrete columns, in order, and nothing else (no related rows, annotations, extras)."""
        query = queryset.query
        if (queryset.model is not model or query.select_related or query.annotation_select or query.extra_select
                or query.deferred_loading[0] or not query.default_cols or query.values_select or query.combinator
                or query.distinct):  # DISTINCT selects its ORDER BY columns too
            return None
        return cls(model, using)

    def make(self, row: tuple[Any, ...]) -> Model:
        if len(row) != len(self.columns):  # a shape ``of`` did not foresee
            raise RuntimeError(f"{self.model.__name__}: a row of {len(row)} columns, not all of them")
        db = connections[self.using]
        values = converted(db, row, column_converters(db, ("model", self.model), self.columns))
        return self.model.from_db(self.using, None, values)


_LOWEST = -(2**63)


def _matches_nothing(values: dict[str, Any]) -> bool:
    """An integer beyond 64 bits would make a driver raise (SQLite's OverflowError, a 500 for
    /api/crews/<huge id>/kickoff; issue #16). One above them is an id that cannot exist: it matches
    no row, as an id or as a lower bound (``pk > after``), the ORM answers so too. One below them
    is no such case (``after=-10**30`` is every row): ``_within_64_bits`` raises it to the lowest
    64-bit integer, which compares with every stored id as it does. The reads compare ids by
    equality or as lower bounds; an upper bound beyond 64 bits would need the same raising."""
    return any(type(v) is int and v >= 2**63 for v in values.values())


def _within_64_bits(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _LOWEST if type(v) is int and v < _LOWEST else v for k, v in values.items()}
