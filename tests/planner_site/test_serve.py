"""The one-process server: serves pages, API and its worker, and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_answers_health_with_its_worker_then_stops_on_sigterm(tmp_path: Path) -> None:
    """It serves at once, says "warming" until its workers have loaded what a run needs (#20)."""
    env = _env(tmp_path)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    port = free_port()
    # Every model through litellm: warming then loads it (2-4 s), which health must report.
    with serving(port, "--workers", "2", env={**env, "PLANNER_LLM_PATH": "litellm"}) as proc:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if "warming up" in line or time.monotonic() > deadline:
                break
        assert f"is serving at http://127.0.0.1:{port}/" in line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10) as response:
            early = json.loads(response.read())
        # Asked at once, litellm's 2-4 s import is still under way.
        assert early["worker"] == "warming" and early["status"] == "ok"
        for line in proc.stdout:
            if "is ready at" in line or time.monotonic() > deadline:
                break
        assert f"http://127.0.0.1:{port}/" in line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=10) as response:
            health = json.loads(response.read())
        assert health == {"status": "ok", "database": "ok", "channel_layer": "ok", "worker": "ok"}
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/django_htmx/htmx-2.min.js", timeout=10) as r:
            assert r.status == 200
            assert r.headers["X-Content-Type-Options"] == "nosniff"


@contextmanager
def serving(port: int, *args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``manage.py serve`` on ``port``; on leaving, SIGTERM must stop it cleanly (it is killed
    if the block failed first, so no server outlives its test)."""
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        yield proc
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def serve_once(env: dict[str, str]) -> str:
    """Start ``serve`` (no workers), get the sign-in page, stop it: everything it printed."""
    port = free_port()
    lines: list[str] = []
    with serving(port, "--workers", "0", env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "is ready at" in line:
                break
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=30) as response:
            assert response.status == 200
    return "".join(lines)


def test_serve_migrates_and_seeds_a_new_database_and_a_second_start_only_reseeds(tmp_path: Path) -> None:
    """`make run` is serve alone (#15): the first start migrates, the next has nothing to migrate;
    both seed (idempotent), so a dropped or flushed database is whole again on the next start."""
    env = _env(tmp_path)
    first = serve_once(env)
    assert "database migrations…" in first and "Loaded the demo data" in first
    assert "username: admin" in first
    second = serve_once(env)
    assert "database migrations" not in second and "Loaded the demo data" in second
    assert "username: admin" in second  # the sign-in hint stays while first-login.txt does


SETUP = """
from agents.models import LLM, Agent
from crews.models import Crew, Task
from planner_site.accounts import user_bootstrap
from planner_site.tokens import token_create
user, _ = user_bootstrap(username="ops", password="pw-ops-123456", role="admin")
llm = LLM(name="Slow", model="openai/slow", api_base="{base}", supports_tools=False)
llm.set_api_key("sk-test-not-real")
llm.save()
agent = Agent.objects.create(owner=user, name="A", role="Writer", goal="Write", llm=llm, max_retry_limit=0)
crew = Crew.objects.create(owner=user, name="Slow crew")
crew.agents.add(agent)
Task.objects.create(crew=crew, order=0, name="T", description="Write a line", expected_output="A line", agent=agent)
print(crew.pk, token_create(user=user)[1])
"""


def _env(var: Path) -> dict[str, str]:
    """This process's environment for a server on SQLite in ``var`` (no scale-out services)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env.update(DJANGO_SETTINGS_MODULE="planner_site.settings", PLANNER_VAR_DIR=str(var))
    return env


def _crew_and_token(env: dict[str, str], llm_base: str) -> tuple[str, str]:
    """A migrated database with ``SETUP``'s one-task crew on the LLM at ``llm_base``: its id and
    an admin's API token."""
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=120)
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", SETUP.replace("{base}", llm_base)],
        cwd=ROOT, env=env, check=True, timeout=120, capture_output=True, text=True,
    ).stdout.split()
    return out[-2], out[-1]


def test_sigterm_with_a_run_in_flight_leaves_it_interrupted_never_running(tmp_path: Path) -> None:
    from tests.fakes.openai_server import FakeLLMServer, Reply

    env = _env(tmp_path)
    with FakeLLMServer() as llm_server:
        llm_server.default = Reply.text("Final Answer: late").after(30)
        crew_id, token = _crew_and_token(env, llm_server.base_url)
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "1"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "is ready at" in line:
                    break
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/api/crews/{crew_id}/kickoff", data=b'{"inputs": {}}',
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    run_id = json.loads(response.read())["id"]
            except urllib.error.HTTPError as exc:
                raise AssertionError(f"kickoff answered {exc.code}: {exc.read()[:2000]!r}") from None
            deadline = time.monotonic() + 60
            while not llm_server.requests and time.monotonic() < deadline:
                time.sleep(0.05)
            assert llm_server.requests, "the run never called its LLM"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    status = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c",
         f"from crews.models import Run; r = Run.objects.get(pk={run_id}); print(r.status, [t.status for t in r.task_results.all()])"],
        cwd=ROOT, env=env, check=True, timeout=60, capture_output=True, text=True,
    ).stdout.strip().splitlines()[-1]
    assert status == "interrupted ['waiting']"


def test_runs_of_one_server_share_its_llm_connection_and_it_closes_cleanly_on_sigterm(tmp_path: Path) -> None:
    """Every run of ``serve`` goes to Daphne's loop: the second run's calls reuse the connection
    the first run kept alive (no new connection, nor TLS with a real provider, per run), and the
    kept session is closed when the server stops, without aiohttp's "Unclosed" complaints."""
    from tests.fakes.openai_server import FakeLLMServer, Reply

    env = _env(tmp_path)
    with FakeLLMServer() as llm_server:
        llm_server.default = Reply.text("Final Answer: a line")
        crew_id, token = _crew_and_token(env, llm_server.base_url)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        port = free_port()
        with serving(port, "--workers", "1", env=env) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                if "is ready at" in line:
                    break
            for _ in range(2):
                kickoff = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/crews/{crew_id}/kickoff", data=b'{"inputs": {}}', headers=headers)
                with urllib.request.urlopen(kickoff, timeout=10) as response:
                    run_id = json.loads(response.read())["id"]
                deadline, status = time.monotonic() + 60, ""
                while status != "succeeded" and time.monotonic() < deadline:
                    time.sleep(0.05)
                    look = urllib.request.Request(f"http://127.0.0.1:{port}/api/runs/{run_id}", headers=headers)
                    with urllib.request.urlopen(look, timeout=10) as response:
                        status = json.loads(response.read())["status"]
                assert status == "succeeded"
        printed = proc.stdout.read()
    assert len(llm_server.requests) == 2
    assert len({r.client_port for r in llm_server.requests}) == 1  # one connection for both runs
    assert "Unclosed" not in printed, printed
