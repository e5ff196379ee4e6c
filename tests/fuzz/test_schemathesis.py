"""Schemathesis against the served API (issue #16): no 500, no body outside its schema, no status
the OpenAPI document does not list. Run by ``make fuzz`` (and so ``make test``).

The real server (``manage.py serve``, one run worker, the offline demo model) runs on loopback
with a fresh SQLite database seeded with the demo crew, its agents and the demo LLM, so small ids
exist. Schemathesis signs in with an admin's API token and sends valid and invalid data (``--mode
all``) to every operation, kickoffs included. Bounded: ``MAX_EXAMPLES`` per operation and
``TIME_LIMIT`` seconds in all; CI's whole run must stay under 20 minutes on two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_EXAMPLES = int(os.environ.get("FUZZ_MAX_EXAMPLES", "15"))
TIME_LIMIT = 240  # seconds for schemathesis itself; it takes about a third of that
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance"
SETUP = """
from django.contrib.auth import get_user_model
from planner_site.tokens import token_create
print(token_create(user=get_user_model().objects.get(username="admin"))[1])
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_health(base: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server stopped"
        try:
            with urllib.request.urlopen(f"{base}/api/health", timeout=5) as response:
                if json.loads(response.read())["status"] == "ok":
                    return
        except OSError:
            pass
        time.sleep(0.2)  # polling a process that is starting, not waiting for an event
    raise AssertionError("the server did not answer /api/health")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    var_dir = tmp_path_factory.mktemp("fuzz")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL"))}
    env.update(DJANGO_SETTINGS_MODULE="planner_site.settings", PLANNER_VAR_DIR=str(var_dir),
               PLANNER_DEMO_FIRST_TOKEN_SECONDS="0", PLANNER_DEMO_TOKENS_PER_SECOND="0")  # fmt: skip
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=180)
    subprocess.run([*manage, "seed"], cwd=ROOT, env=env, check=True, timeout=180, capture_output=True)
    token = subprocess.run(
        [*manage, "shell", "-c", SETUP], cwd=ROOT, env=env, check=True, timeout=120,
        capture_output=True, text=True,
    ).stdout.split()[-1]  # fmt: skip
    port = free_port()
    log = (var_dir / "serve.log").open("wb")
    proc = subprocess.Popen(
        [*manage, "serve", "--port", str(port), "--workers", "1"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_health(base, proc)
        yield base, token
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_no_operation_answers_a_500_an_undocumented_status_or_an_off_schema_body(server, tmp_path):
    base, token = server
    st = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    report = tmp_path / "report.json"
    command = [
        st, "run", f"{base}/api/openapi.json",
        "--header", f"Authorization: Bearer {token}",
        "--checks", CHECKS,
        "--mode", "all",
        "--phases", "examples,coverage,fuzzing",
        "--max-examples", str(MAX_EXAMPLES),
        "--workers", "2",
        "--seed", os.environ.get("FUZZ_SEED", "16"),
        "--request-timeout", "20",
        "--suppress-health-check", "all",
        "--warnings", "off",
        "--output-sanitize", "true",
        "--report", "json", "--report-json-path", str(report),
    ]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=TIME_LIMIT,
        env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""},
    )  # fmt: skip
    elapsed = time.monotonic() - started
    summary = "\n".join(result.stdout.splitlines()[-40:])
    print(f"schemathesis: {elapsed:.0f} s\n{summary}")

    assert result.returncode == 0, f"{result.stdout[-20000:]}\n{result.stderr[-4000:]}"
