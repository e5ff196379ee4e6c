"""crews/run_detail.html's way into the run page's Jinja2 macros (templates/crews/run_parts.jinja)
for the parts that need the page's context: who may act, and the CSRF token of its forms."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

register = template.Library()


@register.simple_tag(takes_context=True)
def task_head(context: template.Context, task: Any) -> SafeString:
    """``{% task_head task %}``: the task's head, as the socket renders it (``TaskView.head_html``)."""
    token = context.get("csrf_token")
    return task.head_html(  # type: ignore[no-any-return]
        context["view"], can_write=bool(context.get("can_write")),
        csrf_token=str(token) if token and token != "NOTPROVIDED" else None, oob=bool(context.get("oob")),
    )
