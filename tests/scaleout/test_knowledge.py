"""Scale-out: knowledge sources and memory on PostgreSQL full-text search (SearchVector,
SearchRank, the GIN index), the same tests as on SQLite."""

from __future__ import annotations

from django.db import connection

from tests.knowledge.test_runs import (  # noqa: F401 - collected here as on SQLite
    client,
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


def test_the_chunk_text_has_a_gin_full_text_index_that_search_uses(builder) -> None:
    from knowledge.models import KnowledgeChunk, KnowledgeSource
    from knowledge.search import postgresql
    from tests.crews.api_helpers import private_crew

    assert connection.vendor == "postgresql"
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'knowledge_chunk_search'")
        [(definition,)] = cursor.fetchall()
    assert "gin" in definition.lower() and "to_tsvector" in definition

    owned = private_crew(builder)
    source = KnowledgeSource.objects.create(crew=owned, title="T", kind="text", content=b"x", status="indexed")
    KnowledgeChunk.objects.bulk_create(
        KnowledgeChunk(source=source, position=i, text=f"filler text number {i}") for i in range(2000)
    )
    KnowledgeChunk.objects.create(source=source, position=2000, text="the lighthouse keeper is Marta")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_knowledgechunk")
    query = (
        KnowledgeChunk.objects.annotate(search=postgresql.chunk_vector())
        .filter(search=postgresql._query(["lighthouse", "keeper"]))
    )
    assert "knowledge_chunk_search" in query.explain()
    assert postgresql.chunk_ids(["lighthouse", "keeper"], [source.pk], 5) == [query.get().pk]
