"""Every prompt the engine sends: its key, the placeholders it offers, and its default text
(``DEFAULTS``, kept as data in ``agents.engine.prompt_texts``).

The Django side seeds ``PromptTemplate`` rows from ``DEFAULTS`` and hands the engine a
``PromptBook`` with the current versions; the engine never hard-codes prompt text elsewhere.
Templates use ``{name}`` placeholders; literal braces are written ``{{`` and ``}}``. Values are
inserted as data: braces inside a value are never read as placeholders.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping

from agents.engine.prompt_texts import DEFAULTS, PromptDef

__all__ = ["DEFAULTS", "PromptBook", "PromptDef", "PromptError", "parse_placeholders", "render",
           "unknown_placeholders", "validate_template"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")


class PromptError(ValueError):
    """A template is malformed or uses a placeholder its key does not offer."""


def parse_placeholders(text: str) -> list[str]:
    """Placeholders in ``text`` in order of appearance; raises on an unbalanced brace."""
    names: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise PromptError(
                f"unbalanced brace at character {match.start() + 1}: write {{{{ or }}}} for a literal brace"
            )
        names.append(match.group(1))
    return names


def unknown_placeholders(text: str, allowed: Iterable[str]) -> list[str]:
    allowed_set = set(allowed)
    seen: list[str] = []
    for name in parse_placeholders(text):
        if name not in allowed_set and name not in seen:
            seen.append(name)
    return seen


@functools.lru_cache(maxsize=512)
def _parts(text: str) -> tuple[tuple[str, bool], ...]:
    """``text`` cut into literal pieces and placeholder names, ``(piece, is_name)``, once per text:
    a run renders the same few templates thousands of times."""
    parts: list[tuple[str, bool]] = []
    literal: list[str] = []
    end = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[end:match.start()])
        end = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            literal.append(token[0])
            continue
        name = match.group(1)
        if name is None:
            raise PromptError(f"unbalanced brace at character {match.start() + 1}")
        parts.append(("".join(literal), False))
        literal = []
        parts.append((name, True))
    literal.append(text[end:])
    parts.append(("".join(literal), False))
    return tuple(p for p in parts if p[1] or p[0])


def render(text: str, values: Mapping[str, object]) -> str:
    """Fill placeholders once, left to right; unknown ones raise ``PromptError``."""
    out: list[str] = []
    for piece, is_name in _parts(text):
        if not is_name:
            out.append(piece)
        elif piece in values:
            out.append(str(values[piece]))
        else:
            raise PromptError(f"unknown placeholder {{{piece}}}")
    return "".join(out)


class PromptBook:
    """Current prompt texts by key; falls back to the defaults for keys not given."""

    def __init__(self, overrides: Mapping[str, str] | None = None) -> None:
        self._texts = {key: d.text for key, d in DEFAULTS.items()}
        if overrides:
            self._texts.update(overrides)

    def text(self, key: str) -> str:
        return self._texts[key]

    def render(self, key: str, **values: object) -> str:
        # Values a template does not offer are ignored (callers pass a common set).
        allowed = DEFAULTS[key].placeholders
        out: list[str] = []
        for piece, is_name in _parts(self._texts[key]):
            if not is_name:
                out.append(piece)
            elif piece in values and piece in allowed:
                out.append(str(values[piece]))
            else:
                raise PromptError(f"unknown placeholder {{{piece}}}")
        return "".join(out)


def validate_template(key: str, text: str) -> None:
    """Raise ``PromptError`` naming the first problem of ``text`` as the template for ``key``."""
    if key not in DEFAULTS:
        raise PromptError(f"unknown prompt key {key!r}")
    bad = unknown_placeholders(text, DEFAULTS[key].placeholders)
    if bad:
        offered = ", ".join("{" + p + "}" for p in DEFAULTS[key].placeholders) or "none"
        raise PromptError(f"placeholder {{{bad[0]}}} is not offered by {key!r} (offered: {offered})")
