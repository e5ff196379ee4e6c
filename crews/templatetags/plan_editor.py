"""The plan editor's repeated parts: step cards and version rows, built by ``crews.plan_view``.

Each tag reads the response's ``editor_html`` (``crews.plan_view.EditorHtml``, from the view).
"""

from __future__ import annotations

from django import template
from django.template import Context
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.simple_tag(takes_context=True)
def step_card(context: Context) -> SafeString:
    """The card of ``step`` in ``section``."""
    section = context["section"]
    return context["editor_html"].card(context["step"], task_id=section.task.pk, regenerating=section.regenerating)


@register.simple_tag(takes_context=True)
def step_cards(context: Context) -> SafeString:
    """Every card of ``section``, in order: ``{% step_card %}`` in a loop, without the template
    engine's work for each of 400 cards."""
    section, html = context["section"], context["editor_html"]
    return mark_safe("\n".join(  # noqa: S308 - each card is escaped by EditorHtml
        html.card(step, task_id=section.task.pk, regenerating=section.regenerating) for step in section.steps
    ))


@register.simple_tag(takes_context=True)
def version_rows(context: Context) -> SafeString:
    """A row for every version in ``versions``, newest first."""
    html = context["editor_html"]
    return mark_safe("\n".join(html.version_row(v) for v in context["versions"]))  # noqa: S308 - escaped per row


@register.simple_tag(takes_context=True)
def version_row(context: Context, version: dict, *, oob: bool = False) -> SafeString:
    """One version's row; ``oob=True`` replaces the row on the page (hx-swap-oob)."""
    return context["editor_html"].version_row(version, oob=oob)


@register.simple_tag(takes_context=True)
def version_options(context: Context, chosen: int | None, default: int) -> SafeString:
    """The options of a comparison's select, every version newest first: ``chosen`` is
    selected, or ``default`` when nothing was chosen."""
    return context["editor_html"].version_options(context["version_numbers"], chosen or default)
