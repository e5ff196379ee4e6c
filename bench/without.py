"""A process with one hand-made piece switched off, to measure what the piece buys (``--ab``).

    .venv/bin/python bench/without.py writer-lock manage.py serve --port 8001

runs ``manage.py serve --port 8001`` as usual but for the piece. bench/runs.py ``--ab PIECE``
starts its second server this way.

- ``prepared``: ``planner_site.prepared.Prepared`` compiles its queryset on every call, as the
  plain queryset would (the same SQL and parameters, without the compiled-once cache).
- ``writer-lock``: Django's own SQLite backend instead of ``planner_site.sqlite`` (writers left to
  SQLite's busy handler, not queued in Python).
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

import _common  # noqa: F401 - puts the repository on sys.path

PIECES = ("prepared", "writer-lock")


def switch_off(piece: str) -> None:
    """Before Django is set up: the process runs without ``piece``."""
    if not os.environ.get("PLANNER_VAR_DIR"):  # never the database of `make run`
        raise SystemExit("bench/without.py: set PLANNER_VAR_DIR to a throwaway folder first")
    if piece == "prepared":
        from planner_site.prepared import Prepared

        def compiled_each_time(self: Prepared, using: str = "default", **values: Any) -> Any:
            return self._build(**values).query.get_compiler(using=using).as_sql()

        Prepared.sql = compiled_each_time  # type: ignore[method-assign]
    elif piece == "writer-lock":
        from planner_site import settings

        for database in settings.DATABASES.values():
            if database["ENGINE"] == "planner_site.sqlite":
                database["ENGINE"] = "django.db.backends.sqlite3"
    else:
        raise SystemExit(f"unknown piece {piece!r}; known: {', '.join(PIECES)}")


if __name__ == "__main__":
    switch_off(sys.argv[1])
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
