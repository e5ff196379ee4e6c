"""bench/ui.py ``--ab``: the rows a hand-made piece speeds up, timed again without the piece."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ui_data import Data
from ui_measure import Scenario

PIECES = ("reversing", "diagram")


@contextmanager
def swapped(target: Any, name: str, value: Any) -> Iterator[None]:
    """``target.name`` is ``value`` for the duration: a piece switched off for one request."""
    kept = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, kept)


def without_rows(piece: str, scenarios: list[Scenario], data: Data) -> list[Scenario]:
    """The rows a piece speeds up, once more with the piece switched off around each request.

    reversing: the run page's step-result and LLM-call URLs from ``reverse()`` each; the plan
    editor's step links cannot be switched off without another template, so its row adds what
    ``{% url %}`` per link would cost: one ``reverse()`` per card for each of its four links."""
    from django.urls import reverse

    import crews.run_view.state as state
    from crews import plans
    from crews.models import Plan

    if piece == "diagram":
        return _without_diagram(scenarios)
    if piece != "reversing":
        raise ValueError(f"no such piece: {piece}")
    by_name = {s.name.split(" (")[0]: s for s in scenarios}
    run_page, editor = by_name["run page, finished"], by_name["plan editor"]

    def result_url(run_id: int, seq: int) -> str:
        return reverse("crews:run-step-result", args=[run_id, seq])

    def call_url(run_id: int, seq: int) -> str:
        return reverse("crews:run-llm-call", args=[run_id, seq])

    def run_page_reversing() -> Any:
        with (
            swapped(state, "step_result_url", result_url),
            swapped(state, "llm_call_url", call_url),
        ):
            return run_page.request()

    links = [f"crews:plan-step-{action}" for action in ("update", "move", "pin", "delete")]
    steps = plans.current_steps(Plan.objects.get(pk=data.plan_id))
    uids = [step.uid for task_steps in steps.values() for step in task_steps]

    def editor_reversing() -> Any:
        done = editor.request()
        for uid in uids:
            for name in links:
                reverse(name, args=[data.plan_id, uid])
        return done

    return [
        Scenario(run_page.name + ", each URL reversed", run_page_reversing, None),
        Scenario(editor.name + ", + one reverse() per step link", editor_reversing, None),
    ]


def _without_diagram(scenarios: list[Scenario]) -> list[Scenario]:
    """diagram: the plan editor without the crew's picture in its side column (what drawing it costs)."""
    import crews.views.plan_context as plan_context
    from crews.diagram import Diagram

    editor = {s.name.split(" (")[0]: s for s in scenarios}["plan editor"]

    def editor_without_diagram() -> Any:
        with swapped(plan_context, "crew_diagram", lambda *args, **kwargs: Diagram()):
            return editor.request()

    return [Scenario(editor.name + ", without the diagram", editor_without_diagram, None)]
