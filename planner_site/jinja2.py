"""The Jinja2 environment for the hot fragments (run steps, LLM calls, plan step cards, version
rows): Django's template language took a third of a long run page's time, so these fragments
are Jinja2 macros that the page and the socket both call. Autoescape is on; translations go
through Django's own gettext, read at call time in the active language."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.template import engines
from django.templatetags.static import static
from django.urls import reverse
from django.utils.translation import gettext, ngettext, npgettext, pgettext
from jinja2 import Environment


def environment(**options: Any) -> Environment:
    env = Environment(**{**options, "extensions": [*options.get("extensions", ()), "jinja2.ext.i18n"]})
    env.install_gettext_callables(gettext, ngettext, newstyle=True, pgettext=pgettext, npgettext=npgettext)  # type: ignore[attr-defined]
    env.globals.update(url=lambda name, *args: reverse(name, args=args), static=static)
    return env


@cache
def macros(name: str) -> Any:
    """A Jinja2 template's macros as Python callables (``macros("crews/run_parts.jinja").step``),
    compiled once per process: each returns escaped markup (``Markup``, safe for Django too)."""
    return engines["jinja2"].env.get_template(name).module  # type: ignore[attr-defined]
