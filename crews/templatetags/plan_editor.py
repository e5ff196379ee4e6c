"""The plan editor's repeated parts in its page: step cards and version rows, drawn by the macros
of ``templates/crews/plan_parts.jinja`` through the response's ``editor_parts``
(``crews.plan_view.EditorParts``, from the view), as the htmx answers draw them."""

from __future__ import annotations

from django import template
from django.template import Context
from django.utils.safestring import SafeString

from crews.plan_view import VersionRow

register = template.Library()


@register.simple_tag(takes_context=True)
def step_card(context: Context) -> SafeString:
    """The card of ``step`` in ``section``."""
    section = context["section"]
    return context["editor_parts"].card(context["step"], task_id=section.task.pk, regenerating=section.regenerating)


@register.simple_tag(takes_context=True)
def step_cards(context: Context, *, start: int = 0, stop: int | None = None) -> SafeString:
    """Every card of ``section`` in order, or those of ``steps[start:stop]`` (around an Undo)."""
    section = context["section"]
    return context["editor_parts"].cards(section.steps[start:stop], task_id=section.task.pk,
                                         regenerating=section.regenerating)


@register.simple_tag(takes_context=True)
def version_rows(context: Context) -> SafeString:
    """A row for every version in ``versions``, newest first."""
    return context["editor_parts"].version_rows(context["versions"])


@register.simple_tag(takes_context=True)
def version_row(context: Context, version: VersionRow, *, oob: bool = False) -> SafeString:
    """One version's row; ``oob=True`` replaces the row on the page (hx-swap-oob)."""
    return context["editor_parts"].version_row(version, oob=oob)


@register.simple_tag(takes_context=True)
def version_options(context: Context, chosen: int | None, default: int) -> SafeString:
    """The options of a comparison's select, every version newest first: ``chosen`` is
    selected, or ``default`` when nothing was chosen."""
    return context["editor_parts"].version_options(context["version_numbers"], chosen or default)
