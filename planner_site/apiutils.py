"""Small pieces the API routers share: list pagination and the API's names in error bodies."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _
from ninja import Field, Schema
from ninja.pagination import LimitOffsetPagination

MAX_LIMIT = 500
MAX_OFFSET = 2**62  # LIMIT/OFFSET must fit a 64-bit integer in SQL


class LimitOffset(LimitOffsetPagination):
    """``?limit=&offset=`` → ``{"items": [...], "count": N}`` (API.md, Lists)."""

    class Input(Schema):
        limit: int = Field(100, ge=1, le=MAX_LIMIT, description="At most this many items.")
        offset: int = Field(0, ge=0, le=MAX_OFFSET, description="Skip this many items first.")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_limit=MAX_LIMIT, **kwargs)


@contextmanager
def api_field_names(names: Mapping[str, str]) -> Iterator[None]:
    """Re-raise a Django ``ValidationError`` with the API's field names (``llm`` → ``llm_id``).

    Services report the model's field names; a client only knows the names in API.md.
    """
    try:
        yield
    except ValidationError as exc:
        if not hasattr(exc, "error_dict"):
            raise
        raise ValidationError(
            {names.get(field, field): messages for field, messages in exc.error_dict.items()}
        ) from None


def version_from_if_match(value: str | None) -> int | None:
    """The version number in an ``If-Match`` header: ``3``, ``"3"`` or ``W/"3"``; None if absent.

    Anything else (``*``, a list of tags, a word) is invalid input named after the header.
    """
    if value is None or not value.strip():
        return None
    tag = value.strip()
    tag = tag.removeprefix("W/")
    if len(tag) >= 2 and tag[0] == tag[-1] == '"':
        tag = tag[1:-1]
    if not tag.isascii() or not tag.isdigit() or len(tag) > 18:
        raise ValidationError(
            {"If-Match": [_("Send the version you edited, as a number: If-Match: 3.")]}
        )
    return int(tag)
