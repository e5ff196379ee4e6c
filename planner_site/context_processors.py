"""Template context every page needs: whether the offline demo model is the site default, and
whether the person has the site's admin role (``roles.is_admin``: the LLM pages need it, so
their links show only to admins)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def site(request: HttpRequest) -> dict[str, Any]:
    from agents import selectors
    from planner_site.roles import is_admin

    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    user = request.user
    # A callable: the template asks only where a role-gated link is (the role reads the groups).
    return {"demo_model_is_default": selectors.demo_model_is_default(), "user_is_admin": lambda: is_admin(user)}
