"""Counts written with the language's thousands separator: ``{% load site_numbers %}{{ n|grouped }}``."""

from __future__ import annotations

from typing import Any

from django import template

from planner_site.templatetags.money import grouped as _grouped

register = template.Library()


@register.filter(is_safe=False)
def grouped(value: Any) -> str:
    try:
        return _grouped(int(value))
    except (TypeError, ValueError):
        return ""
