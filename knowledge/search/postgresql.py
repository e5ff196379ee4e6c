"""PostgreSQL full-text search over the ``search_vector`` columns of migration 0002: each chunk's
and memory's ``to_tsvector('simple', text)`` (no language's stemming, as FTS5's ``unicode61``
tokenizer), stored by PostgreSQL and GIN-indexed. ``ts_rank`` reads the stored vector, so a
search no longer parses the text of every chunk it matches (bench/knowledge.py, 10,000 chunks:
2.6 s before, see bench/README.md).

As on SQLite (``knowledge.search.sqlite``, whose settings this module reads), past
``PRUNE_FROM_CHUNKS`` chunks the words most chunks hold are left out of the query: each would
match, and be ranked, for nearly every chunk. Their document frequencies are counted through the
GIN index once per word and kept per process until a source is indexed or deleted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from knowledge.search import sqlite

CONFIG = "simple"

# Both ordered by rank, then as the ORM searches ordered before (chunks oldest first, memories
# newest first). The query is a scalar subquery's value (an InitPlan, computed once), unknown
# when PostgreSQL plans: it then expects few matches and reads the GIN index. Seeing the words,
# it may expect most pages to hold a match and scan the table instead, testing every chunk's
# vector (bench/knowledge.py, 10,000 chunks: ~90 ms instead of ~10).
QUERY = "(SELECT to_tsquery('simple', %s))"
CHUNKS_SQL = (
    f"SELECT c.id, ts_rank(c.search_vector, {QUERY}) AS rank FROM knowledge_knowledgechunk c "
    f"WHERE c.search_vector @@ {QUERY} AND c.source_id = ANY(%s::bigint[]) "
    "ORDER BY rank DESC, c.id LIMIT %s"
)
MEMORIES_SQL = (
    f"SELECT m.id, ts_rank(m.search_vector, {QUERY}) AS rank FROM knowledge_memory m "
    f"WHERE m.search_vector @@ {QUERY} AND m.crew_id = %s AND m.user_id = %s "
    "ORDER BY rank DESC, m.id DESC LIMIT %s"
)
# One count per word, each a GIN index lookup (``ts_stat`` would read every chunk's vector).
FREQUENCIES_SQL = (
    "SELECT w, (SELECT count(*) FROM knowledge_knowledgechunk "
    "WHERE search_vector @@ to_tsquery('simple', w)) FROM unnest(%s::text[]) AS w"
)

# Per process, for the chunks as they are now (as ``sqlite._frequencies``): the chunk count and
# the document frequencies of the words searched for. The key is cheap to read where a count of
# the chunks is not (a scan of the table, ~10 ms at 10,000): the chunks' highest id changes when
# a source is indexed (ids are not reused), the sources' count and highest id when one is
# deleted. A stale frequency could only change which words are kept, never what a kept word
# matches; a count of 0 is never kept (see ``_rarest``), so no word is dropped for it.
_frequencies: dict[tuple[str, int, int, int], tuple[int, dict[str, int]]] = {}
GENERATION_SQL = (
    "SELECT (SELECT max(id) FROM knowledge_knowledgechunk), "
    "(SELECT count(*) FROM knowledge_knowledgesource), (SELECT max(id) FROM knowledge_knowledgesource)"
)


def _query(words: Sequence[str]) -> str:
    # Words are \w+ (no tsquery operator in them); any may match, the rank orders.
    return " | ".join(words)


def _counted(cursor: Any) -> tuple[int, dict[str, int]]:
    """The chunk count and the frequencies known so far, for the chunks as they are now."""
    cursor.execute(GENERATION_SQL)
    last_chunk, sources, last_source = cursor.fetchone()
    generation = (connection.settings_dict["NAME"], last_chunk or 0, sources, last_source or 0)
    counted = _frequencies.get(generation)
    if counted is None or len(counted[1]) > sqlite.FREQUENCIES_KEPT:
        _frequencies.clear()
        cursor.execute("SELECT count(*) FROM knowledge_knowledgechunk")
        counted = _frequencies[generation] = (cursor.fetchone()[0], {})
    return counted


def _rarest(cursor: Any, words: Sequence[str]) -> list[str]:
    """``words`` without the common ones, by the rule of ``sqlite._rarest``; frequencies are
    counted through the GIN index once a generation."""
    total, known = _counted(cursor)
    if total < sqlite.PRUNE_FROM_CHUNKS:
        return list(words)
    missing = [w for w in words if w not in known]
    if missing:
        cursor.execute(FREQUENCIES_SQL, [missing])
        # A word no chunk holds yet is not remembered: a source being indexed holds its chunk ids
        # before it commits, so the key above does not move when they become visible.
        known.update((w, n) for w, n in cursor.fetchall() if n)
    held = {w: known.get(w, 0) for w in words}  # a word counted 0 is the rarest: kept, harmless
    common = sorted(held, key=lambda w: held[w])
    rare = [w for w in common if held[w] <= sqlite.COMMON_SHARE * total]
    return (rare or common[:3])[: sqlite.KEEP_WORDS]


def chunk_ids(words: Sequence[str], source_ids: Sequence[int], limit: int) -> list[int]:
    """Chunks of ``source_ids`` matching any of ``words``, best first."""
    if not words or not source_ids:
        return []
    with connection.cursor() as cursor:
        words = _rarest(cursor, words)
        if not words:
            return []
        query = _query(words)
        cursor.execute(CHUNKS_SQL, [query, query, list(source_ids), limit])
        return [row[0] for row in cursor.fetchall()]


def memory_ids(words: Sequence[str], crew_id: int, user_id: int, limit: int) -> list[int]:
    """Memories of ``crew_id`` from ``user_id``'s runs matching any of ``words``, best first."""
    if not words:
        return []
    with connection.cursor() as cursor:
        query = _query(words)
        cursor.execute(MEMORIES_SQL, [query, query, crew_id, user_id, limit])
        return [row[0] for row in cursor.fetchall()]
