"""``prompts_used``: the prompt versions a run recorded at kickoff (its snapshot's ``prompts``)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from agents.engine.prompts import DEFAULTS
from agents.prompt_purposes import title_of

register = template.Library()


@register.simple_tag
def prompts_used(snapshot: Any) -> list[dict[str, Any]]:
    """Each recorded prompt with its title (in the active language), version and page, by title;
    [] for a run from before runs recorded them."""
    recorded = (snapshot or {}).get("prompts") if isinstance(snapshot, dict) else None
    if not isinstance(recorded, dict):
        return []
    used = [
        {"key": key, "title": title_of(key, DEFAULTS[key].title if key in DEFAULTS else key), "number": number,
         "url": reverse("agents:prompt-version", args=[key, number])}
        for key, number in recorded.items() if isinstance(number, int)
    ]
    return sorted(used, key=lambda p: str(p["title"]))
