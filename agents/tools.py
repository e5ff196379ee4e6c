"""The tool catalogue as the Django side sees it (the tools themselves live in the engine)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.conf import settings


@lru_cache(maxsize=1)
def registry() -> Any:
    from agents.engine.tools import ToolRegistry

    return ToolRegistry(http_allowed_hosts=tuple(settings.PLANNER_HTTP_TOOL_ALLOWED_HOSTS))


def catalogue() -> list[dict[str, Any]]:
    return registry().catalogue()


def catalogue_names() -> list[str]:
    return [t["name"] for t in catalogue()]
