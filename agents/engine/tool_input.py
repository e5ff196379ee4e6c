"""What a model wrote for a tool, read tolerantly: its name matched (exact, then ignoring case and
spacing, then the closest), and its arguments parsed into a dict (JSON first, then a repair of
fences, prose, quotes, trailing commas and mixed JSON/Python keywords). The catalogue is ``tools``.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

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
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
# A string literal (kept as is) or a bare JSON keyword (turned into its Python spelling).
_JSON_WORDS = re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|\b(true|false|null)\b")
_PY_WORDS = {"true": "True", "false": "False", "null": "None"}


def parse_tool_input(raw: str | ToolArgs | None) -> ToolArgs:
    """Arguments as a dict: JSON first, then a lenient repair; raise ``ToolInputError`` if neither.

    The repair accepts what models commonly produce: code fences, prose around the object,
    single quotes, trailing commas, Python's ``True``/``None`` and JSON's ``true``/``null`` mixed.
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
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        text = text[start : end + 1]
    candidates = [_TRAILING_COMMA.sub(r"\1", text)]
    candidates.append(
        _JSON_WORDS.sub(lambda m: _PY_WORDS[m.group(1)] if m.group(1) else m.group(0), text)
    )
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            pass
        try:
            return ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    raise ToolInputError("the input is not valid JSON (and could not be repaired)")
