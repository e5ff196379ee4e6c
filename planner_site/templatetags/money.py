"""Costs in US dollars, written the same way on every page: ``{% load money %}{{ cost|usd }}``.

The rule: four decimals under one dollar (LLM calls cost fractions of a cent: ``$0.0123``), two
decimals with grouped thousands from one dollar on (``$1,234.50``), and "—" for an unknown cost.
The amount uses the language's separators and the currency sign comes from the translation of
``$%(amount)s``: ``$0.0123`` in English, ``US$ 0,0123`` in Brazilian Portuguese (where "$"
alone would read as reais). Python code (the run page builds thousands of these) calls ``usd``
directly.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.utils.formats import get_format
from django.utils.translation import get_language
from django.utils.translation import gettext as _

register = template.Library()

# Per language: decimal separator, thousands separator, the "$%(amount)s" pattern. Looked up
# once: number_format() reads the format settings again on every call.
_STYLES: dict[str, tuple[str, str, str]] = {}


def _style() -> tuple[str, str, str]:
    language = get_language() or ""
    style = _STYLES.get(language)
    if style is None:
        style = _STYLES[language] = (
            str(get_format("DECIMAL_SEPARATOR")), str(get_format("THOUSAND_SEPARATOR")), _("$%(amount)s"),
        )
    return style


def grouped(number: int) -> str:
    """An integer with the language's thousands separator (``12,345``; ``12.345`` in pt-BR)."""
    return f"{number:,}".replace(",", _style()[1])


@register.filter(is_safe=False)
def usd(value: Any) -> str:
    """A cost in US dollars (the module docstring gives the rule); "—" when it is unknown."""
    if value is None or value == "":
        return "—"
    try:
        amount = value if isinstance(value, (float, int, Decimal)) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        return "—"
    decimal, thousands, pattern = _style()
    text = f"{amount:,.4f}" if abs(round(amount, 4)) < 1 else f"{amount:,.2f}"
    text = text.replace(",", "\0").replace(".", decimal).replace("\0", thousands)
    return pattern % {"amount": text}
