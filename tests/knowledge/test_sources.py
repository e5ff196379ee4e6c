"""Knowledge sources through the API: upload, extract, chunk, index; limits, failures, access."""

from __future__ import annotations

from typing import Any

import pytest

from agents.models import Agent
from crews.models import Crew
from knowledge.chunking import split_text
from knowledge.models import KnowledgeChunk, KnowledgeSource
from knowledge.selectors import knowledge_search
from tests.knowledge.files import BROKEN_PDF, NOT_UTF8, csv_of, pdf_with_text
from tests.knowledge.helpers import FACT, paste, upload


@pytest.fixture
def crew(builder: Any) -> Crew:
    crew = Crew.objects.create(owner=builder, name="Islands")
    agent = Agent.objects.create(owner=builder, name="Researcher", role="Researcher", goal="Find facts")
    crew.agents.set([agent])
    return crew


def test_a_pdf_made_here_is_extracted_chunked_and_indexed(client, builder, crew, django_capture_on_commit_callbacks):
    pdf = pdf_with_text("Island notes.", FACT, "Ferries leave at nine.")

    response = upload(client, builder, f"crews/{crew.pk}", pdf, "notes.pdf", django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "pdf"
    assert response.json()["status"] == "queued"  # as answered; the worker indexes it after
    body = client.get(f"/knowledge/{response.json()['id']}", user=builder).json()
    assert (body["status"], body["error"], body["title"]) == ("indexed", "", "notes.pdf")
    assert body["chunks"] == 1
    [hit] = knowledge_search(agent_id=None, crew_id=crew.pk, text="Who keeps the lighthouse?")
    assert "Marta Quill" in hit.text
    assert hit.source_title == "notes.pdf"


def test_a_csv_made_here_indexes_each_row_with_its_column_names(
    client, builder, crew, django_capture_on_commit_callbacks
):
    rows = [["island", "keeper", "since"], ["Ilha Verde", "Marta Quill", "1987"], ["Ilha Azul", "Rui Sal", "2001"]]

    response = upload(client, builder, f"crews/{crew.pk}", csv_of(rows), "keepers.csv",
                      django_capture_on_commit_callbacks, title="Keepers")

    assert response.status_code == 201, response.content
    source = KnowledgeSource.objects.get(pk=response.json()["id"])
    assert (source.kind, source.status, source.title) == ("csv", "indexed", "Keepers")
    [chunk] = KnowledgeChunk.objects.filter(source=source)
    assert "island: Ilha Azul; keeper: Rui Sal; since: 2001" in chunk.text
    [hit] = knowledge_search(agent_id=None, crew_id=crew.pk, text="keeper of Ilha Azul")
    assert "Rui Sal" in hit.text


def test_pasted_text_is_a_plain_text_source(client, builder, crew, django_capture_on_commit_callbacks):
    response = paste(client, builder, f"crews/{crew.pk}", "Facts", FACT, django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "text"
    listed = client.get(f"/crews/{crew.pk}/knowledge", user=builder).json()
    assert [(s["title"], s["status"], s["chunks"]) for s in listed] == [("Facts", "indexed", 1)]


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("broken.pdf", BROKEN_PDF, "The PDF cannot be read"),
        ("latin.txt", NOT_UTF8, "The file is not UTF-8 text."),
        ("bad.json", b'{"keeper": ', "The file is not valid JSON"),
        ("blank.pdf", pdf_with_text(), "The PDF has no text to extract"),
    ],
)
def test_an_unreadable_file_fails_with_its_reason_and_is_never_searched(
    client, builder, crew, django_capture_on_commit_callbacks, name, data, reason
):
    paste(client, builder, f"crews/{crew.pk}", "Other", "Ferries leave at nine.", django_capture_on_commit_callbacks)

    response = upload(client, builder, f"crews/{crew.pk}", data, name, django_capture_on_commit_callbacks)

    assert response.status_code == 201, response.content
    body = client.get(f"/knowledge/{response.json()['id']}", user=builder).json()
    assert body["status"] == "failed"
    assert body["error"].startswith(reason), body["error"]
    assert body["chunks"] == 0
    assert not KnowledgeChunk.objects.filter(source_id=body["id"]).exists()
    hits = knowledge_search(agent_id=None, crew_id=crew.pk, text="keeper ferries nine pdf json")
    assert {h.source_title for h in hits} == {"Other"}


