"""Knowledge and memory in runs, through the API and the worker, on the fake OpenAI server."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from crews import people
from knowledge.models import Memory
from tests.conftest import signed_in
from tests.fakes.openai_server import FakeLLMServer
from tests.knowledge.files import pdf_with_text
from tests.knowledge.helpers import (
    FACT,
    answers,
    events,
    fake_llm,
    island_crew,
    kickoff,
    paste,
    task_requests,
    upload,
)

KEEPER = "Who is the lighthouse keeper of Ilha Verde?"
HARBOUR = "Describe the lighthouse of Ilha Verde for visitors."


@pytest.fixture
def server() -> Any:
    with FakeLLMServer() as server:
        server.default = answers
        yield server


def test_a_task_gets_the_fact_only_its_agents_source_holds_and_the_other_agent_does_not(
    client, builder, server, django_capture_on_commit_callbacks
):
    crew = island_crew(builder, fake_llm(server))
    researcher = crew.agents.get(role="Researcher")
    pdf = pdf_with_text("Island notes.", FACT)
    source = upload(client, builder, f"agents/{researcher.pk}", pdf, "keepers.pdf",
                    django_capture_on_commit_callbacks, title="Keepers").json()
    paste(client, builder, f"crews/{crew.pk}", "Timetable", "Ferries to Ilha Verde leave at nine.",
          django_capture_on_commit_callbacks)

    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    [keeper_request] = task_requests(server, KEEPER)
    assert "Marta Quill" in keeper_request.raw.decode()
    assert "Knowledge from your sources (Keepers" in keeper_request.last_user_text()
    [harbour_request] = task_requests(server, HARBOUR)
    assert "Marta Quill" not in harbour_request.raw.decode()  # the researcher's own source
    assert "Ferries to Ilha Verde" in harbour_request.raw.decode()  # the crew's, for every agent
    retrieved = events(run, "knowledge.retrieved")
    assert [e.task_id for e in retrieved] == [t.pk for t in crew.tasks.order_by("order")]
    first = retrieved[0].data
    assert source["id"] in first["source_ids"]
    chunk = next(c for c in first["chunks"] if c["source"] == source["id"])
    assert chunk["title"] == "Keepers"
    assert "Marta Quill" in chunk["text"]
    # The event comes after the task starts, before its first LLM call.
    kinds = [e.type for e in run.events.filter(task_id=retrieved[0].task_id).order_by("seq")][:3]
    assert kinds == ["task.started", "knowledge.retrieved", "llm.started"]
    # The run page shows it beside the task: source title and snippet.
    page = signed_in(builder).get(reverse("crews:run-detail", args=[run.pk])).content.decode()
    assert "Knowledge used: 2 passages from " in page
    assert "Keepers: “Island notes. The lighthouse keeper of Ilha Verde is Marta Quill" in page


def test_the_retrieved_text_keeps_within_its_token_budget(
    client, builder, server, settings, django_capture_on_commit_callbacks
):
    settings.PLANNER_KNOWLEDGE_TOKENS = 40  # about 160 characters
    crew = island_crew(builder, fake_llm(server))
    for i in range(3):
        paste(client, builder, f"crews/{crew.pk}", f"Note {i}", f"The lighthouse of Ilha Verde, note {i}. " * 8,
              django_capture_on_commit_callbacks)

    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    chunks = events(run, "knowledge.retrieved")[0].data["chunks"]
    assert len(chunks) == 1
    assert sum(len(c["text"]) for c in chunks) <= 40 * 4


def test_a_crew_without_sources_or_memory_runs_as_before(client, builder, server, django_capture_on_commit_callbacks):
    crew = island_crew(builder, fake_llm(server))

    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    assert events(run, "knowledge.retrieved") == []
    assert "Knowledge from your sources" not in server.requests[0].raw.decode()


# Memory ------------------------------------------------------------------------------------------


def test_feedback_from_run_one_reaches_run_two_of_the_same_crew_only(
    client, builder, server, monkeypatch, django_capture_on_commit_callbacks
):
    llm = fake_llm(server)
    crew = island_crew(builder, llm, memory=True)
    other = island_crew(builder, llm, name="Other", memory=True)
    crew.tasks.filter(order=0).update(human_input=True)
    feedback = "Always give the keeper's full name and the year they started."

    # The person answers the first task's feedback request as soon as it is asked, then accepts.
    async def answer_once(self: Any, *, task_key: str, answer: str) -> str:
        asked = getattr(self, "_asked", 0)
        self._asked = asked + 1
        return feedback if asked == 0 else ""

    monkeypatch.setattr(people.DatabaseHuman, "request_feedback", answer_once)
    first = kickoff(client, builder, crew, django_capture_on_commit_callbacks)
    monkeypatch.undo()
    crew.tasks.update(human_input=False)  # run two asks nobody
    saved = events(first, "memory.saved")
    assert any(feedback in item["text"] for e in saved for item in e.data["items"])
    assert Memory.objects.filter(crew=crew, run=first, text__contains=feedback).exists()
    assert [e.data["purpose"] for e in first.events.filter(type="llm.completed")].count("memory") == 2

    server.requests.clear()
    kickoff(client, builder, crew, django_capture_on_commit_callbacks)
    [again] = task_requests(server, KEEPER)
    assert feedback in again.raw.decode()
    assert "What this crew remembers" in again.raw.decode()

    server.requests.clear()
    kickoff(client, builder, other, django_capture_on_commit_callbacks)
    assert all(feedback not in r.raw.decode() for r in server.requests)


def test_a_deleted_memory_is_never_sent_again(client, builder, server, django_capture_on_commit_callbacks):
    crew = island_crew(builder, fake_llm(server), memory=True)
    kept = Memory.objects.create(crew=crew, user=builder, text="The lighthouse of Ilha Verde is painted red.")
    gone = Memory.objects.create(crew=crew, user=builder, text="The lighthouse keeper of Ilha Verde hates visitors.")

    listed = client.get(f"/crews/{crew.pk}/memories", user=builder).json()
    assert {m["id"] for m in listed} == {kept.pk, gone.pk}
    assert client.delete(f"/memories/{gone.pk}", user=builder).status_code == 204
    edited = client.patch(f"/memories/{kept.pk}", json={"text": "The lighthouse of Ilha Verde is painted blue."},
                          user=builder)
    assert edited.status_code == 200, edited.content

    run = kickoff(client, builder, crew, django_capture_on_commit_callbacks)

    sent = "".join(r.raw.decode() for r in server.requests)
    assert "hates visitors" not in sent
    assert "painted blue" in sent and "painted red" not in sent
    recalled = events(run, "memory.recalled")
    assert recalled and all(item["id"] != gone.pk for e in recalled for item in e.data["items"])


def test_memories_are_the_crews_and_the_persons_own(client, builder, other_builder, server):
    crew = island_crew(builder, fake_llm(server), memory=True, shared=True)
    mine = Memory.objects.create(crew=crew, user=builder, text="Mine.")

    assert client.get(f"/crews/{crew.pk}/memories", user=other_builder).json() == []
    assert client.patch(f"/memories/{mine.pk}", json={"text": "x"}, user=other_builder).status_code == 404
    assert client.delete(f"/memories/{mine.pk}", user=other_builder).status_code == 404
    assert client.delete(f"/crews/{crew.pk}/memories", user=builder).status_code == 204
    assert not Memory.objects.exists()


def test_the_crews_memory_switch_is_off_by_default_and_set_through_the_api(client, builder, server):
    crew = island_crew(builder, fake_llm(server))
    assert client.get(f"/crews/{crew.pk}", user=builder).json()["memory"] is False

    response = client.patch(f"/crews/{crew.pk}", json={"memory": True}, user=builder)

    assert response.status_code == 200, response.content
    assert response.json()["memory"] is True
    crew.refresh_from_db()
    assert crew.memory is True
