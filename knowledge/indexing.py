"""Indexing a source in the background: extract its text, split it, store the chunks (and their
embeddings) in one transaction, so a run reads all of a source or none of it."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from agents.engine.llm import LLMError
from knowledge import embeddings
from knowledge.chunking import split_text
from knowledge.extraction import Unreadable, extract_text
from knowledge.models import KnowledgeChunk, KnowledgeSource

logger = logging.getLogger(__name__)
Status = KnowledgeSource.Status


def _fail(source_id: int, error: str) -> None:
    with transaction.atomic():
        KnowledgeChunk.objects.filter(source_id=source_id).delete()
        KnowledgeSource.objects.filter(pk=source_id).update(status=Status.FAILED, error=error, chunk_count=0)


def source_index(*, source_id: int) -> None:
    """Index the source: ``indexed`` with its chunk count, or ``failed`` with the reason (and no
    chunk). A source deleted meanwhile is left alone."""
    source = KnowledgeSource.objects.filter(pk=source_id).first()
    if source is None:
        return
    KnowledgeSource.objects.filter(pk=source_id).update(status=Status.INDEXING, error="")
    try:
        text = extract_text(source.kind, bytes(source.content))
    except Unreadable as exc:
        _fail(source_id, str(exc))
        return
    except Exception:
        logger.exception("knowledge source %s could not be extracted", source_id)
        _fail(source_id, gettext_noop("The file could not be read."))
        return
    pieces = split_text(
        text, size=settings.PLANNER_KNOWLEDGE_CHUNK_CHARS, overlap=settings.PLANNER_KNOWLEDGE_CHUNK_OVERLAP
    )
    limit = settings.PLANNER_KNOWLEDGE_MAX_CHUNKS
    if len(pieces) > limit:
        _fail(source_id, _("The text makes %(n)s chunks; a source may have at most %(limit)s.")
              % {"n": len(pieces), "limit": limit})
        return
    vectors: list[list[float]] | list[None] = [None] * len(pieces)
    model = embeddings.embedding_llm()
    if model is not None:
        try:
            vectors = embeddings.embed_texts(model, pieces)
        except LLMError as exc:
            _fail(source_id, _("The embedding model failed: %(error)s") % {"error": exc})
            return
    with transaction.atomic():
        if not KnowledgeSource.objects.select_for_update().filter(pk=source_id).exists():
            return  # deleted while it was being read
        KnowledgeChunk.objects.filter(source_id=source_id).delete()
        KnowledgeChunk.objects.bulk_create(
            [
                KnowledgeChunk(
                    source_id=source_id, position=i, text=piece,
                    embedding=None if vector is None else embeddings.pack(vector),
                )
                for i, (piece, vector) in enumerate(zip(pieces, vectors, strict=True))
            ],
            batch_size=500,
        )
        KnowledgeSource.objects.filter(pk=source_id).update(
            status=Status.INDEXED, error="", chunk_count=len(pieces)
        )
