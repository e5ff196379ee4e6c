"""Domain errors raised by services and selectors; planner_site/api.py maps them to HTTP once."""

from __future__ import annotations


class DomainError(Exception):
    code = "error"

    def __init__(self, detail: str, *, code: str | None = None, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code:
            self.code = code
        self.field = field


class NotFound(DomainError):
    """Missing, or not the caller's: both look the same from outside."""

    code = "not_found"


class Forbidden(DomainError):
    """The caller's role is too low for this action."""

    code = "forbidden"


class Conflict(DomainError):
    """The action clashes with the current state (a stale version, a finished run, ...)."""

    code = "conflict"


class TooMany(DomainError):
    """Too many requests of this kind in a short time (kickoffs, plan drafts)."""

    code = "rate_limited"
