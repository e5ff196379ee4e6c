"""What the bench scripts share: where the repository and its Python are, a free port, a table.

The scripts import it as a sibling (``from _common import ...``): Python puts a script's own
folder first on ``sys.path``, so ``.venv/bin/python bench/<script>.py`` finds it. Importing it puts
the repository on ``sys.path`` too, so the project's modules import from any bench module after it.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else Path(sys.executable))
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def table(rows: Sequence[Sequence[str]], headers: Sequence[str], text_columns: int = 1) -> str:
    """A Markdown table: the first ``text_columns`` columns left-aligned, the figures right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return (
            "| "
            + " | ".join(
                c.ljust(w) if i < text_columns else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
            + " |"
        )

    rule = (
        "|"
        + "|".join(
            "-" * (w + 2) if i < text_columns else "-" * (w + 1) + ":" for i, w in enumerate(widths)
        )
        + "|"
    )
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])
