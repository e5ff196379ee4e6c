"""The knowledge pages without a browser: sources with their status, the memory page."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents.models import Agent
from crews.models import Crew
from knowledge.models import KnowledgeSource, Memory
from tests.conftest import signed_in
from tests.knowledge.files import pdf_with_text
from tests.knowledge.helpers import FACT


def test_an_agents_page_adds_a_file_and_shows_it_indexed(builder, django_capture_on_commit_callbacks):
    agent = Agent.objects.create(owner=builder, name="Researcher", role="Researcher", goal="Find")
    client = signed_in(builder)
    url = reverse("knowledge:source-list-agent", args=[agent.pk])
    assert url in client.get(reverse("agents:agent-detail", args=[agent.pk])).content.decode()

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"title": "Keepers", "file": SimpleUploadedFile("k.pdf", pdf_with_text(FACT))})

    assert response.status_code == 302
    page = client.get(url).content.decode()
    assert "Keepers" in page and "Indexed: 1 chunk" in page
    assert 'hx-trigger="every 1s"' not in page  # nothing left to wait for


def test_a_queued_source_makes_the_rows_poll_and_a_fragment_answers(builder):
    crew = Crew.objects.create(owner=builder, name="Islands")
    KnowledgeSource.objects.create(crew=crew, title="Waiting", kind="text", content=b"x")
    client = signed_in(builder)
    url = reverse("knowledge:source-list-crew", args=[crew.pk])

    assert 'hx-trigger="every 1s"' in client.get(url).content.decode()
    fragment = client.get(url + "?rows=1", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="source-rows"') and "Queued" in fragment


def test_the_memory_page_lists_edits_deletes_and_clears(builder, other_builder):
    crew = Crew.objects.create(owner=builder, name="Islands", memory=True, shared=True)
    one = Memory.objects.create(crew=crew, user=builder, text="Ferries leave at nine.")
    two = Memory.objects.create(crew=crew, user=builder, text="Visitors like short answers.")
    client = signed_in(builder)
    url = reverse("knowledge:memory-list", args=[crew.pk])

    page = client.get(url).content.decode()
    assert "What this crew remembers" in page and "Ferries leave at nine." in page
    assert "Ferries leave" not in signed_in(other_builder).get(url).content.decode()
    client.post(reverse("knowledge:memory-update", args=[one.pk]), {"text": "Ferries leave at ten."})
    client.post(reverse("knowledge:memory-delete", args=[two.pk]))
    assert list(Memory.objects.values_list("text", flat=True)) == ["Ferries leave at ten."]
    client.post(reverse("knowledge:memory-clear", args=[crew.pk]))
    assert not Memory.objects.exists()


def test_the_file_help_is_in_the_readers_language(builder):
    crew = Crew.objects.create(owner=builder, name="Islands")
    client = signed_in(builder)
    url = reverse("knowledge:source-list-crew", args=[crew.pk])

    page = client.get(url, HTTP_ACCEPT_LANGUAGE="pt-BR").content.decode()

    assert "Texto simples (.txt)" in page and "Plain text (.txt)" not in page
