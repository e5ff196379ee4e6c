"""The run page's fragments for the socket: one websocket message per event, from the page's parts.

Every fragment is a macro of ``templates/crews/run_parts.jinja`` (``state.parts()``) or a partial of
``crews/run_detail.html``: the page renders the same ones, so a part the socket replaces reads as
it would on a page loaded afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from crews.run_view.state import entries_html, log_rows_html, parts, plan_item_html
from crews.run_view.text import delta_target, text_of

if TYPE_CHECKING:
    from crews.run_view.fold import RunView


def render_event_html(view: RunView, event: dict[str, Any], *, can_write: bool) -> str:
    """The websocket message for one event: out-of-band fragments for htmx's ws extension.

    A streamed delta is appended to its stream area. A stored event is folded into ``view``; the
    message is its event-log row (``<li id="event-N">``, appended to ``#run-events``) and every
    part of the page it changed, re-rendered from the same macros and partials as the page.
    Everything the event carries is escaped (markdown is sanitised).
    """
    macro = parts()
    if event.get("seq") is None:
        target = delta_target(event.get("task_id"), event.get("step_id"))
        return str(macro.streamed(target, text_of((event.get("data") or {}).get("text", ""))))
    changes = view.apply(event)
    html_parts = [str(log_rows_html(view.log[-1:], oob=True))]
    base = {"view": view, "run": view.run, "can_write": can_write}
    for change in changes:
        oob = change.into is None
        html: SafeString
        if change.part == "entry" and change.into is not None:
            html_parts.append(entries_html([change.context["entry"]], change.into))
            continue
        if change.part == "entry":
            html = change.context["entry"].html(oob=True)
        elif change.part in ("step", "step-head", "step-result"):
            html = change.context["step"].part_html(change.part, oob=oob)
        elif change.part == "task-head":  # (laid out as on the page: one part a line here)
            html = mark_safe(change.context["task"].head_html(view, can_write=can_write, csrf_token=None,  # noqa: S308
                                                              oob=oob).strip())
        elif change.part == "plan-item":
            html = mark_safe(plan_item_html(change.context["item"], oob).strip())  # noqa: S308 - a macro's output
        elif change.part == "run-stats":
            html = mark_safe(view.stats_html(oob=oob).strip())  # noqa: S308 - a macro's output
        elif change.part == "delta":  # a new LLM call empties its stream area
            html = macro.stream(change.context["target"], change.context["step_stream"], oob=True)
        else:
            html = mark_safe(render_to_string(f"crews/run_detail.html#{change.part}",  # noqa: S308 - a template's output
                                              {**base, **change.context, "oob": oob}).strip())
        if change.into is not None:
            html = macro.appended(change.into, html, change.wrapper)
        html_parts.append(str(html))
    return "\n".join(html_parts)
