"""PostgreSQL full-text search: ``SearchVector``/``SearchRank`` over the chunk text, matching
the expression GIN index of migration 0001 (config ``simple``: no language's stemming, as FTS5's
``unicode61`` tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.postgres.search import SearchQuery, SearchRank, SearchVector

from knowledge.models import KnowledgeChunk, Memory

CONFIG = "simple"


def chunk_vector() -> SearchVector:
    """The indexed expression: queries must use it verbatim for the GIN index to serve them."""
    return SearchVector("text", config=CONFIG)


def _query(words: Sequence[str]) -> SearchQuery:
    # Words are \w+ (no tsquery operator in them); any may match, the rank orders.
    return SearchQuery(" | ".join(words), search_type="raw", config=CONFIG)


def chunk_ids(words: Sequence[str], source_ids: Sequence[int], limit: int) -> list[int]:
    if not words or not source_ids:
        return []
    query = _query(words)
    rows = (
        KnowledgeChunk.objects.annotate(search=chunk_vector())
        .filter(search=query, source_id__in=source_ids)
        .annotate(rank=SearchRank(chunk_vector(), query))
        .order_by("-rank", "id")
        .values_list("id", flat=True)[:limit]
    )
    return list(rows)


def memory_ids(words: Sequence[str], crew_id: int, user_id: int, limit: int) -> list[int]:
    if not words:
        return []
    query = _query(words)
    vector = SearchVector("text", config=CONFIG)
    rows = (
        Memory.objects.annotate(search=vector)
        .filter(search=query, crew_id=crew_id, user_id=user_id)
        .annotate(rank=SearchRank(vector, query))
        .order_by("-rank", "-id")
        .values_list("id", flat=True)[:limit]
    )
    return list(rows)
