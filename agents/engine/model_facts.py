"""What litellm's bundled model map says of a model (prices, tool calling), read without litellm.

Bench: ``bench/engine.py`` prints a worker's RSS with and without litellm loaded (issue #20: a
worker whose LLMs all take the direct path, ``agents.engine.wire``, never imports it: ~230 MiB
less, no 2-4 s import, no 0.5 s full collections). The map is the JSON file litellm ships and
loads itself under ``LITELLM_LOCAL_MODEL_COST_MAP``; only ``openai/…`` names are looked up here,
the way litellm does for that provider (the name without its prefix). Every other provider's
facts still come from litellm.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

PREFIX = "openai/"


@functools.cache
def _entries() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"
    try:
        with path.open(encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def entry(model: str) -> dict[str, Any] | None:
    """The map's entry for an ``openai/<name>`` model, or None (another provider, or unknown)."""
    if not model.startswith(PREFIX):
        return None
    found = _entries().get(model[len(PREFIX):]) or _entries().get(model)
    if not isinstance(found, dict) or found.get("litellm_provider") not in ("openai", "text-completion-openai"):
        return None
    return found


def prices(model: str) -> tuple[float, float] | None:
    """Per-token (input, output) prices of an ``openai/<name>`` model; None when not in the map."""
    found = entry(model)
    if found is None or "input_cost_per_token" not in found:
        return None
    return float(found.get("input_cost_per_token") or 0.0), float(found.get("output_cost_per_token") or 0.0)


def supports_function_calling(model: str) -> bool:
    found = entry(model)
    return bool(found and found.get("supports_function_calling"))
