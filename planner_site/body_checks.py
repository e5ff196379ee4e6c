"""What any JSON a client sends must be before a schema or a form reads it (issue #16).

One walk over the parsed value refuses what the database cannot store or the pages cannot show:
a NUL character (PostgreSQL refuses it), a lone surrogate such as ``"\\ud800"`` (not UTF-8: no
database driver, page or socket can encode it), a number beyond a float's range (``1e400`` parses
to infinity, which no JSON column stores) and nesting deeper than ``MAX_DEPTH`` (SQLite's JSON
check stops at 1,000 levels and Python's parser at its recursion limit). The API's parser
(``planner_site.api.JSONParser``) and the forms' JSON fields both use it. The services check the
free-text ceilings here too.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator
from django.db.models import Model, TextField
from django.forms.fields import InvalidJSONInput
from django.utils.translation import gettext as _

# Deeper than any crew input, plan or schema a person writes; far below SQLite's JSON limit.
MAX_DEPTH = 32
# A JSON object of inputs (a crew's default inputs, a kickoff's or a plan draft's inputs).
MAX_INPUT_KEYS = 100
# Only an escape can put a NUL or a lone surrogate in JSON text that decoded as UTF-8.
_RISKY_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
# What may be a number beyond a float's range (1.8e308): an exponent of 10 or more, or 300 digits.
_HUGE_NUMBER = re.compile(r"[eE]\+?0*[1-9][0-9]|[0-9]{300}")


class BodyRefused(ValueError):
    """A part of a JSON body that no field may hold; ``field`` names it (``inputs.topic``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return _("Text may not contain a NUL character (U+0000).")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _("Text may not contain a lone surrogate (such as \\ud800): it is not valid Unicode.")
    return None


def _too_large() -> str:
    return _("A number too large to store (beyond ±1.8e308).")


def _too_deep() -> str:
    return _("Nested deeper than %(n)s levels.") % {"n": MAX_DEPTH}


def _shown(field: str) -> str:
    """A field path as an error names it: at most four parts (a deep path is long and says no more)."""
    parts = field.split(".")
    return ".".join(parts[:4]) if len(parts) > 4 else field


def check_value(data: Any, *, field: str = "") -> None:
    """Raise ``BodyRefused`` for the first string (or key) that is not storable text, the first
    number that is not finite, or the first place nested deeper than ``MAX_DEPTH``. Iterative: a deep value never exhausts the stack."""
    todo: list[tuple[Any, str, int]] = [(data, field, 0)]
    while todo:
        value, path, depth = todo.pop()
        if isinstance(value, str):
            problem = _text_problem(value)
            if problem:
                raise BodyRefused(_shown(path) or "body", problem)
        elif isinstance(value, float) and not math.isfinite(value):
            raise BodyRefused(_shown(path) or "body", _too_large())
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise BodyRefused(_shown(path) or "body", _too_deep())
            if isinstance(value, dict):
                for key, item in value.items():
                    key_text = str(key)
                    problem = _text_problem(key_text)
                    if problem:  # name the object holding the key: never echo the key itself
                        raise BodyRefused(_shown(path) or "body", problem)
                    todo.append((item, f"{path}.{key_text}" if path else key_text, depth + 1))
            else:
                todo.extend(
                    (item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(value)
                )


def _may_need_check(text: str) -> bool:
    """Cheap test first: most bodies have no escapes of concern, no huge numbers and few brackets."""
    return (bool(_RISKY_ESCAPE.search(text)) or text.count("[") + text.count("{") > MAX_DEPTH
            or bool(_HUGE_NUMBER.search(text)))


def loads_checked(text: str, *, field: str = "", **kwargs: Any) -> Any:
    """``json.loads`` that answers ``BodyRefused`` instead of RecursionError, and checks the value.
    A number beyond a float's range (``1e400``: infinity) is refused naming its field; integers
    stay exact, and the schemas keep them strict (``3.0`` is no integer for an integer field)."""
    infinite = False

    def parse_float(number: str) -> float:
        nonlocal infinite
        value = float(number)
        infinite = infinite or not math.isfinite(value)
        return value

    try:
        data = json.loads(text, parse_float=parse_float, **kwargs)
    except RecursionError:
        raise BodyRefused(field or "body", _too_deep()) from None
    if infinite or _may_need_check(text):
        check_value(data, field=field)
    return data


class CheckedJSONField(forms.JSONField):
    """A form's JSON box, refusing what the API refuses (a lone surrogate, NUL, deep nesting)."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip() and _may_need_check(value):
            try:
                loads_checked(value, cls=self.decoder)
            except BodyRefused as exc:
                raise ValidationError(exc.message, code="invalid") from None
            except ValueError:
                pass  # not JSON: the field's own message says so
        return super().to_python(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        # The form shown again keeps the text as typed: read back, it could not be encoded.
        if isinstance(data, str) and not self.disabled and _may_need_check(data):
            try:
                loads_checked(data, cls=self.decoder)
            except BodyRefused:
                return InvalidJSONInput(data)
            except ValueError:
                pass
        return super().bound_data(data, initial)


def check_text_ceilings(instance: Model) -> None:
    """A TextField's ``max_length``, which ``full_clean`` leaves to forms: services check it too,
    so every way in (forms, the API, an import) has the same ceilings (issue #16)."""
    errors: dict[str, list[ValidationError]] = {}
    for field in instance._meta.concrete_fields:
        if isinstance(field, TextField) and field.max_length:
            value = getattr(instance, field.attname)
            if isinstance(value, str):
                try:
                    MaxLengthValidator(field.max_length)(value)
                except ValidationError as exc:
                    errors[field.name] = exc.error_list
    if errors:
        raise ValidationError(errors)
