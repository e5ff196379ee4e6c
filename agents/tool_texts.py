"""The catalogue tools' descriptions as people read them, translatable, keyed by tool name.

The engine's descriptions (``agents.engine.tools``) are what the model reads; the engine never
imports Django, so they cannot be marked for translation there. Each msgid here is the engine's
English text to the letter (tests/agents/test_tool_texts.py checks it), so English pages read as
before and a changed engine text shows up as a stale entry. A tool the engine gains before this
table does shows its English description.
"""

from __future__ import annotations

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

DESCRIPTIONS: dict[str, Promise] = {
    "calculator": _(
        "Evaluate an arithmetic expression exactly: + - * / // % ** and parentheses, and the "
        "functions abs, ceil, cos, exp, floor, log, log10, log2, max, min, round, sin, sqrt, tan "
        "with constants pi, e and tau. Use it for any arithmetic instead of computing in your head."
    ),
    "current_datetime": _("The current date, time and weekday in a time zone (default UTC)."),
    "text_stats": _(
        "Count the characters, words, sentences, lines and paragraphs of a text and estimate its "
        "reading time."
    ),
    "http_get": _(
        "Fetch a web page or API response with a read-only HTTP GET and return its text. Only "
        "hosts the administrator allowed can be reached."
    ),
}


def tool_description(name: str, english: str) -> str:
    """What a page shows for tool ``name``: its translated description, else the engine's."""
    text = DESCRIPTIONS.get(name)
    return str(text) if text is not None else english
