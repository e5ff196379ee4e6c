"""Schemas of the usage API (``GET /api/usage``): the usage page's figures as JSON."""

from __future__ import annotations

from datetime import date
from typing import Any

from ninja import Field, Schema

from planner_site.schemas import Id


class UsageTotalsOut(Schema):
    prompt_tokens: int
    completion_tokens: int
    tokens: int = Field(description="Prompt and completion tokens together.")
    cost_usd: float = Field(description="US dollars, as a number (6 decimals).")
    calls: int = Field(description="How many LLM calls.")


class UsageDayOut(UsageTotalsOut):
    day: date = Field(description="A day of the site's time zone; every day of the period is listed.")


class UsageUserOut(UsageTotalsOut):
    user_id: int | None = Field(description="null: a person since deleted.")
    username: str


class UsageCrewOut(UsageTotalsOut):
    crew_id: int | None = Field(description="The crew; null for an agent asked directly.")
    agent_id: int | None = Field(description="The agent asked directly; null for a crew.")
    name: str


class UsageLLMOut(UsageTotalsOut):
    model: str = Field(description="The litellm model string the calls went to.")


class UsageReportOut(Schema):
    first: date = Field(alias="from", description="The period's first day (included).")
    last: date = Field(alias="to", description="The period's last day (included).")
    time_zone: str = Field(description="The site's time zone, in which days begin and end.")
    totals: UsageTotalsOut
    days: list[UsageDayOut]
    users: list[UsageUserOut]
    crews: list[UsageCrewOut]
    llms: list[UsageLLMOut]


def totals_out(row: Any) -> dict[str, Any]:
    """A ``planner_site.usage.Totals`` (or ``Row``) as ``UsageTotalsOut`` takes it."""
    return {"prompt_tokens": row.prompt_tokens, "completion_tokens": row.completion_tokens, "tokens": row.tokens,
            "cost_usd": round(float(row.cost_usd), 6), "calls": row.calls}


EPOCH = date(1970, 1, 1)


class UsageQuery(Schema):
    first: date | None = Field(None, alias="from", ge=EPOCH,
                               description="The first day (included); default: 29 days before `to`.")
    last: date | None = Field(None, alias="to", ge=EPOCH,
                              description="The last day (included), at the latest today; default: today.")
    user_id: Id | None = Field(None, description="Only this person's calls; default: everyone's.")
