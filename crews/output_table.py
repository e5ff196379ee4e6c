"""A task's JSON answer as a table (issue #18): for the run page and the CSV download.

A list of objects is one row per object, its columns the keys in order of first appearance; an
object is one row; a list of plain values, or a plain value, one column named ``value``. Nested
lists and objects are written as JSON text in their cell.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

VALUE = "value"  # the column of plain values


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def table_of(value: Any, *, text_of: Callable[[Any], str] = cell) -> tuple[list[str], list[list[str]]]:
    """The columns and the rows (cells as text, by ``text_of``) of ``value``."""
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(item, dict) for item in items):
        columns: list[str] = []
        for item in items:
            columns += [str(key) for key in item if str(key) not in columns]
        rows = [[text_of(item.get(column)) for column in columns] for item in items]
        return columns, rows
    return [VALUE], [[text_of(item)] for item in items]


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection, OWASP).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """``cell``, with a leading ``'`` on a text a spreadsheet would run; numbers stay numbers."""
    text = cell(value)
    return f"'{text}" if isinstance(value, str) and text.startswith(FORMULA_STARTS) else text


def as_csv(value: Any) -> str:
    """The table as CSV, its texts defused (``csv_cell``); the page's table shows them as they are."""
    columns, rows = table_of(value, text_of=csv_cell)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([csv_cell(column) for column in columns])
    writer.writerows(rows)
    return out.getvalue()


def as_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
