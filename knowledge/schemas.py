"""API bodies of the knowledge app: sources and memories."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import StringConstraints

from knowledge.models import KnowledgeSource

SourceKind = Literal["text", "markdown", "pdf", "csv", "json"]
SourceStatus = Literal["queued", "indexing", "indexed", "failed"]
TITLE_CHARS = KnowledgeSource._meta.get_field("title").max_length


class SourceTextIn(Schema):
    title: Annotated[str, StringConstraints(strip_whitespace=True, max_length=TITLE_CHARS)] = ""
    text: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="Pasted text, indexed as plain text (Markdown is fine)."
    )


class SourceOut(Schema):
    id: int
    title: str
    kind: SourceKind
    status: SourceStatus = Field(description="queued → indexing → indexed, or failed (see error).")
    chunks: int = Field(description="How many chunks the index holds for it (0 until indexed).")
    error: str = Field(description="Why indexing failed; empty otherwise.")
    agent_id: int | None
    crew_id: int | None
    created_at: datetime

    @staticmethod
    def resolve_chunks(obj: KnowledgeSource) -> int:
        return obj.chunk_count


class MemoryOut(Schema):
    id: int
    text: str
    run_id: int | None
    created_at: datetime


class MemoryPatch(Schema):
    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4_000)]
