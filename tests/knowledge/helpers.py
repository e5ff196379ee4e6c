"""Builders for the knowledge tests: a two-agent crew on the fake server, uploads through the API."""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.datastructures import MultiValueDict
from ninja.testing import TestClient

from agents.models import LLM, Agent
from crews.models import Crew, Run, RunEvent, Task
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply

FACT = "The lighthouse keeper of Ilha Verde is Marta Quill, since 1987."


def upload(client: TestClient, user: Any, owner: str, data: bytes, name: str, capture: Any, **fields: str) -> Any:
    """POST a file to ``owner`` ("crews/1", "agents/2"); its indexing runs on commit."""
    files = MultiValueDict({"file": [SimpleUploadedFile(name, data, "application/octet-stream")]})
    with capture(execute=True):
        return client.post(f"/{owner}/knowledge", data=fields, FILES=files, user=user)


def paste(client: TestClient, user: Any, owner: str, title: str, text: str, capture: Any) -> Any:
    with capture(execute=True):
        return client.post(f"/{owner}/knowledge", json={"title": title, "text": text}, user=user)


def fake_llm(server: FakeLLMServer, name: str = "Fake") -> LLM:
    return LLM.objects.create(name=name, model="openai/test", api_base=server.base_url, supports_tools=False)


def island_crew(owner: Any, llm: LLM, *, name: str = "Islands", **fields: Any) -> Crew:
    """Researcher asks about the lighthouse keeper; Writer writes about the harbour."""
    crew = Crew.objects.create(owner=owner, name=name, **fields)
    researcher = Agent.objects.create(owner=owner, name=f"{name} researcher", role="Researcher", goal="Find facts",
                                      llm=llm)
    writer = Agent.objects.create(owner=owner, name=f"{name} writer", role="Writer", goal="Write", llm=llm)
    crew.agents.set([researcher, writer])
    Task.objects.create(crew=crew, order=0, name="Keeper", agent=researcher,
                        description="Who is the lighthouse keeper of Ilha Verde?", expected_output="A name")
    Task.objects.create(crew=crew, order=1, name="Harbour", agent=writer,
                        description="Describe the lighthouse of Ilha Verde for visitors.", expected_output="A paragraph")
    return crew


def answers(request: RecordedRequest) -> Reply:
    """Every task answers at once; a memory request gets one line."""
    text = request.last_user_text()
    if "should remember for later runs" in text:
        return Reply.text("Visitors like short answers.")
    return Reply.text("Final Answer: done")


def kickoff(client: TestClient, user: Any, crew: Crew, capture: Any) -> Run:
    with capture(execute=True):
        response = client.post(f"/crews/{crew.pk}/kickoff", json={"inputs": {}}, user=user)
    assert response.status_code == 202, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.status == Run.Status.SUCCEEDED, run.error
    return run


def task_requests(server: FakeLLMServer, description: str) -> list[RecordedRequest]:
    """The task's own requests (its description in the prompt), memory calls left out."""
    return [
        r for r in server.requests
        if description in r.raw.decode() and "should remember for later runs" not in r.raw.decode()
    ]


def events(run: Run, type_: str) -> list[RunEvent]:
    return list(RunEvent.objects.filter(run=run, type=type_).order_by("seq"))
