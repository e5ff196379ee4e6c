"""The plan editor's repeated parts, step cards and version rows: what they show, their words, and
the calls to their macros in ``templates/crews/plan_parts.jinja``.

A plan of 20 tasks x 20 steps shows 400 step cards, each with six controls that work without
JavaScript (Edit, Move up, Move down, Pin, Add after, Delete); the versions list grows by a row
with every save. Django's template engine spent 0.7 ms a card, most of the page, so these parts
are Jinja2 macros (``planner_site.jinja2``), which the page (through
``crews.templatetags.plan_editor``) and every htmx answer call alike. ``EditorParts`` holds what
is the same on every card or row of one response: the URLs, the CSRF token, the version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.urls import reverse
from django.utils.dateformat import format as format_date
from django.utils.formats import localize
from django.utils.safestring import SafeString
from django.utils.timesince import timesince
from django.utils.timezone import template_localtime
from django.utils.translation import get_language
from django.utils.translation import gettext as _

from planner_site.jinja2 import macros
from planner_site.reversing import url_around_last_arg

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser


def parts() -> Any:
    return macros("crews/plan_parts.jinja")


# Words -------------------------------------------------------------------------------------------


def _words_now() -> dict[str, str]:
    # Those ending in _n take the step's or version's number: "%(n)s", put in by the macro.
    return {
        # a step card
        "drag": _("Drag to reorder"), "pinned": _("Pinned: kept when the task is regenerated"),
        "edit": _("Edit"), "edit_n": _("Edit: step %(n)s"),
        "up": _("Move up"), "up_n": _("Move up: step %(n)s"),
        "down": _("Move down"), "down_n": _("Move down: step %(n)s"),
        "pin": _("Pin"), "pin_n": _("Pin: step %(n)s"),
        "unpin": _("Unpin"), "unpin_n": _("Unpin: step %(n)s"),
        "add": _("Add after"), "add_n": _("Add after: step %(n)s"),
        "delete": _("Delete"), "delete_n": _("Delete: step %(n)s"),
        # the versions list
        "v_n": _("v%(n)s"), "current": _("Current"), "approved": _("Approved"), "planner": _("the planner"),
        "ago": _("%(time)s ago"), "changes": _("Changes"), "changes_n": _("Changes in version %(n)s"),
        "restore": _("Restore"), "restore_n": _("Restore version %(n)s"),
    }


_WORDS: dict[str, dict[str, str]] = {}


def words() -> dict[str, str]:
    """The words of the editor's macros (``words["edit"]``), looked up once per language: a
    gettext call inside a macro costs as much as ten escapes, and a plan has 400 cards."""
    language = get_language() or ""
    table = _WORDS.get(language)
    if table is None:
        table = _WORDS[language] = _words_now()
    return table


# What the parts show -----------------------------------------------------------------------------


@dataclass
class StepRow:
    """One step as its card shows it: ``number`` counts from 1 in its task."""

    uid: int
    text: str
    pinned: bool
    number: int
    first: bool
    last: bool


@dataclass
class VersionRow:
    """One row of the versions list: its number, what the save did (``label``), who saved it
    (``None`` for the planner) and when. The times are worked out when a row is drawn: answers
    that do not draw the list should not pay for them."""

    number: int
    label: str
    who: AbstractBaseUser | None
    at: datetime

    @property
    def by(self) -> str:
        return self.who.get_username() if self.who else ""

    @cached_property
    def local(self) -> datetime:
        return template_localtime(self.at)

    @property
    def iso(self) -> str:  # for the <time> element
        return format_date(self.local, "c")

    @property
    def title(self) -> str:  # in the local format
        return localize(self.local)

    @property
    def since(self) -> str:  # how long ago
        return timesince(self.local)


@dataclass(frozen=True)
class EditorParts:
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
    def urls(self) -> dict[str, Any]:
        """Each link's URL as (head, tail) around its last argument, reversed once per response
        (not 2,000 times); ``diff`` whole."""
        def around(name: str) -> tuple[str, str]:
            return url_around_last_arg(name, self.plan_id)

        return {
            "edit": around("crews:plan-step-update"),
            "move": around("crews:plan-step-move"),
            "pin": around("crews:plan-step-pin"),
            "delete": around("crews:plan-step-delete"),
            "add": around("crews:plan-step-create"),  # this one and the next two take a task id
            "reorder": around("crews:plan-task-reorder"),
            "regenerate": around("crews:plan-task-regenerate"),
            "restore": around("crews:plan-version-restore"),  # takes a version number
            "diff": reverse("crews:plan-diff", args=[self.plan_id]),
        }

    def task_urls(self, task_id: int) -> dict[str, str]:
        """A task section's form targets (``add``, ``reorder``, ``regenerate``). bench/ui.py,
        plan editor: 120 ``{% url %}`` tags a page took 8 of its 100 ms."""
        urls = self.urls
        return {key: f"{urls[key][0]}{task_id}{urls[key][1]}" for key in ("add", "reorder", "regenerate")}

    def cards(self, steps: Sequence[StepRow], *, task_id: int, regenerating: bool = False) -> SafeString:
        """The cards of ``steps`` (of task ``task_id``), one ``<li>`` each; while its task is
        being regenerated a card has no controls and cannot be dragged."""
        return SafeString(parts().step_cards(steps, task_id, self, words(), regenerating))

    def card(self, step: StepRow, *, task_id: int, regenerating: bool = False) -> SafeString:
        return self.cards([step], task_id=task_id, regenerating=regenerating)

    def version_rows(self, rows: Sequence[VersionRow], *, oob: bool = False) -> SafeString:
        """Rows of the versions list, newest first; ``oob`` replaces each on the page."""
        return SafeString(parts().version_rows(rows, self, words(), oob))

    def version_row(self, row: VersionRow, *, oob: bool = False) -> SafeString:
        return self.version_rows([row], oob=oob)

    def version_options(self, numbers: Iterable[int], selected: int) -> SafeString:
        """The ``<option>``s of a comparison's select: every version, newest first."""
        return SafeString(parts().version_options(numbers, selected, words()))
