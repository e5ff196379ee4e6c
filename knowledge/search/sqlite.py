"""SQLite FTS5: external-content tables over chunks and memories, kept in step by triggers
(migration 0001), ranked by BM25.

Queries order by the FTS5 table's ``rank`` column (BM25 by default) rather than by ``bm25()``:
FTS5 then sorts its matches itself and SQLite needs no temporary b-tree (bench/knowledge.py,
10,000 chunks: the query takes 2.1 ms CPU instead of 4.0, same rows in the same order)."""

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


# Document frequencies of the words searched for, per process, for the chunks as they are now.
# bench/knowledge.py, 10,000 chunks: reading them took 4.5 ms of a search's 11 ms CPU (each
# word's whole list of chunks is read); kept, 0.03 ms. The key, the chunk table's row count and
# highest id, changes whenever a source is indexed or deleted (ids are not reused); a stale
# frequency could only change which words are kept, never what a kept word matches.
_frequencies: dict[tuple[str, int, int], dict[str, int]] = {}
FREQUENCIES_KEPT = 50_000  # words; past this the cache starts again


def _generation(cursor: Any) -> tuple[str, int, int]:
    # Two subqueries, so that SQLite counts from its smallest index and reads max(id) from the
    # b-tree's last row instead of scanning the table once for both.
    cursor.execute(
        "SELECT (SELECT count(*) FROM knowledge_knowledgechunk), (SELECT max(id) FROM knowledge_knowledgechunk)"
    )
    total, last = cursor.fetchone()
    return connection.settings_dict["NAME"], total, last or 0


def _document_frequencies(cursor: Any, generation: tuple[str, int, int], words: Sequence[str]) -> dict[str, int]:
    """How many chunks hold each of ``words`` (0 for none), read from the FTS5 vocabulary once a
    generation."""
    known = _frequencies.get(generation)
    if known is None or len(known) > FREQUENCIES_KEPT:
        _frequencies.clear()
        known = _frequencies[generation] = {}
    missing = [w for w in words if w not in known]
    if missing:
        marks = ",".join("%s" for _ in missing)
        cursor.execute(f"SELECT term, doc FROM knowledge_chunk_vocab WHERE term IN ({marks})", missing)
        found = dict(cursor.fetchall())
        known.update((w, found.get(w, 0)) for w in missing)
    return {w: known[w] for w in words}


def _rarest(cursor: Any, words: Sequence[str]) -> list[str]:
    generation = _generation(cursor)
    total = generation[1]
    if total < PRUNE_FROM_CHUNKS:
        return list(words)
    held = {w: n for w, n in _document_frequencies(cursor, generation, words).items() if n}
    known = sorted(held, key=lambda w: held[w])
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
        "ORDER BY f.rank LIMIT %s"
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
        "ORDER BY f.rank LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_match(words), crew_id, user_id, limit])
        return [row[0] for row in cursor.fetchall()]
