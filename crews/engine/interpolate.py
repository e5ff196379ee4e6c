"""Crew inputs: find ``{name}`` placeholders and fill them; other braces (JSON) are plain text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")


class MissingInput(KeyError):
    """A placeholder has no value; ``names`` lists every missing one."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names

    def __str__(self) -> str:
        return "missing input: " + ", ".join(self.names)


def find_placeholders(texts: Iterable[str]) -> list[str]:
    """Placeholder names in order of first appearance across ``texts``."""
    seen: dict[str, None] = {}
    for text in texts:
        for match in PLACEHOLDER.finditer(text or ""):
            seen.setdefault(match.group(1), None)
    return list(seen)


def format_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float) or value is None:
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def interpolate(text: str, inputs: Mapping[str, Any]) -> str:
    """Fill every placeholder once; values are data, never re-read as placeholders."""
    missing = [n for n in find_placeholders([text]) if n not in inputs]
    if missing:
        raise MissingInput(missing)
    return PLACEHOLDER.sub(lambda m: format_value(inputs[m.group(1)]), text)


def missing_inputs(texts: Iterable[str], inputs: Mapping[str, Any]) -> list[str]:
    return [n for n in find_placeholders(texts) if n not in inputs or inputs[n] in (None, "")]
