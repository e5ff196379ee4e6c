"""SQLite FTS5: external-content tables over chunks and memories, kept in step by triggers
(migration 0001), ranked by BM25."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection


def _match(words: Sequence[str]) -> str:
    # Each word quoted (words are \w+, so they hold no quote): any word may match, BM25 ranks.
    return " OR ".join(f'"{w}"' for w in words)


# Past this many chunks, words most chunks hold are left out of the query: BM25 gives them
# almost no weight, and each costs a score for nearly every chunk (bench/knowledge.py: 10,000
# chunks answer in ~10 ms instead of ~60 ms).
PRUNE_FROM_CHUNKS = 2_000
COMMON_SHARE = 0.1  # a word in more than this share of the chunks is common
KEEP_WORDS = 10  # the rarest words kept


def _rarest(cursor: Any, words: Sequence[str]) -> list[str]:
    cursor.execute("SELECT count(*) FROM knowledge_knowledgechunk")
    total = cursor.fetchone()[0]
    if total < PRUNE_FROM_CHUNKS:
        return list(words)
    marks = ",".join("%s" for _ in words)
    cursor.execute(f"SELECT term, doc FROM knowledge_chunk_vocab WHERE term IN ({marks})", list(words))
    held = dict(cursor.fetchall())
    known = sorted((w for w in words if w in held), key=lambda w: held[w])
    rare = [w for w in known if held[w] <= COMMON_SHARE * total]
    return (rare or known[:3])[:KEEP_WORDS]


def chunk_ids(words: Sequence[str], source_ids: Sequence[int], limit: int) -> list[int]:
    """Chunks of ``source_ids`` matching any of ``words``, best first."""
    if not words or not source_ids:
        return []
    marks = ",".join("%s" for _ in source_ids)
    sql = (
        "SELECT c.id FROM knowledge_chunk_fts f JOIN knowledge_knowledgechunk c ON c.id = f.rowid "
        f"WHERE knowledge_chunk_fts MATCH %s AND c.source_id IN ({marks}) "
        "ORDER BY bm25(knowledge_chunk_fts) LIMIT %s"
    )
    with connection.cursor() as cursor:
        words = _rarest(cursor, words)
        if not words:
            return []
        cursor.execute(sql, [_match(words), *source_ids, limit])
        return [row[0] for row in cursor.fetchall()]


def memory_ids(words: Sequence[str], crew_id: int, user_id: int, limit: int) -> list[int]:
    """Memories of ``crew_id`` from ``user_id``'s runs matching any of ``words``, best first."""
    if not words:
        return []
    sql = (
        "SELECT m.id FROM knowledge_memory_fts f JOIN knowledge_memory m ON m.id = f.rowid "
        "WHERE knowledge_memory_fts MATCH %s AND m.crew_id = %s AND m.user_id = %s "
        "ORDER BY bm25(knowledge_memory_fts) LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_match(words), crew_id, user_id, limit])
        return [row[0] for row in cursor.fetchall()]
