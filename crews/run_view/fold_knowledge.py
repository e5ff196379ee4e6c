"""How knowledge and memory show on the run page (issue #19): beside the task, the passages it was
given (source, title, snippet), what it recalled and what it saved.

``KnowledgeEvents`` is a part of ``crews.run_view.fold.RunView``, as ``CheckEvents`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from crews.run_view.state import Note, TaskView
from crews.run_view.text import text_of

SNIPPET_CHARS = 160


def snippet(text: Any) -> str:
    flat = " ".join(text_of(text).split())
    return flat if len(flat) <= SNIPPET_CHARS else flat[: SNIPPET_CHARS - 1].rstrip() + "…"


def _items(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = data.get(key)
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


class KnowledgeEvents:
    """The handlers of ``knowledge.retrieved``, ``memory.recalled`` and ``memory.saved``."""

    task_for: Callable[[int | None], TaskView]
    _note: Callable[[TaskView, str | None, Note], None]

    def on_knowledge_retrieved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any],
                               at: datetime | None) -> None:
        chunks = _items(data, "chunks")
        titles = ", ".join(dict.fromkeys(text_of(c.get("title")) for c in chunks))
        text = ngettext(
            "Knowledge used: %(n)s passage from %(titles)s", "Knowledge used: %(n)s passages from %(titles)s",
            len(chunks),
        ) % {"n": len(chunks), "titles": titles}
        detail = " · ".join(f"{text_of(c.get('title'))}: “{snippet(c.get('text'))}”" for c in chunks)
        self._note(self.task_for(task_id), step_id, Note(seq, text, "info", detail))

    def on_memory_recalled(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any],
                           at: datetime | None) -> None:
        items = _items(data, "items")
        text = ngettext("Recalled %(n)s memory", "Recalled %(n)s memories", len(items)) % {"n": len(items)}
        detail = " · ".join(snippet(i.get("text")) for i in items)
        self._note(self.task_for(task_id), step_id, Note(seq, text, "info", detail))

    def on_memory_saved(self, seq: int, task_id: Any, step_id: Any, data: dict[str, Any],
                        at: datetime | None) -> None:
        items = _items(data, "items")
        text = _("Remembered for later runs")
        detail = " · ".join(snippet(i.get("text")) for i in items)
        self._note(self.task_for(task_id), step_id, Note(seq, text, "success", detail))
