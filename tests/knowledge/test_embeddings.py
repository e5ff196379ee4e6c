"""With an embedding model set, chunks and queries are embedded (the fake server's
/v1/embeddings, through real litellm) and ranking fuses both lists (reciprocal rank fusion)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ninja.testing import TestClient

from agents.models import LLM
from knowledge.models import KnowledgeChunk
from knowledge.selectors import fuse, knowledge_search
from planner_site.api import api
from tests.fakes.openai_server import FakeLLMServer
from tests.knowledge.helpers import answers, events, fake_llm, island_crew, kickoff, paste

# A toy "meaning": how much a text is about lighthouses, their keepers, ferries.
CONCEPTS = ({"lighthouse", "lighthouses", "beacon"}, {"keeper", "keepers", "tends", "keeps"},
            {"ferries", "ferry", "pier", "timetable"})
PARAPHRASED = "The lighthouse keeper of Ilha Verde is Marta Quill."
SOURCES = {
    "Keepers": PARAPHRASED,
    "Harbour": "Ilha Verde: the beacon on the pier is red. Ilha Verde ferries leave at nine.",
    **{f"Guide {i}": f"Lighthouses guide ships at night, guide number {i}." for i in range(3)},
}
QUESTION = "Who tends the beacon on Ilha Verde?"


def meaning(text: str) -> list[float]:
    words = re.findall(r"\w+", text.lower())
    return [float(sum(w in group for w in words)) for group in CONCEPTS] + [0.1]


def test_reciprocal_rank_fusion_prefers_what_both_rankings_place_high():
    assert fuse([[1, 2, 3], [3, 1, 2]]) == [1, 3, 2]
    assert fuse([[], [7]]) == [7]


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as server:
        server.default = answers
        server.embed = meaning
        yield server


def test_an_embedding_model_ranks_the_paraphrased_fact_first(
    builder, server, settings, django_capture_on_commit_callbacks
):
    client = TestClient(api)
    LLM.objects.create(name="Embedder", model="openai/text-embedding-fake", api_base=server.base_url)
    crew = island_crew(builder, fake_llm(server))
    crew.tasks.filter(order=0).update(name="Beacon", description=QUESTION)
    settings.PLANNER_EMBEDDING_LLM = "Embedder"
    for title, text in SOURCES.items():
        paste(client, builder, f"crews/{crew.pk}", title, text, django_capture_on_commit_callbacks)
    assert KnowledgeChunk.objects.filter(embedding__isnull=True).count() == 0
    assert len(server.embedding_requests) == len(SOURCES)  # one batch a source

    settings.PLANNER_EMBEDDING_LLM = ""
    full_text_only = knowledge_search(agent_id=None, crew_id=crew.pk, text=f"Beacon\n{QUESTION}")
    settings.PLANNER_EMBEDDING_LLM = "Embedder"
    assert full_text_only[0].source_title == "Harbour"  # the words match, the meaning less so

    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    first = events(run, "knowledge.retrieved")[0].data["chunks"][0]
    assert (first["title"], first["text"]) == ("Keepers", PARAPHRASED)
    assert any(QUESTION in str(body["input"]) for body in server.embedding_requests)  # the query's

