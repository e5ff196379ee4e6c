"""Regular expressions on LLM text (issue #18): a guardrail's ``pattern`` and a schema's, run with
the ``regex`` engine and a time limit, since they run in the engine's event loop on whatever the
model wrote, and a pattern that backtracks (``^(a|aa)+$``) would otherwise stall every run."""

from __future__ import annotations

import re
from typing import Any

import regex

TIMEOUT = 0.5  # seconds one search may take
MAX_SEARCHED = 100_000  # characters a pattern is searched in; a longer text is not searched


class PatternTooSlow(Exception):
    """The search took longer than ``TIMEOUT``, or the text is longer than ``MAX_SEARCHED``."""


def search(pattern: str, text: str, timeout: float = TIMEOUT) -> bool:
    """Whether ``pattern`` is found in ``text``; ``PatternTooSlow`` when it cannot say within
    ``timeout`` seconds (at most ``TIMEOUT``).

    ``regex.error`` for a pattern it does not read (patterns are checked when a task is saved).
    """
    if len(text) > MAX_SEARCHED or timeout <= 0:
        raise PatternTooSlow
    try:
        return regex.search(pattern, text, timeout=min(timeout, TIMEOUT)) is not None
    except TimeoutError as exc:
        raise PatternTooSlow from exc


def compile_error(pattern: str) -> str | None:
    """Why ``pattern`` is not a regular expression the engine runs, or ``None``."""
    try:
        regex.compile(pattern)
    except regex.error as exc:
        return str(exc)
    return None


def repeats_a_repetition(pattern: str) -> bool:
    """Whether ``pattern`` repeats without limit a group made only of repeats, one of them without
    limit (``(a+)+``, ``(\\w+\\s?)*``): the plain case of a pattern that backtracks for ever on a
    near miss. ``[a-z]+(,[a-z]+)*`` passes (the comma anchors each round), as do possessive and
    atomic repeats and a pattern Python's own parser does not read; the time limit holds anyway."""
    from re import _constants as c  # type: ignore[attr-defined]
    from re import _parser  # type: ignore[attr-defined]

    repeats = (c.MAX_REPEAT, c.MIN_REPEAT)

    def only_repeats(items: Any) -> bool:
        items = list(items)
        while len(items) == 1 and items[0][0] is c.SUBPATTERN:
            items = list(items[0][1][-1])
        return bool(items) and all(op in repeats for op, _ in items) and any(
            av[1] == c.MAXREPEAT for _, av in items)

    try:
        parsed = _parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    stack: list[Any] = [parsed]
    while stack:
        for op, av in stack.pop():
            if op in repeats:
                if av[1] == c.MAXREPEAT and only_repeats(av[2]):
                    return True
                stack.append(av[2])
            elif op is c.SUBPATTERN:
                stack.append(av[-1])
            elif op is c.BRANCH:
                stack.extend(av[1])
            elif op in (c.ASSERT, c.ASSERT_NOT):
                stack.append(av[1])
            elif op is c.GROUPREF_EXISTS:
                stack.extend(branch for branch in av[1:] if branch is not None)
    return False
