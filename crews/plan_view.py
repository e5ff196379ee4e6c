"""The plan editor's repeated parts, built in Python: its step cards and its versions list.

A plan of 20 tasks x 20 steps shows 400 step cards, each with six controls that work without
JavaScript (Edit, Move up, Move down, Pin, Add after, Delete): about 60 template nodes, on which
Django's template engine spent 0.7 ms a card, most of the page. The versions list grows by a row
(and two options in the comparison form) with every save, at 0.8 ms a row. ``EditorHtml`` prints
the markup the partials of ``templates/crews/plan_detail.html`` did, with what is the same on
every card or row (URLs, labels, the CSRF token, the version) worked out once per response.

Step texts are drafted by an LLM, so they are untrusted: every value from the database is escaped
here (``html.escape``, as Django's ``escape`` does). Labels come from the same catalogue entries
the template used: ``{% translate %}`` texts are escaped, ``{% blocktranslate %}`` formats are not
(Django trusts translations) while the values put into them are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from html import escape  # Django's escape() without its SafeString wrapping: 400 cards a page
from typing import Any

from django.urls import reverse
from django.utils.dateformat import format as format_date
from django.utils.formats import localize
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince
from django.utils.timezone import template_localtime
from django.utils.translation import gettext as _

from planner_site.reversing import url_around_last_arg


@dataclass
class StepRow:
    """One step as its card shows it: ``number`` counts from 1 in its task."""

    uid: int
    text: str
    pinned: bool
    number: int
    first: bool
    last: bool


def _url_pattern(name: str, plan_id: int) -> Callable[[int], str]:
    """``reverse(name, args=[plan_id, id])``, HTML-escaped, for any ``id``, reversing once (not
    2,000 times)."""
    head, tail = (escape(part) for part in url_around_last_arg(name, plan_id))
    return lambda id_: f"{head}{id_}{tail}"


@dataclass(frozen=True)
class EditorHtml:
    """Step cards and version rows of one plan for one response.

    ``version`` is the plan's current version (what its forms send), ``can_edit`` whether cards
    and rows have controls.
    """

    plan_id: int
    version: int
    approved_version: int | None
    csrf_token: str
    can_edit: bool
    focus_uid: int | None = None  # the card whose Edit link takes the focus (a step just added)

    @cached_property
    def _labels(self) -> dict[str, str]:
        # Same msgids as the template had; formats keep their %(n)s for the step's number.
        return {
            "drag": escape(_("Drag to reorder")),
            "pinned": escape(_("Pinned: kept when the task is regenerated")),
            "edit": escape(_("Edit")),
            "up": escape(_("Move up")),
            "down": escape(_("Move down")),
            "pin": escape(_("Pin")),
            "unpin": escape(_("Unpin")),
            "add": escape(_("Add after")),
            "delete": escape(_("Delete")),
            "edit_label": _("Edit: step %(n)s"),
            "up_label": _("Move up: step %(n)s"),
            "down_label": _("Move down: step %(n)s"),
            "pin_label": _("Pin: step %(n)s"),
            "unpin_label": _("Unpin: step %(n)s"),
            "add_label": _("Add after: step %(n)s"),
            "delete_label": _("Delete: step %(n)s"),
            # The versions list
            "current": escape(_("Current")),
            "approved": escape(_("Approved")),
            "planner": escape(_("the planner")),
            "changes": escape(_("Changes")),
            "restore": escape(_("Restore")),
            "v": _("v%(n)s"),
            "ago": _("%(time)s ago"),
            "changes_label": _("Changes in version %(n)s"),
            "restore_label": _("Restore version %(n)s"),
        }

    @cached_property
    def _urls(self) -> dict[str, Callable[[int], str]]:
        return {
            "edit": _url_pattern("crews:plan-step-update", self.plan_id),
            "move": _url_pattern("crews:plan-step-move", self.plan_id),
            "pin": _url_pattern("crews:plan-step-pin", self.plan_id),
            "delete": _url_pattern("crews:plan-step-delete", self.plan_id),
            "add": _url_pattern("crews:plan-step-create", self.plan_id),  # takes a task id
            "restore": _url_pattern("crews:plan-version-restore", self.plan_id),  # takes a number
        }

    @cached_property
    def _diff_url(self) -> str:
        return escape(reverse("crews:plan-diff", args=[self.plan_id]))

    @cached_property
    def _hidden(self) -> str:
        """What every form of a card or row sends along: the CSRF token and the version on screen."""
        return (
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(self.csrf_token)}">\n'
            f'<input type="hidden" name="version" value="{self.version}" class="plan-version">'
        )

    def card(self, step: StepRow, *, task_id: int, regenerating: bool = False) -> SafeString:
        """One step's ``<li>``: its number and text, and with ``can_edit`` its controls.

        While its task is being regenerated a step has no controls and cannot be dragged.
        """
        uid, n = step.uid, step.number
        editable = self.can_edit and not regenerating
        labels = self._labels
        parts = [f'<li class="step{" step--pinned" if step.pinned else ""}" id="step-{uid}" data-step-id="{uid}">']
        if editable:
            # The hidden "order" input belongs to the task's reorder form (form=""), which
            # plan-editor.js submits after a drag and drop: the ids in their new page order.
            parts.append(
                f'<input type="hidden" name="order" value="{uid}" form="plan-task-{task_id}-reorder">\n'
                f'<span class="step__handle" aria-hidden="true" title="{labels["drag"]}">⠿</span>'
            )
        edit_link = f' data-edit-link="step-{uid}-edit"' if editable else ""  # a click on the text edits it
        parts.append(
            f'<span class="step__number">{n}.</span>\n<div class="step__main">\n'
            f'<p class="step__text"{edit_link}>{escape(step.text)}</p>'
        )
        if step.pinned:
            parts.append(f'<p class="step__pin"><span class="badge badge--pin">{labels["pinned"]}</span></p>')
        parts.append("</div>")
        if editable:
            parts.append(self._actions(step, task_id))
        parts.append("</li>")
        return mark_safe("\n".join(parts))  # noqa: S308 - every value above is escaped or a number

    def _actions(self, step: StepRow, task_id: int) -> str:
        uid, n = step.uid, step.number
        labels, urls, hidden = self._labels, self._urls, self._hidden
        number = {"n": n}
        edit_url, move_url, pin_url = urls["edit"](uid), urls["move"](uid), urls["pin"](uid)
        delete_url, add_url = urls["delete"](uid), urls["add"](task_id)
        autofocus = " autofocus" if self.focus_uid == uid else ""
        section = f'hx-target="#plan-task-{task_id}" hx-swap="outerHTML"'
        if step.pinned:
            pin = f'name="pinned" value="0" id="step-{uid}-pin" aria-label="{labels["unpin_label"] % number}">{labels["unpin"]}'
        else:
            pin = f'name="pinned" value="1" id="step-{uid}-pin" aria-label="{labels["pin_label"] % number}">{labels["pin"]}'
        # Edit and Add after are links: htmx fetches the form into the page, and without
        # JavaScript they open the editor with it. Moves, pins and deletes answer with the task's
        # section; app.js puts the focus back on the button with the same id afterwards.
        return (
            '<div class="step__actions">\n'
            f'<a class="button button--small" id="step-{uid}-edit" aria-label="{labels["edit_label"] % number}" '
            f'href="{edit_url}"{autofocus} hx-get="{edit_url}" hx-target="#step-{uid}" hx-swap="outerHTML">'
            f'{labels["edit"]}</a>\n'
            f'<form method="post" action="{move_url}" class="inline-form" hx-post="{move_url}" {section}>\n'
            f"{hidden}\n"
            f'<button type="submit" class="button button--small" name="direction" value="up" id="step-{uid}-up" '
            f'aria-label="{labels["up_label"] % number}"{" disabled" if step.first else ""}>'
            f'<span aria-hidden="true">↑</span> {labels["up"]}</button>\n'
            f'<button type="submit" class="button button--small" name="direction" value="down" id="step-{uid}-down" '
            f'aria-label="{labels["down_label"] % number}"{" disabled" if step.last else ""}>'
            f'<span aria-hidden="true">↓</span> {labels["down"]}</button>\n'
            "</form>\n"
            f'<form method="post" action="{pin_url}" class="inline-form" hx-post="{pin_url}" {section}>\n'
            f"{hidden}\n"
            f'<button type="submit" class="button button--small" {pin}</button>\n'
            "</form>\n"
            f'<a class="button button--small" id="step-{uid}-add" aria-label="{labels["add_label"] % number}" '
            f'href="{add_url}?after={uid}#step-{uid}-new" '
            f'hx-get="{add_url}?after={uid}" hx-target="#step-{uid}" hx-swap="afterend">{labels["add"]}</a>\n'
            f'<form method="post" action="{delete_url}" class="inline-form" hx-post="{delete_url}" {section}>\n'
            f"{hidden}\n"
            f'<button type="submit" class="button button--small button--danger" id="step-{uid}-delete" '
            f'aria-label="{labels["delete_label"] % number}">{labels["delete"]}</button>\n'
            "</form>\n"
            "</div>"
        )

    # The versions list ----------------------------------------------------------------------

    def version_row(self, version: dict[str, Any], *, oob: bool = False) -> SafeString:
        """One row of the versions list (``version``: number, label, who, at), newest first.

        The current version is marked and cannot be restored; ``oob`` replaces the row on the
        page with this one (hx-swap-oob), as after a save the row before it gains Restore.
        """
        n, labels = version["number"], self._labels
        number = {"n": n}
        current = n == self.version
        who = version["who"]
        at = template_localtime(version["at"])
        title = [f"<strong>{labels['v'] % number}</strong> {escape(str(version['label']))}"]
        if current:
            title.append(f'<span class="badge badge--info">{labels["current"]}</span>')
        if n == self.approved_version:
            title.append(f'<span class="badge badge--success">{labels["approved"]}</span>')
        actions = []
        if n > 1:
            query = f"?from={n - 1}&amp;to={n}"
            actions.append(
                f'<a class="button button--small" href="{self._diff_url}{query}#plan-diff" '
                f'aria-label="{labels["changes_label"] % number}" hx-get="{self._diff_url}{query}" '
                f'hx-target="#plan-diff" hx-swap="outerHTML">{labels["changes"]}</a>'
            )
        if self.can_edit and not current:
            url = self._urls["restore"](n)
            actions.append(
                f'<form method="post" action="{url}" class="inline-form" hx-post="{url}" '
                f'hx-target="#plan-editor" hx-swap="outerHTML">\n{self._hidden}\n'
                f'<button type="submit" class="button button--small" aria-label="{labels["restore_label"] % number}">'
                f'{labels["restore"]}</button>\n</form>'
            )
        classes = "version version--current" if current else "version"
        swap = ' hx-swap-oob="true"' if oob else ""
        by = escape(who.get_username()) if who else labels["planner"]
        ago = labels["ago"] % {"time": escape(timesince(at))}
        return mark_safe("\n".join([  # noqa: S308 - every value is escaped or a number
            f'<li class="{classes}" id="plan-version-{n}"{swap}>',
            '<div class="version__title">', *title, "</div>",
            f'<div class="version__meta muted">\n{by} ·',
            f'<time datetime="{format_date(at, "c")}" title="{escape(localize(at))}">{ago}</time>',
            "</div>",
            '<div class="version__actions">', *actions, "</div>",
            "</li>",
        ]))

    def version_options(self, numbers: Iterable[int], selected: int) -> SafeString:
        """The ``<option>``s of a comparison's select: every version, newest first."""
        v = self._labels["v"]
        return mark_safe("".join(  # noqa: S308 - numbers only
            f'<option value="{n}"{" selected" if n == selected else ""}>{v % {"n": n}}</option>' for n in numbers
        ))
