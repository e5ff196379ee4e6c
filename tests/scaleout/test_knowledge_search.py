"""Scale-out: the search tests of tests/knowledge/test_search.py on PostgreSQL, and ts_rank's
order kept under the SQL LIMIT, read from the stored ``search_vector``."""

from __future__ import annotations

from django.db import connection

from knowledge.search import postgresql
from tests.knowledge.test_search import (  # noqa: F401 - collected here as on SQLite
    FILLER,
    crew,
    indexed,
    pruning,
    test_a_query_of_only_stopwords_finds_nothing_and_asks_the_index_nothing,
    test_a_word_no_chunk_held_is_found_once_a_source_holding_it_is_indexed,
    test_memories_come_best_first,
    test_past_the_threshold_a_word_most_chunks_hold_is_left_out_of_the_query,
    test_vectors_are_stored_packed_and_ranked_by_their_dot_product,
)


def test_the_sql_limit_keeps_the_best_chunks_in_the_order_ts_rank_gives_the_text(crew):  # noqa: F811 - the fixture
    # Chunk i says "keeper" i times among the same filler: every rank differs.
    source = indexed(crew, "Log", [" ".join(["keeper"] * i + [FILLER]) for i in range(1, 25)])
    with connection.cursor() as cursor:
        # Ranked as before migration 0002, from the text itself.
        cursor.execute(
            "SELECT id FROM knowledge_knowledgechunk WHERE to_tsvector('simple', text) @@ to_tsquery('simple', %s) "
            "ORDER BY ts_rank(to_tsvector('simple', text), to_tsquery('simple', %s)) DESC, id",
            ["keeper | harbour"] * 2,
        )
        every = [row[0] for row in cursor.fetchall()]

    best = postgresql.chunk_ids(["keeper", "harbour"], [source.pk], 5)

    assert len(every) == 24 and every[0] == source.chunks.get(position=23).pk
    assert best == every[:5]
    assert postgresql.chunk_ids(["keeper", "harbour"], [source.pk], 50) == every
