"""``usd``: one way to write a cost in US dollars, in Python and templates, in both languages."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.template import Context, Template
from django.utils import translation

from planner_site.templatetags.money import grouped, usd


@pytest.mark.parametrize(
    ("value", "english", "portuguese"),
    [
        (None, "—", "—"),
        (0, "$0.0000", "US$ 0,0000"),
        (0.0123, "$0.0123", "US$ 0,0123"),
        (Decimal("0.012500"), "$0.0125", "US$ 0,0125"),
        (0.99996, "$1.00", "US$ 1,00"),  # rounds to a dollar: written as dollars
        (1234.5, "$1,234.50", "US$ 1.234,50"),
        ("5", "$5.00", "US$ 5,00"),
        ("not a number", "—", "—"),
    ],
)
def test_four_decimals_under_a_dollar_two_above_with_the_languages_separators(value, english, portuguese):
    with translation.override("en"):
        assert usd(value) == english
    with translation.override("pt-br"):
        assert usd(value) == portuguese


def test_the_filter_writes_what_python_writes():
    template = Template("{% load money %}{{ cost|usd }}")
    with translation.override("en"):
        assert template.render(Context({"cost": Decimal("0.0420")})) == "$0.0420"
    with translation.override("pt-br"):
        assert template.render(Context({"cost": 12})) == "US$ 12,00"


def test_grouped_uses_the_languages_thousands_separator():
    with translation.override("en"):
        assert grouped(1234567) == "1,234,567"
    with translation.override("pt-br"):
        assert grouped(1234567) == "1.234.567"
