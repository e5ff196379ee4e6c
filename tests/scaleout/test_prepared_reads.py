"""Every read compiled once (``planner_site.prepared``) compiles on PostgreSQL too.

A stand-in value beyond a 32-bit column's range made Django compile a comparison to nothing
(EmptyResultSet) there, and the backend hands such a column's value back as psycopg's Int4:
SQLite, the unit suite's database, shows neither.
"""

from __future__ import annotations

import gc
import importlib

import pytest

from planner_site.prepared import Prepared

MODULES = ("crews.consumers", "crews.runs", "crews.runner", "crews.plans", "crews.selectors", "crews.bridge",
           "agents.selectors", "agents.bridge", "knowledge.retrieval", "knowledge.selectors",
           "planner_site.worker", "planner_site.budgets", "planner_site.tokens")


@pytest.mark.django_db
def test_every_prepared_read_compiles_on_postgresql() -> None:
    from agents.bridge import _llm_rows_read
    from knowledge.retrieval import _start_read

    for name in MODULES:
        importlib.import_module(name)
    reads = [o for o in gc.get_objects() if isinstance(o, Prepared)]
    reads += [_start_read(0), _start_read(2), _llm_rows_read(0), _llm_rows_read(3)]  # one per count
    assert len(reads) > 20
    for read in reads:
        sql, params = read.sql(**read._stand_ins)  # in the test's transaction: select_for_update too
        assert sql.startswith("SELECT") and len(params) >= len(read._stand_ins), (read._build, sql)
