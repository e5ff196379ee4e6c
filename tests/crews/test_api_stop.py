"""Stop frees the LLM server: a run stopped through the API closes the connection of its call in
flight within a second, the run's first call included (made before any page follows the run)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client

from crews.models import Run
from planner_site.tokens import token_create
from tests.crews.run_helpers import (
    Background,
    fake_llm,
    make_crew,
    stop_leftover_runs,  # noqa: F401 - a fixture
    wait_for,
    wait_for_status,
)
from tests.fakes.openai_server import FakeLLMServer, Reply
from tests.fakes.openai_server import fake_llm_server as fake_llm_server  # noqa: F401 - fixture

pytestmark = pytest.mark.usefixtures("stop_leftover_runs")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "planning", [True, False], ids=["the crew plan's draft", "the first task's call"]
)
def test_stop_closes_the_first_calls_connection_within_a_second(
    builder: Any, fake_llm_server: FakeLLMServer, planning: bool
) -> None:
    fake_llm_server.default = Reply.endless()  # a local model that generates until told otherwise
    llm = fake_llm(fake_llm_server)
    crew = make_crew(builder, tasks=["Research"], llm=llm, planning=planning, planning_llm=llm)
    _token, raw = token_create(user=builder)
    http = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")

    def post(path: str, body: Any = None) -> Any:
        return http.post(
            path, data=json.dumps(body) if body is not None else "", content_type="application/json"
        )

    # The immediate task backend runs the run inside the kickoff request: in a thread of its own.
    kicked = Background(
        lambda: post(f"/api/crews/{crew.pk}/kickoff", {"inputs": {"topic": "tides"}})
    )
    # The first live call of a process imports litellm first: seconds on a busy machine.
    wait_for(lambda: fake_llm_server.request_count, timeout=60, what="the run's first LLM call")
    run = Run.objects.get(crew=crew)
    stopped = time.monotonic()
    assert post(f"/api/runs/{run.pk}/cancel").status_code == 202

    closed = fake_llm_server.wait_disconnect(3)
    assert closed is not None, "the server was left generating"
    assert closed - stopped < 1.0
    kicked.join()
    assert wait_for_status(run, Run.Status.CANCELLED).status == Run.Status.CANCELLED
    assert fake_llm_server.request_count == 1  # nothing retried or sent after the stop
    assert fake_llm_server.requests[0].stream
