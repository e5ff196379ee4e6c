"""Usage and cost read from the recorded LLM calls: per day, person, crew and model.

The sources are the runs' ``llm.completed`` events: one per LLM call a run made (its own plan
draft included), with the model, tokens and cost of that call and when it finished. A run's
``prompt_tokens``/``completion_tokens``/``cost_usd`` are added in the same statement that stores
each of those events (``crews.bridge.record_event``), so these figures always equal the runs'
totals. And the ``PlanLLMCall`` rows: the calls of plans drafted or regenerated outside a run
("Draft plan", the API), counted for the person who asked, written with the plan's totals.

Days are the site's days (``settings.TIME_ZONE``), as for the daily budgets.
"""

from __future__ import annotations

import math
import zoneinfo
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from crews.models import PlanLLMCall, Run, RunEvent

CHART_WIDTH = 720  # the charts' viewBox; the page scales them to its width
CHART_HEIGHT = 160


def site_zone() -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(settings.TIME_ZONE)


def site_today() -> date:
    return timezone.now().astimezone(site_zone()).date()


def day_start(day: date) -> datetime:
    """The first instant of ``day`` in the site's time zone."""
    return datetime.combine(day, time.min, tzinfo=site_zone())


@dataclass
class Totals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Decimal = Decimal(0)
    calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, prompt: int, completion: int, cost: Decimal) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cost_usd += cost
        self.calls += 1


@dataclass
class Row(Totals):
    """One line of a breakdown: a day, a person, a crew or a model."""

    key: Any = None
    label: str = ""
    user_id: int | None = None


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    day: date
    value: Any


@dataclass
class Chart:
    """A bar per day, in the template's SVG coordinates (``CHART_WIDTH`` × ``CHART_HEIGHT``)."""

    bars: list[Bar]
    top: Any  # the value at the top line
    ticks: list[Bar] = field(default_factory=list)  # the days labelled under the bars
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


@dataclass
class Report:
    first: date
    last: date
    totals: Totals
    days: list[Row]
    users: list[Row]
    crews: list[Row]
    models: list[Row]
    cost_chart: Chart
    tokens_chart: Chart


def _runs_in(since: datetime, until: datetime, user_id: int | None) -> Any:
    """The runs that may have made calls in [since, until): started before its end and not
    finished before its start. Narrowing by run first lets the events be found through their
    (run, seq) index instead of a scan of every event."""
    runs = Run.objects.filter(created_at__lt=until).filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
    if user_id is not None:
        runs = runs.filter(created_by_id=user_id)
    return runs.values("pk")


def _calls(since: datetime, until: datetime, user_id: int | None) -> Iterable[tuple[Any, ...]]:
    """Every call in [since, until) as (at, user id, username, crew id, crew name, agent id,
    agent name, model, prompt tokens, completion tokens, cost): the runs' and the drafts'."""
    yield from (
        RunEvent.objects.filter(run__in=_runs_in(since, until, user_id), type="llm.completed",
                                at__gte=since, at__lt=until)
        .order_by()
        .values_list("at", "run__created_by_id", "run__created_by__username", "run__crew_id", "run__crew__name",
                     "run__agent_id", "run__agent__name", "data__model", "data__prompt_tokens",
                     "data__completion_tokens", "data__cost_usd")
        .iterator(chunk_size=2000)
    )
    drafts = PlanLLMCall.objects.filter(at__gte=since, at__lt=until)
    if user_id is not None:
        drafts = drafts.filter(user_id=user_id)
    for at, owner_id, owner, crew_id, crew, model, prompt, completion, cost in (
            drafts.order_by().values_list("at", "user_id", "user__username", "plan__crew_id", "plan__crew__name",
                                          "model", "prompt_tokens", "completion_tokens", "cost_usd")
            .iterator(chunk_size=2000)):
        yield at, owner_id, owner, crew_id, crew, None, None, model, prompt, completion, cost


def _number(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _money(value: Any) -> Decimal:
    # As the run's roll-up adds it (crews.bridge.record_event): Decimal(str(...)).
    try:
        return Decimal(str(value or 0))
    except ArithmeticError:
        return Decimal(0)


def spent_on(*, user_id: int, day: date) -> Decimal:
    """What ``user_id``'s runs and plan drafts spent on LLM calls during ``day`` (the site's day)."""
    since = day_start(day)
    until = day_start(day + timedelta(days=1))
    return sum((_money(call[-1]) for call in _calls(since, until, user_id)), Decimal(0))


def _row(rows: dict[Any, Row], key: Any, label: str, **extra: Any) -> Row:
    row = rows.get(key)
    if row is None:
        row = rows[key] = Row(key=key, label=label, **extra)
    return row


def _nice_top(value: float) -> float:
    """A round number at least ``value`` (1, 2 or 5 times a power of ten) for the top line."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(round(step * power, 10) for step in (1, 2, 5, 10) if step * power >= value * (1 - 1e-9))


def chart(days: list[Row], metric: str) -> Chart:
    """Bars for ``metric`` ("cost_usd" or "tokens") of each day, scaled to the top line."""
    values = [float(getattr(day, metric)) for day in days]
    top = _nice_top(max(values, default=0.0))
    slot = CHART_WIDTH / max(len(days), 1)
    width = max(slot * 0.7, 1.0)
    bars = []
    for index, (day, value) in enumerate(zip(days, values, strict=True)):
        height = round(CHART_HEIGHT * value / top, 2)
        x = round(index * slot + (slot - width) / 2, 2)
        bars.append(Bar(x=x, y=round(CHART_HEIGHT - height, 2), width=round(width, 2), height=height,
                        day=day.key, value=getattr(day, metric)))
    every = max(1, len(bars) // 6)  # about six dates under the chart
    ticks = [bar for index, bar in enumerate(bars) if index % every == 0]
    shown_top: Any = Decimal(str(top)) if metric == "cost_usd" else int(top)
    return Chart(bars=bars, top=shown_top, ticks=ticks)


def usage_report(*, first: date, last: date, user_id: int | None = None) -> Report:
    """Tokens and cost of the calls made from day ``first`` to day ``last`` (both included),
    everyone's or ``user_id``'s, per day (every day, zeros too), person, crew and model."""
    since, until = day_start(first), day_start(last + timedelta(days=1))
    zone = site_zone()
    totals = Totals()
    days = {first + timedelta(days=n): Row(key=first + timedelta(days=n)) for n in range((last - first).days + 1)}
    users: dict[Any, Row] = {}
    crews: dict[Any, Row] = {}
    models: dict[Any, Row] = {}
    for (at, owner_id, owner, crew_id, crew, agent_id, agent, model, prompt, completion, cost) in _calls(
            since, until, user_id):
        usage = (_number(prompt), _number(completion), _money(cost))
        totals.add(*usage)
        day = days.get(at.astimezone(zone).date())
        if day is not None:
            day.add(*usage)
        _row(users, owner_id, owner or "", user_id=owner_id).add(*usage)
        key = ("crew", crew_id) if crew_id else ("agent", agent_id)
        _row(crews, key, crew or agent or "").add(*usage)
        _row(models, model or "", str(model or "")).add(*usage)
    ordered = list(days.values())

    def by_cost(rows: dict[Any, Row]) -> list[Row]:
        return sorted(rows.values(), key=lambda r: (-r.cost_usd, -r.tokens, r.label))

    return Report(
        first=first, last=last, totals=totals, days=ordered, users=by_cost(users), crews=by_cost(crews),
        models=by_cost(models), cost_chart=chart(ordered, "cost_usd"), tokens_chart=chart(ordered, "tokens"),
    )
