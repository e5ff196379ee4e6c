"""What is wrong with an imported project: each problem names its file, line, key and reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.translation import gettext as _


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None  # 1-based; None where the input has no lines (a JSON body's crew object)
    key: str  # the place in the file, dotted: ``reporting_task.context``
    message: str

    def place(self) -> str:
        """``config/tasks.yaml, line 12, reporting_task.agent``: as much of it as is known."""
        where = (_("%(file)s, line %(line)s") % {"file": self.file, "line": self.line}
                 if self.line is not None else self.file)
        return f"{where}, {self.key}" if self.key else where

    def sentence(self) -> str:
        return f"{self.place()}: {self.message}"


class ImportRejected(Exception):
    """The project cannot be imported as it is; nothing was stored.

    ``problems`` say what is invalid; ``unknown_llms``/``unknown_tools`` are names this site lacks
    that ``llm_map``/``tool_map`` did not settle (the only problems a mapping fixes).
    """

    def __init__(
        self,
        problems: Sequence[Problem] = (),
        *,
        unknown_llms: Sequence[str] = (),
        unknown_tools: Sequence[str] = (),
        unknown_only: bool = False,
    ) -> None:
        self.problems = list(problems)
        self.unknown_llms = list(unknown_llms)
        self.unknown_tools = list(unknown_tools)
        # Only names this site lacks: llm_map and tool_map can settle every problem.
        self.code = "unknown_names" if unknown_only else "invalid_project"
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        if self.code != "unknown_names":
            return self.problems[0].sentence()
        names = [*self.unknown_llms, *self.unknown_tools]
        return _(
            "This site has no LLM or tool named %(names)s: map each one to one of this site's, "
            "or leave it unset."
        ) % {"names": ", ".join(names)}
