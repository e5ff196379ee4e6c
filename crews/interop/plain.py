"""A parsed project file made plain JSON, or the problems why it cannot be (issue #16).

YAML builds more than JSON holds: numbers and booleans as keys, dates, bytes (``!!binary``), sets
(``!!set``), ``.nan`` and ``.inf``; both formats can spell a NUL or a lone surrogate (``"\\ud800"``)
as an escape. None of these can be stored (the database refuses them, or ``json.dumps`` does),
so right after parsing one iterative walk copies the document, refusing each of them where it was
written. Strings and keys go through the API's own check (``planner_site.body_checks``), and the
same depth limit holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, time
from typing import Any

from django.utils.formats import number_format
from django.utils.translation import gettext as _

from crews.interop.problems import Problem
from planner_site.body_checks import MAX_DEPTH, BodyRefused, check_value

Path = tuple[str | int, ...]

MAX_NODES = 50_000  # values in one file: a crew project holds a few hundred
MAX_PROBLEMS = 20  # enough to correct a file; more would only repeat


def too_deep() -> str:
    return _("Nested deeper than %(n)s levels.") % {"n": MAX_DEPTH}


def too_many() -> str:
    return _("This file holds more than %(n)s values; a crew project holds far fewer.") % {"n": number_format(MAX_NODES, force_grouping=True)}


def key_text(key: Any) -> str:
    """A key as the file wrote it, near enough to find its line (``1``, ``true``, ``2024-01-01``)."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def dotted(path: Path) -> str:
    """A place in a file as problems name it: a deep one shortened (the line says where), and
    ending before any key that is not storable text (it could not be written out)."""
    parts: list[str] = []
    for part in path:
        if isinstance(part, str) and _text_problem(part):
            break
        parts.append(str(part))
    return ".".join(parts[:8]) + (".…" if len(parts) > 8 else "")


def _text_problem(text: str) -> str | None:
    try:
        check_value(text)
    except BodyRefused as exc:
        return exc.message
    return None


def _refusal(value: Any) -> str:
    """Why ``value`` (not a string, number, boolean, null, list or mapping) cannot be kept."""
    if isinstance(value, date | time):
        return _("YAML reads this as a date or time, which JSON has no type for: write it in quotes.")
    if isinstance(value, bytes | bytearray):
        return _("Binary data (!!binary) cannot be kept: give text instead.")
    if isinstance(value, set | frozenset):
        return _("A set (!!set) cannot be kept: give a list instead.")
    if isinstance(value, float):
        return _("Not a number (.nan) and infinity (.inf) are not JSON: give a number.")
    return _("This value is not JSON: give text, a number, true or false, a list or a mapping.")


def plain_json(data: Any, *, file: str, line: Callable[[Path], int | None], problems: list[Problem]) -> Any:
    """``data`` copied as plain JSON (dicts keyed by text, lists, texts, finite numbers, booleans,
    null). Each value that cannot be one adds a Problem at its place (``line`` finds its line);
    the copy is only meaningful when none was added."""
    found: list[Problem] = []

    def refuse(path: Path, message: str) -> None:
        found.append(Problem(file, line(path), dotted(path), message))

    holder: list[Any] = [None]
    todo: list[tuple[Any, Path, int, Any, Any]] = [(data, (), 0, holder, 0)]
    nodes = 0
    while todo and len(found) < MAX_PROBLEMS:
        value, path, depth, parent, slot = todo.pop()
        nodes += 1
        if nodes > MAX_NODES:
            refuse((), too_many())
            break
        if value is None or isinstance(value, bool | int):
            parent[slot] = value
        elif isinstance(value, str):
            problem = _text_problem(value)
            if problem:
                refuse(path, problem)
            parent[slot] = value
        elif isinstance(value, float) and math.isfinite(value):
            parent[slot] = value
        elif isinstance(value, dict | list) and depth >= MAX_DEPTH:
            refuse(path, too_deep())
        elif isinstance(value, dict):
            copy: dict[str, Any] = {}
            parent[slot] = copy
            for key, item in value.items():
                if not isinstance(key, str):
                    refuse((*path, key_text(key)), _("Write this key in quotes: keys are text."))
                    continue
                problem = _text_problem(key)
                if problem:  # named by the mapping holding it: the key itself cannot be written out
                    refuse(path, problem)
                    continue
                copy[key] = None
                todo.append((item, (*path, key), depth + 1, copy, key))
        elif isinstance(value, list):
            items: list[Any] = [None] * len(value)
            parent[slot] = items
            todo.extend((item, (*path, i), depth + 1, items, i) for i, item in enumerate(value))
        else:
            refuse(path, _refusal(value))
    found.sort(key=lambda p: p.line or 0)
    problems += found
    return holder[0]