def test_a_failed_source_is_not_read_even_if_chunks_were_left(builder, crew):
    source = KnowledgeSource.objects.create(crew=crew, title="Half", kind="text", content=b"x", status="indexing")
    KnowledgeChunk.objects.create(source=source, position=0, text=FACT)

    assert knowledge_search(agent_id=None, crew_id=crew.pk, text="lighthouse keeper") == []


def test_a_file_over_the_size_limit_is_refused_with_413(
    client, builder, crew, settings, django_capture_on_commit_callbacks
):
    settings.PLANNER_KNOWLEDGE_MAX_FILE_BYTES = 100

    response = upload(client, builder, f"crews/{crew.pk}", b"x" * 101, "big.txt", django_capture_on_commit_callbacks)

    assert response.status_code == 413
    assert response.json()["code"] == "too_large"
    assert not KnowledgeSource.objects.exists()


def test_a_kind_the_site_does_not_read_and_too_many_sources_are_422(
    client, builder, crew, settings, django_capture_on_commit_callbacks
):
    settings.PLANNER_KNOWLEDGE_MAX_SOURCES = 1
    owner = f"crews/{crew.pk}"

    exe = upload(client, builder, owner, b"MZ", "tool.exe", django_capture_on_commit_callbacks)
    first = paste(client, builder, owner, "One", "one", django_capture_on_commit_callbacks)
    second = paste(client, builder, owner, "Two", "two", django_capture_on_commit_callbacks)

    assert (exe.status_code, exe.json()["errors"][0]["field"]) == (422, "file")
    assert first.status_code == 201
    assert (second.status_code, second.json()["code"]) == (422, "too_many_sources")


def test_a_source_with_more_chunks_than_allowed_fails_whole(
    client, builder, crew, settings, django_capture_on_commit_callbacks
):
    settings.PLANNER_KNOWLEDGE_MAX_CHUNKS = 2
    text = "\n\n".join(f"Paragraph {i}. " + "word " * 250 for i in range(4))

    response = paste(client, builder, f"crews/{crew.pk}", "Long", text, django_capture_on_commit_callbacks)

    source = KnowledgeSource.objects.get(pk=response.json()["id"])
    assert source.status == "failed"
    assert "at most 2" in source.error
    assert not source.chunks.exists()


def test_someone_elses_sources_are_not_found_and_a_viewer_cannot_add(
    client, builder, other_builder, viewer, crew, django_capture_on_commit_callbacks
):
    source = paste(client, builder, f"crews/{crew.pk}", "Facts", FACT, django_capture_on_commit_callbacks).json()
    agent = crew.agents.get()

    assert client.get(f"/knowledge/{source['id']}", user=other_builder).status_code == 404
    assert client.delete(f"/knowledge/{source['id']}", user=other_builder).status_code == 404
    assert client.get(f"/crews/{crew.pk}/knowledge", user=other_builder).status_code == 404
    assert client.get(f"/agents/{agent.pk}/knowledge", user=other_builder).status_code == 404
    refused = paste(client, other_builder, f"agents/{agent.pk}", "Mine", "x", django_capture_on_commit_callbacks)
    assert refused.status_code == 404
    assert paste(client, viewer, f"crews/{crew.pk}", "V", "x", django_capture_on_commit_callbacks).status_code in (
        403, 404
    )


def test_deleting_a_source_removes_it_from_search(client, builder, crew, django_capture_on_commit_callbacks):
    source = paste(client, builder, f"crews/{crew.pk}", "Facts", FACT, django_capture_on_commit_callbacks).json()

    assert client.delete(f"/knowledge/{source['id']}", user=builder).status_code == 204

    assert knowledge_search(agent_id=None, crew_id=crew.pk, text="lighthouse keeper") == []
    assert client.get(f"/knowledge/{source['id']}", user=builder).status_code == 404


def test_chunks_overlap_and_break_at_sentences():
    text = " ".join(f"Sentence number {i} is here." for i in range(60))

    chunks = split_text(text, size=200, overlap=50)

    assert all(len(c) <= 200 for c in chunks)
    assert all(c.endswith(".") for c in chunks[:-1])
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert before[-20:] in after or after.split(" ")[0] in before  # the next one repeats the end
    assert "".join(chunks).count("Sentence number 59") >= 1
