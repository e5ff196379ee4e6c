"""Shared by the import and export tests: the CrewAI fixtures, zips of them, row counts."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from agents.models import Agent, PlanningConfig
from crews.models import Crew, Task

FIXTURES = Path(__file__).parent / "fixtures" / "crewai"
CLASSIC = FIXTURES / "classic" / "config"
JSONC = FIXTURES / "jsonc"


def zip_of(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def line_of(text: str, part: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if part in line)


def counts() -> tuple[int, int, int, int]:
    return Crew.objects.count(), Agent.objects.count(), Task.objects.count(), PlanningConfig.objects.count()
