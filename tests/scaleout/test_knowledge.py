"""Scale-out: knowledge sources and memory on PostgreSQL full-text search (the stored
``search_vector``, its GIN index, ts_rank), the same tests as on SQLite."""

from __future__ import annotations

from django.db import connection

from tests.knowledge.conftest import client, fresh_vector_cache  # noqa: F401 - the knowledge tests' fixtures
from tests.knowledge.test_runs import (  # noqa: F401 - collected here as on SQLite
    server,
    test_a_deleted_memory_is_never_sent_again,
    test_a_task_gets_the_fact_only_its_agents_source_holds_and_the_other_agent_does_not,
    test_feedback_from_run_one_reaches_run_two_of_the_same_crew_only,
)
from tests.knowledge.test_sources import (  # noqa: F401
    crew,
    test_a_csv_made_here_indexes_each_row_with_its_column_names,
    test_a_failed_source_is_not_read_even_if_chunks_were_left,
    test_a_pdf_made_here_is_extracted_chunked_and_indexed,
    test_an_unreadable_file_fails_with_its_reason_and_is_never_searched,
    test_deleting_a_source_removes_it_from_search,
)


def test_chunks_and_memories_keep_their_vector_in_a_generated_gin_indexed_column(db) -> None:
    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, is_generated, generation_expression FROM information_schema.columns "
            "WHERE column_name = 'search_vector' ORDER BY table_name"
        )
        columns = cursor.fetchall()
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
            "('knowledge_knowledgechunk', 'knowledge_memory') AND indexdef ILIKE '%gin%'"
        )
        indexes = dict(cursor.fetchall())

    assert [(table, generated) for table, generated, _ in columns] == [
        ("knowledge_knowledgechunk", "ALWAYS"), ("knowledge_memory", "ALWAYS"),
    ]
    assert all("to_tsvector('simple'" in expression for _, _, expression in columns)
    assert sorted(indexes) == ["knowledge_knowledgechunk_search_vector", "knowledge_memory_search_vector"]
    assert all("(search_vector)" in definition for definition in indexes.values())


def test_past_the_threshold_search_uses_the_gin_index_leaves_common_words_out_and_counts_words_once(
    builder, monkeypatch
) -> None:
    from django.test.utils import CaptureQueriesContext

    from knowledge.models import KnowledgeChunk, KnowledgeSource
    from knowledge.search import postgresql, sqlite
    from tests.crews.api_helpers import private_crew

    monkeypatch.setattr(postgresql, "_frequencies", {})
    owned = private_crew(builder)
    source = KnowledgeSource.objects.create(crew=owned, title="T", kind="text", content=b"x", status="indexed")
    KnowledgeChunk.objects.bulk_create(
        # As long as chunks are (PLANNER_KNOWLEDGE_CHUNK_CHARS): a table of short rows is read whole.
        KnowledgeChunk(source=source, position=i, text=f"keeper filler text number {i}. " + "Waves roll. " * 80)
        for i in range(sqlite.PRUNE_FROM_CHUNKS)
    )
    other = KnowledgeSource.objects.create(crew=owned, title="O", kind="text", content=b"x", status="indexed")
    marta = KnowledgeChunk.objects.create(source=source, position=9999, text="the lighthouse keeper is Marta")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledgechunk")
        cursor.execute("EXPLAIN " + postgresql.CHUNKS_SQL, ["lighthouse", "lighthouse", [source.pk], 5])  # as pruned
        plan = "\n".join(row[0] for row in cursor.fetchall())
    words = ["keeper", "lighthouse", "filler"]

    with CaptureQueriesContext(connection) as first:
        found = postgresql.chunk_ids(words, [source.pk], 5)
    with CaptureQueriesContext(connection) as again:
        assert postgresql.chunk_ids(words, [source.pk], 5) == found
    marta.text = "the lighthouse keeper is Joana"
    marta.save()
    KnowledgeChunk.objects.create(source=source, position=10_000, text="the lighthouse is red")
    with CaptureQueriesContext(connection) as after:
        later = postgresql.chunk_ids(words, [source.pk], 5)
    other.delete()
    with CaptureQueriesContext(connection) as deleted:
        assert postgresql.chunk_ids(words, [source.pk], 5) == later

    assert "knowledge_knowledgechunk_search_vector" in plan
    # "keeper" and "filler" are in every chunk: only the rare word is searched for.
    assert found == [marta.pk]
    assert len(later) == 2 and postgresql.chunk_ids(["joana"], [source.pk], 5) == [marta.pk]
    counts = [sum("unnest" in q["sql"] for q in c.captured_queries) for c in (first, again, after, deleted)]
    assert counts == [1, 0, 1, 1]


def test_a_word_first_counted_before_its_chunk_was_visible_is_found_once_it_is(builder, monkeypatch) -> None:
    """Indexing holds its chunk ids before it commits, so the cache key does not move when they
    become visible: a word counted 0 must not be remembered as absent (review of #19)."""
    from knowledge.models import KnowledgeChunk, KnowledgeSource
    from knowledge.search import postgresql, sqlite
    from tests.crews.api_helpers import private_crew

    monkeypatch.setattr(postgresql, "_frequencies", {})
    source = KnowledgeSource.objects.create(
        crew=private_crew(builder), title="T", kind="text", content=b"x", status="indexed"
    )
    KnowledgeChunk.objects.bulk_create(
        KnowledgeChunk(source=source, position=i, text=f"keeper filler text number {i}.")
        for i in range(sqlite.PRUNE_FROM_CHUNKS)
    )
    words = ["heron", "keeper"]
    assert postgresql.chunk_ids(words, [source.pk], 5) == []  # "keeper" is everywhere: left out; "heron" counted 0

    # Committed late with an id below the highest: the cache's key is unchanged.
    heron = KnowledgeChunk.objects.create(pk=-7, source=source, position=99_999, text="a blue heron nests here")

    assert postgresql.chunk_ids(words, [source.pk], 5)[0] == heron.pk
