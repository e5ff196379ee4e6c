"""The run page's fragments for the socket: one websocket message per event, from the page's parts.

Every fragment is a macro of ``templates/crews/run_parts.jinja`` (``state.parts()``) or a partial of
``crews/run_detail.html``: the page renders the same ones, so a part the socket replaces reads as
it would on a page loaded afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from crews.run_view.state import Change, entries_html, log_rows_html, parts, plan_item_html
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
    for change in changes:
        if change.part == "entry" and change.into is not None:  # a new entry, added to its list
            html_parts.append(entries_html([change.context["entry"]], change.into))
            continue
        html = _part_html(view, change, can_write=can_write)
        if change.into is not None:
            html = macro.appended(change.into, html, change.wrapper)
        html_parts.append(str(html))
    return "\n".join(html_parts)


def _part_html(view: RunView, change: Change, *, can_write: bool) -> SafeString:
    """``change.part`` as the page shows it; with ``hx-swap-oob`` when it replaces the element."""
    oob, context = change.into is None, change.context
    part = change.part
    if part == "entry":
        return context["entry"].html(oob=True)  # type: ignore[no-any-return]
    if part in ("step", "step-head", "step-result"):
        return context["step"].part_html(part, oob=oob)  # type: ignore[no-any-return]
    if part == "delta":  # a new LLM call empties its stream area
        return parts().stream(context["target"], context["step_stream"], oob=True)  # type: ignore[no-any-return]
    # The parts laid out like the page around them start and end a line there: trimmed here.
    if part == "task-head":
        html = context["task"].head_html(view, can_write=can_write, csrf_token=None, oob=oob)
    elif part == "plan-item":
        html = plan_item_html(context["item"], oob)
    elif part == "run-stats":
        html = view.stats_html(oob=oob)
    else:
        html = render_to_string(f"crews/run_detail.html#{part}",
                                {"view": view, "run": view.run, "can_write": can_write, **context, "oob": oob})
    return mark_safe(html.strip())  # noqa: S308 - a macro's or a template's output
