"""Vectors kept per process (``knowledge.embeddings.vector_cache``): a search finds what it finds
with every vector read from the database, and never a vector of chunks that were re-indexed or
deleted."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from ninja.testing import TestClient

from agents.models import LLM
from crews.models import Crew
from knowledge import embeddings, services
from knowledge.models import KnowledgeChunk, KnowledgeSource
from knowledge.selectors import knowledge_search
from planner_site.api import api
from tests.fakes.openai_server import FakeLLMServer
from tests.knowledge.helpers import answers, island_crew, paste


def unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def uncached(query: list[float], source_ids: list[int], limit: int) -> list[int]:
    """The search as it was before vectors were kept: every row read, scored, sorted."""
    scored = []
    for pk, stored in KnowledgeChunk.objects.filter(source_id__in=source_ids).values_list("id", "embedding"):
        vector = embeddings.unpack(stored)
        if vector is not None and len(vector) == len(query):
            scored.append((math.sumprod(query, vector), pk))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    return [pk for _score, pk in scored[:limit]]


def vector_reads(queries: CaptureQueriesContext) -> int:
    return sum('"embedding"' in q["sql"] for q in queries.captured_queries)


def stored(crew: Crew, title: str, vectors: list[Any], *, packed: bool = True) -> KnowledgeSource:
    """An indexed source of ``crew`` whose chunks hold ``vectors``: lists packed (or as JSON lists,
    as stored before packing), anything else as it is."""
    source = KnowledgeSource.objects.create(crew=crew, title=title, kind="text", content=b"-", status="indexed",
                                            chunk_count=len(vectors))
    KnowledgeChunk.objects.bulk_create(
        KnowledgeChunk(source=source, position=i, text=f"{title} {i}",
                       embedding=embeddings.pack(v) if packed and isinstance(v, list) else v)
        for i, v in enumerate(vectors)
    )
    return source


@pytest.fixture
def crew(builder: Any) -> Crew:
    return Crew.objects.create(owner=builder, name="Islands")


def test_kept_vectors_rank_exactly_as_vectors_read_each_search(crew):
    rng = random.Random(19)
    dims = 24

    def vector() -> list[float]:
        return unit([rng.uniform(-1, 1) for _ in range(dims)])

    a = stored(crew, "A", [vector() for _ in range(40)])
    b = stored(crew, "B", [vector() for _ in range(30)] + [None, "not base64!", unit([1.0, 2.0])])
    legacy = stored(crew, "Legacy", [vector() for _ in range(5)], packed=False)
    ties = stored(crew, "Ties", [[1.0] + [0.0] * (dims - 1)] * 3)  # equal scores: ties by id
    ids = [a.pk, b.pk, legacy.pk, ties.pk]
    queries = [vector() for _ in range(5)] + [[1.0] + [0.0] * (dims - 1)]

    with CaptureQueriesContext(connection) as cold:
        first = [embeddings.nearest_to(q, ids, 20) for q in queries]
    with CaptureQueriesContext(connection) as warm:
        again = [embeddings.nearest_to(q, ids, 20) for q in queries]

    expected = [uncached(q, ids, 20) for q in queries]
    assert first == again == expected
    assert embeddings.nearest_to(queries[0], ids, 500) == uncached(queries[0], ids, 500)
    assert (vector_reads(cold), vector_reads(warm)) == (1, 0)  # read once, then kept
    assert len(embeddings.vector_cache) == 4


def test_a_source_past_the_cache_s_size_is_still_scored_and_the_oldest_goes_first(crew, monkeypatch):
    monkeypatch.setattr(embeddings, "vector_cache", embeddings.VectorCache(kept_floats=40))
    small = [stored(crew, f"S{i}", [unit([1.0, float(i)]), unit([float(i), 1.0])] * 5) for i in range(3)]
    huge = stored(crew, "Huge", [unit([1.0, 0.5])] * 30)
    query = unit([1.0, 0.1])

    for source in small:
        assert embeddings.nearest_to(query, [source.pk], 3) == uncached(query, [source.pk], 3)
    assert embeddings.nearest_to(query, [huge.pk], 3) == uncached(query, [huge.pk], 3)

    cache = embeddings.vector_cache
    assert cache.floats == 40 and len(cache) == 2  # 20 floats a small source; the huge one not kept
    with CaptureQueriesContext(connection) as newest:
        embeddings.nearest_to(query, [small[2].pk], 3)
    with CaptureQueriesContext(connection) as oldest:
        embeddings.nearest_to(query, [small[0].pk], 3)
    assert (vector_reads(newest), vector_reads(oldest)) == (0, 1)


# Through indexing: an embedding model on the fake server, sources pasted through the API -------------

@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as server:
        server.default = answers
        yield server


def meaning_from(table: dict[str, list[float]]) -> Any:
    """The fake model's embedding: the vector of the table's word the text holds."""
    return lambda text: next((v for word, v in table.items() if word in text), [0.0, 0.0, 1.0])


def titles(crew: Crew, text: str) -> list[str]:
    return [hit.text for hit in knowledge_search(agent_id=None, crew_id=crew.pk, text=text)]


def test_after_re_indexing_or_deleting_a_source_no_kept_vector_is_served(
    builder, server, settings, django_capture_on_commit_callbacks
):
    client = TestClient(api)
    LLM.objects.create(name="Embedder", model="openai/text-embedding-fake", api_base=server.base_url)
    settings.PLANNER_EMBEDDING_LLM = "Embedder"
    settings.PLANNER_KNOWLEDGE_TOP_K = 1
    crew = island_crew(builder, None)
    table = {"zzquery": [1.0, 0.0, 0.0], "Ferries": [0.8, 0.6, 0.0], "Gulls": [0.0, 1.0, 0.0]}
    server.embed = meaning_from(table)
    for title, text in (("Ferries", "Ferries leave at nine."), ("Gulls", "Gulls nest on the cliffs.")):
        response = paste(client, builder, f"crews/{crew.pk}", title, text, django_capture_on_commit_callbacks)
        assert response.status_code == 201, response.content
    # The query shares no word with either chunk: only the vectors rank.
    assert titles(crew, "zzquery") == ["Ferries leave at nine."]
    assert len(embeddings.vector_cache) == 2

    # The model now places gulls nearest; the sources are indexed again by the worker.
    table["Gulls"], table["Ferries"] = [0.9, 0.1, 0.0], [0.0, 1.0, 0.0]
    for source in KnowledgeSource.objects.filter(crew=crew):
        with django_capture_on_commit_callbacks(execute=True):
            services.source_reindex(source=source)
    assert set(KnowledgeSource.objects.filter(crew=crew).values_list("status", flat=True)) == {"indexed"}

    assert titles(crew, "zzquery") == ["Gulls nest on the cliffs."]

    gulls = KnowledgeSource.objects.get(crew=crew, title="Gulls")
    assert client.delete(f"/knowledge/{gulls.pk}", user=builder).status_code == 204
    assert titles(crew, "zzquery") == ["Ferries leave at nine."]
    assert embeddings.nearest_to([1.0, 0.0, 0.0], [gulls.pk], 5) == []
