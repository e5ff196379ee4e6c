"""Search made fast without changing what it finds (bench/knowledge.py): FTS5 sorts by its own
rank under the SQL LIMIT, the words' document frequencies are read once until the chunks change,
vectors are stored packed and scored in C."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from crews.models import Crew
from knowledge import embeddings
from knowledge.models import KnowledgeChunk, KnowledgeSource, Memory
from knowledge.search import postgresql, sqlite
from knowledge.selectors import knowledge_search, memory_search

FILLER = "ships sail past the island every morning while gulls circle over the pier"


@pytest.fixture
def crew(db: Any) -> Crew:
    owner = get_user_model().objects.create_user("searcher")
    return Crew.objects.create(owner=owner, name="Islands")


@pytest.fixture
def pruning(monkeypatch: pytest.MonkeyPatch) -> dict[Any, Any]:
    """Common words left out from the first chunk on, with a frequency cache of this test's own."""
    cache: dict[Any, Any] = {}
    monkeypatch.setattr(sqlite, "PRUNE_FROM_CHUNKS", 0)  # PostgreSQL's search reads it too
    monkeypatch.setattr(sqlite, "_frequencies", cache)
    monkeypatch.setattr(postgresql, "_frequencies", cache)  # one of them is used (tests/scaleout)
    return cache


def indexed(crew: Crew, title: str, texts: list[str]) -> KnowledgeSource:
    source = KnowledgeSource.objects.create(crew=crew, title=title, kind="text", content=b"-", status="indexed",
                                            chunk_count=len(texts))
    KnowledgeChunk.objects.bulk_create(
        KnowledgeChunk(source=source, position=i, text=text) for i, text in enumerate(texts)
    )
    return source


def vocabulary_reads(queries: CaptureQueriesContext) -> int:
    return sum("knowledge_chunk_vocab" in q["sql"] for q in queries.captured_queries)


def test_the_sql_limit_keeps_the_best_chunks_in_bm25_order(crew):
    # Chunk i says "keeper" i times among the same filler: every score differs.
    source = indexed(crew, "Log", [" ".join(["keeper"] * i + [FILLER]) for i in range(1, 25)])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT rowid, bm25(knowledge_chunk_fts) FROM knowledge_chunk_fts WHERE knowledge_chunk_fts MATCH %s",
            ['"keeper" OR "harbour"'],
        )
        every = [pk for pk, _score in sorted(cursor.fetchall(), key=lambda row: row[1])]

    best = sqlite.chunk_ids(["keeper", "harbour"], [source.pk], 5)

    assert len(every) == 24
    assert best == every[:5]
    assert sqlite.chunk_ids(["keeper", "harbour"], [source.pk], 50) == every


def test_a_query_of_only_stopwords_finds_nothing_and_asks_the_index_nothing(crew):
    indexed(crew, "Log", ["The keeper is there and what is it."])

    with CaptureQueriesContext(connection) as queries:
        hits = knowledge_search(agent_id=None, crew_id=crew.pk, text="What is the, and where is it?")

    assert hits == []
    assert not any("_fts" in q["sql"] for q in queries.captured_queries)


def test_word_frequencies_are_read_once_until_the_chunks_change(crew, pruning):
    indexed(crew, "Log", ["The keeper rows to the harbour.", FILLER])
    text = "Where does the keeper row to? The harbour?"

    with CaptureQueriesContext(connection) as first:
        found = knowledge_search(agent_id=None, crew_id=crew.pk, text=text)
    with CaptureQueriesContext(connection) as again:
        assert knowledge_search(agent_id=None, crew_id=crew.pk, text=text) == found
    indexed(crew, "More", ["The harbour master keeps the keys."])
    with CaptureQueriesContext(connection) as after:
        knowledge_search(agent_id=None, crew_id=crew.pk, text=text)

    assert [h.source_title for h in found] == ["Log"]
    assert (vocabulary_reads(first), vocabulary_reads(again), vocabulary_reads(after)) == (1, 0, 1)


def test_a_word_no_chunk_held_is_found_once_a_source_holding_it_is_indexed(crew, pruning):
    indexed(crew, "Log", [FILLER])
    assert knowledge_search(agent_id=None, crew_id=crew.pk, text="lighthouse") == []

    indexed(crew, "Light", ["The lighthouse is red."])

    assert [h.text for h in knowledge_search(agent_id=None, crew_id=crew.pk, text="lighthouse")] == [
        "The lighthouse is red."
    ]


def test_past_the_threshold_a_word_most_chunks_hold_is_left_out_of_the_query(crew, pruning):
    indexed(crew, "Log", [f"Harbour log {i}: {FILLER}." for i in range(20)] + ["The harbour keeper is Marta."])

    hits = knowledge_search(agent_id=None, crew_id=crew.pk, text="harbour keeper")
    again = knowledge_search(agent_id=None, crew_id=crew.pk, text="harbour keeper")

    assert [h.text for h in hits] == [h.text for h in again] == ["The harbour keeper is Marta."]


def test_memories_come_best_first(crew):
    user = crew.owner
    for text in ("Visitors like ferries.", "Ferries, ferries: visitors ask about ferries first.", "Gulls."):
        Memory.objects.create(crew=crew, user=user, text=text)

    found = memory_search(crew_id=crew.pk, user_id=user.pk, text="ferries")

    assert [m.text for m in found] == ["Ferries, ferries: visitors ask about ferries first.", "Visitors like ferries."]


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def test_vectors_are_stored_packed_and_ranked_by_their_dot_product(crew):
    vectors = [unit([1.0, 0.0, 0.2]), unit([0.6, 0.8, 0.0]), unit([0.0, 0.3, 1.0]), unit([0.9, 0.1, 0.1])]
    source = indexed(crew, "Vectors", [f"chunk {i}" for i in range(len(vectors) + 2)])
    chunks = list(source.chunks.order_by("position"))
    for chunk, vector in zip(chunks, vectors, strict=False):
        chunk.embedding = embeddings.pack(vector)
    chunks[1].embedding = vectors[1]  # stored as a list, as before packing
    chunks[4].embedding = "not base64!"
    chunks[5].embedding = embeddings.pack([1.0, 0.0])  # another model's size
    KnowledgeChunk.objects.bulk_update(chunks, ["embedding"])
    query = unit([1.0, 0.2, 0.0])

    nearest = embeddings.nearest_to(query, [source.pk], 10)

    exact = sorted(range(len(vectors)), key=lambda i: -sum(a * b for a, b in zip(query, vectors[i], strict=True)))
    assert nearest == [chunks[i].pk for i in exact]
    stored = KnowledgeChunk.objects.get(pk=chunks[0].pk).embedding
    assert isinstance(stored, str) and len(stored) < len(str(vectors[0]))
    assert embeddings.unpack(stored) == pytest.approx(vectors[0], abs=1e-6)
