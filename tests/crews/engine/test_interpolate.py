"""Crew inputs: the {name} grammar, missing inputs named, JSON braces untouched."""

from __future__ import annotations

import pytest

from crews.engine.interpolate import MissingInput, find_placeholders, interpolate, missing_inputs


def test_placeholders_are_found_in_order_once_and_json_braces_are_text() -> None:
    texts = ['Research {topic} in {current_year}', 'Return {"items": [1, 2]} about {topic} and {a-b_1}']
    assert find_placeholders(texts) == ["topic", "current_year", "a-b_1"]


def test_interpolation_fills_values_once_without_reading_braces_inside_them() -> None:
    out = interpolate('Say {greeting} as {"json": true}', {"greeting": "{topic} is literal"})
    assert out == 'Say {topic} is literal as {"json": true}'


def test_non_text_values_are_written_as_json() -> None:
    assert interpolate("{n} {flag} {items}", {"n": 3, "flag": True, "items": ["a", "b"]}) == '3 true ["a", "b"]'


def test_missing_inputs_are_all_named() -> None:
    with pytest.raises(MissingInput) as exc:
        interpolate("{a} {b} {c}", {"b": "x"})
    assert exc.value.names == ["a", "c"]
    assert str(exc.value) == "missing input: a, c"


def test_empty_values_count_as_missing_for_kickoff_validation() -> None:
    assert missing_inputs(["{a} {b} {c}"], {"a": "x", "b": "", "c": None}) == ["b", "c"]
