"""Builders and waits for tests of runs: small crews, runs in a thread, polling with a deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agents.engine.llm import LLMResponse, ScriptedGateway
from agents.models import LLM, Agent
from crews.models import Crew, Run, RunEvent, Task
from tests.fakes.openai_server import FakeLLMServer, RecordedRequest, Reply


def make_agent(owner: Any, name: str = "Writer", **fields: Any) -> Agent:
    values = {"role": "Writer on {topic}", "goal": "Write well", "backstory": "", **fields}
    return Agent.objects.create(owner=owner, name=name, **values)


def make_crew(
    owner: Any,
    *,
    name: str = "Crew",
    tasks: Sequence[str] = ("Research", "Report"),
    agent: Agent | None = None,
    llm: LLM | None = None,
    task_fields: dict[str, dict[str, Any]] | None = None,
    **fields: Any,
) -> Crew:
    """A sequential crew whose tasks all use one agent; task texts name their task."""
    agent = agent or make_agent(owner, f"{name} writer", llm=llm)
    crew = Crew.objects.create(owner=owner, name=name, **fields)
    crew.agents.set([agent])
    for order, task_name in enumerate(tasks):
        Task.objects.create(
            crew=crew, order=order, name=task_name, agent=agent,
            description=f"Do the {task_name} work about {{topic}}",
            expected_output=f"The {task_name} result",
            **(task_fields or {}).get(task_name, {}),
        )
    return crew


def event_types(run: Run | int) -> list[str]:
    run_id = run if isinstance(run, int) else run.pk
    return list(RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("type", flat=True))


def wait_for(check: Callable[[], Any], *, timeout: float = 15.0, what: str = "the condition") -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.02)


def wait_for_status(run: Run | int, *statuses: str, timeout: float = 15.0) -> Run:
    run_id = run if isinstance(run, int) else run.pk
    return wait_for(
        lambda: Run.objects.filter(pk=run_id, status__in=statuses).first(),
        timeout=timeout, what=f"run {run_id} to be {' or '.join(statuses)}",
    )


class Background:
    """``fn`` in a thread whose exception (if any) re-raises in ``join``."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.error: BaseException | None = None

        def target() -> None:
            from django.db import connections

            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                self.error = exc
            finally:
                connections.close_all()

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 15.0) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"still running after {timeout:g} s"
        if self.error is not None:
            raise self.error


@pytest.fixture
def stop_leftover_runs() -> Iterator[None]:
    """After the test, stop any run still executing in this process (a failed test's run would
    otherwise wait for a person forever and keep the test process from exiting)."""
    yield
    from crews import runner

    with runner._active_lock:
        tokens = list(runner._active.values())
    for token in tokens:
        token.cancel("cancelled")


def scripted(monkeypatch: Any, script: Sequence[Any] = (), *, default: Any = None) -> ScriptedGateway:
    """Every LLM call of the runner goes to a ``ScriptedGateway`` (the one allowed mock)."""
    from crews import runner

    gateway = ScriptedGateway(script, default=default)
    monkeypatch.setattr(runner, "RoutingGateway", lambda **_: gateway)
    return gateway


TWO_TASK_PLAN = '{"plans": [{"task_number": 1, "steps": ["Look it up"]}, {"task_number": 2, "steps": ["Sum up"]}]}'


def planned_run(owner: Any, monkeypatch: Any, *, before_reply: Callable[[Any], None] | None = None) -> Run:
    """A planned 2-task crew's run, kicked off, not executed: the scripted LLM drafts one step per
    task (as JSON text: no tool support) and answers each; ``before_reply(request)`` runs first."""
    crew = make_crew(owner, planning=True)
    replies = iter([TWO_TASK_PLAN, "Final Answer: found", "Final Answer: summed"])

    def reply(request: Any) -> LLMResponse:
        if before_reply is not None:
            before_reply(request)
        return LLMResponse(content=next(replies))

    scripted(monkeypatch, default=reply)
    LLM.objects.filter(is_default=True).update(supports_tools=False)
    from crews import runs

    return runs.run_kickoff(actor=owner, crew=crew, inputs={"topic": "tides"}, enqueue=False)


def plan_in_prompt(request: Any) -> list[str]:
    """The numbered steps under "Plan for this task:" in a task prompt ([] when there is none)."""
    text = "\n".join(str(m.get("content") or "") for m in request.messages if m.get("role") == "user")
    if "Plan for this task:\n" not in text:
        return []
    steps: list[str] = []
    for line in text.split("Plan for this task:\n", 1)[1].splitlines():
        number, dot, rest = line.partition(". ")
        if not dot or not number.isdigit() or int(number) != len(steps) + 1:
            break
        steps.append(rest)
    return steps


# A crew against the fake OpenAI-compatible server, run by ``manage.py kickoff`` in a subprocess ----

ROOT = Path(__file__).resolve().parents[2]


def fake_llm(server: FakeLLMServer) -> LLM:
    """An ``openai/test`` model served by ``server``, through real litellm."""
    llm = LLM(name="Fake", model="openai/test", api_base=server.base_url, supports_tools=True)
    llm.set_api_key("sk-test-123456")
    llm.save()
    return llm


class TaskReplies:
    """The fake server's answers: each task says it is done; ``hold`` tasks hang on first try.

    A request belongs to the task whose description its prompt contains ("Do the X work").
    """

    def __init__(self, tasks: Sequence[str], *, hold: Sequence[str] = ()) -> None:
        self.tasks = list(tasks)
        self.hold = set(hold)
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def task_of(self, request: RecordedRequest) -> str | None:
        text = request.last_user_text()
        return next((t for t in self.tasks if f"Do the {t} work" in text), None)

    def __call__(self, request: RecordedRequest) -> Reply:
        task = self.task_of(request)
        with self._lock:
            self.counts[task or "?"] = self.counts.get(task or "?", 0) + 1
            first = self.counts[task or "?"] == 1
        reply = Reply.text(f"Final Answer: {task} done")
        return reply.after(60) if task in self.hold and first else reply


def kickoff_process(*args: str) -> subprocess.Popen[str]:
    """``manage.py kickoff ARGS`` in a subprocess sharing this test's (file) database."""
    from django.db import connection

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"sqlite:///{connection.settings_dict['NAME']}",
        PYTHONUNBUFFERED="1",
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "kickoff", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
