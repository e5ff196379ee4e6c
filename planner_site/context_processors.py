"""Template context every page needs: whether the offline demo model is the site default."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def site(request: HttpRequest) -> dict[str, Any]:
    from agents import selectors

    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"demo_model_is_default": selectors.demo_model_is_default()}
