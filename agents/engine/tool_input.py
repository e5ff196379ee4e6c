"""What a model wrote for a tool, read tolerantly: its name matched (exact, then ignoring case and
spacing, then the closest), and its arguments parsed into a dict (JSON first, then ``json_repair``
for fences, prose, quotes, trailing commas, Python's words, broken strings and cut-off objects).
The catalogue is ``tools``.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

import json_repair

ToolArgs = dict[str, Any]


class ToolInputError(ValueError):
    """Arguments that cannot be parsed into a JSON object or do not match the tool's schema."""



_NAME_JUNK = re.compile(r"[\s_\-]+")


def _normalise_name(name: str) -> str:
    return _NAME_JUNK.sub("_", name.strip().strip("*`'\"").strip().lower()).strip("_")


def match_tool_name(name: str, candidates: Sequence[str], *, cutoff: float = 0.85) -> str | None:
    """Exact name, else the same name ignoring case and spaces, else the closest above ``cutoff``."""
    if name in candidates:
        return name
    wanted = _normalise_name(name)
    if not wanted:
        return None
    normalised = {_normalise_name(c): c for c in candidates}
    if wanted in normalised:
        return normalised[wanted]
    best, best_ratio = None, cutoff
    for norm, original in normalised.items():
        ratio = difflib.SequenceMatcher(None, wanted, norm).ratio()
        if ratio > best_ratio:
            best, best_ratio = original, ratio
    return best


_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def parse_tool_input(raw: str | ToolArgs | None) -> ToolArgs:
    """Arguments as a dict: JSON first, then ``json_repair``; raise ``ToolInputError`` if neither.

    The repair accepts what models commonly produce: code fences, prose around the object,
    single quotes, trailing commas, Python's ``True``/``None`` and JSON's ``true``/``null`` mixed,
    unescaped newlines in strings, missing quotes or brackets, an object cut off at the end.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    text = raw.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = _repair(text)
    if isinstance(value, str) and value.strip().startswith("{"):
        # Some models double-encode the object as a JSON string: "{\"a\": 1}".
        return parse_tool_input(value)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ToolInputError("the input is not a JSON object of named arguments")
    return value


def _repair(text: str) -> Any:
    """The first object ``json_repair`` can mend from an opening brace on (prose before it
    skipped); a bare string or number is no object."""
    start = text.find("{")
    if start != -1:
        try:
            value = json_repair.repair_json(text[start:], return_objects=True, skip_json_loads=True)
        except (ValueError, RecursionError):
            value = None
        # Several objects in a row come back as a list of them: the first one is the input.
        if isinstance(value, list):
            value = next((v for v in value if isinstance(v, dict)), None)
        if isinstance(value, dict) and value:
            return value
    raise ToolInputError("the input is not valid JSON (and could not be repaired)")
