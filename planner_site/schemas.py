"""Schemas every API router shares: the error body of API.md and the responses that use it."""

from __future__ import annotations

from typing import Annotated, Any

from django.db.models import Model
from ninja import Field, Schema
from pydantic import StringConstraints

# Every id fits a 64-bit signed integer; a larger number is bad input, not a database error.
MAX_ID = 2**63 - 1
Id = Annotated[int, Field(ge=1, le=MAX_ID)]


def model_text(model: type[Model], name: str, *, trim: bool = False) -> Any:
    """A body's text field with its model field's ceiling (one source: the model), and a floor of
    one character where the model does not allow it blank; ``trim`` strips spaces first (names)."""
    field = model._meta.get_field(name)
    return Annotated[
        str,
        StringConstraints(
            strip_whitespace=trim or None,
            min_length=None if field.blank else 1,
            max_length=field.max_length,
        ),
    ]


class FieldErrorOut(Schema):
    field: str = Field(description="The input that is wrong, as the API names it (a.b for nested).")
    message: str


class ErrorOut(Schema):
    detail: str = Field(description="One clear sentence.")
    code: str = Field(
        description="snake_case, stable: invalid, not_found, forbidden, conflict, ..."
    )
    errors: list[FieldErrorOut] = Field(default_factory=list)


# Documented on every operation that needs auth; 404/409/422 are added where they can happen.
AUTH_ERRORS: dict[int, type[Schema]] = {401: ErrorOut, 403: ErrorOut}


def errors(*codes: int) -> dict[int, type[Schema]]:
    """The error responses of one operation, for the OpenAPI document."""
    return {**AUTH_ERRORS, **{code: ErrorOut for code in codes}}
