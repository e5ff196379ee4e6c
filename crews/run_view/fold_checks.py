"""How a task's checks show on the run page (issue #18): each attempt as an entry of the task's
activity, a failed one with the reasons the agent was sent back with.

``CheckEvents`` is a part of ``crews.run_view.fold.RunView``, as ``TaskEvents`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _

from crews.run_view.state import Note, TaskView
from crews.run_view.text import text_of


class CheckEvents:
    """The handlers of ``guardrail.passed`` and ``guardrail.failed``."""

    task_for: Callable[[int | None], TaskView]
    _note: Callable[[TaskView, str | None, Note], None]

    def on_guardrail_passed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        text = _("Checks passed (attempt %(n)s)") % {"n": text_of(data.get("attempt"))}
        self._note(task, None, Note(seq, text, "success"))

    def on_guardrail_failed(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any], at: datetime | None) -> None:
        task = self.task_for(task_id)
        values = {"n": text_of(data.get("attempt"))}
        if data.get("retrying"):
            text = _("Checks failed (attempt %(n)s): the agent answers again") % values
        else:
            text = _("Checks failed (attempt %(n)s): no retry left") % values
        reasons = data.get("reasons") if isinstance(data.get("reasons"), list) else []
        detail = " · ".join(text_of(r) for r in reasons)
        self._note(task, None, Note(seq, text, "warning" if data.get("retrying") else "danger", detail))
