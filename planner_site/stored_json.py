"""JSON read back from the database in a shape every page, socket and response can encode.

Older rows (and a model server's reply) may hold a lone surrogate such as ``"\\ud800"``: JSON
escapes it, SQLite keeps it, and then no page, websocket frame or HTML sanitizer can encode it
(issue #16: a run's page was a 500 for good). ``StoredJSONField`` turns each one into the text
``\\ud800`` when a row is read, so nothing downstream needs to care.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models

# JSON text can hold a surrogate only as an escape (its UTF-8 bytes would not decode). SQLite
# keeps JSON ASCII-escaped, so every emoji is a pair (``\\ud83d\\ude42``): only a lone one, a high
# escape not followed by a low or a low not preceded by a high, needs the walk (2,000 events with
# emoji read in 21 ms instead of 68).
_HIGH = r"\\u[dD][89abAB][0-9a-fA-F]{2}"
_LOW = r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
# A pair's high must itself be an escape (not the text ``\\ud83d`` after an escaped backslash);
# a false match only costs a walk, a missed one a page that cannot be encoded.
_SURROGATE_ESCAPE = re.compile(rf"{_HIGH}(?!{_LOW})|(?<!(?<!\\){_HIGH}){_LOW}")


def _readable_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def readable(data: Any) -> Any:
    """``data`` with every lone surrogate in its strings and keys written out as ``\\udXXX``.
    Iterative, so stored nesting of any depth is fine; changes containers in place."""
    if isinstance(data, str):
        return _readable_text(data)
    todo = [data]
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            for key, item in list(value.items()):
                if isinstance(item, dict | list):
                    todo.append(item)
                readable_key = _readable_text(key)
                if readable_key != key:
                    del value[key]
                value[readable_key] = _readable_text(item) if isinstance(item, str) else item
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    value[index] = _readable_text(item)
                elif isinstance(item, dict | list):
                    todo.append(item)
    return data


class StoredJSONField(models.JSONField):
    """A ``JSONField`` whose values read back encodable (see the module's docstring).

    Migrations see a plain ``JSONField``: reading is all that differs, the column is the same.
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        data = super().from_db_value(value, expression, connection)
        if isinstance(value, str) and _SURROGATE_ESCAPE.search(value):
            return readable(data)
        return data

    def deconstruct(self) -> tuple[str, str, list[Any], dict[str, Any]]:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
