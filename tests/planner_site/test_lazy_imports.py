"""The web side never imports litellm: pages and API answer without paying its import.

litellm takes seconds to import and a few hundred MiB to hold; only a worker that calls a live
model should pay for it (agents/engine/gateway.py imports it inside functions). Each check runs
in a fresh interpreter, since this test process may have imported litellm already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Runs in the subprocess: a migrated throwaway database, the seeded admin and demo crew, then
# every request through Django's test client, noting whether litellm was imported after each.
PROBE = """
import json, sys

import django
django.setup()
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse

setup_test_environment()
call_command("migrate", verbosity=0)

from agents.models import Agent
from agents.services import llm_ensure_demo, prompt_seed
from crews.demo import demo_seed
from planner_site.accounts import roles_ensure, user_bootstrap
from planner_site.roles import ADMIN

roles_ensure()
llm_ensure_demo()
prompt_seed()
user, _created = user_bootstrap(username="ada", password="pw-ada", role=ADMIN)
crew = demo_seed(owner=user)
agent = Agent.objects.filter(owner=user).order_by("pk").first()

anonymous = Client()
client = Client()
client.force_login(user)
requests = [
    ("login", anonymous, reverse("login")),
    ("crews:crew-list", client, reverse("crews:crew-list")),
    ("crews:crew-detail", client, reverse("crews:crew-detail", args=[crew.pk])),
    ("agents:agent-list", client, reverse("agents:agent-list")),
    ("agents:agent-detail", client, reverse("agents:agent-detail", args=[agent.pk])),
    ("api:health", anonymous, reverse("api:health")),
    ("api:crew_list", client, reverse("api:crew_list")),
    ("api:agent_list", client, reverse("api:agent_list")),
    ("api:tool_list", client, reverse("api:tool_list")),
]
results = []
for name, who, url in requests:
    response = who.get(url)
    results.append({"name": name, "status": response.status_code, "litellm": "litellm" in sys.modules})
tools = json.loads(client.get(reverse("api:tool_list")).content)
print(json.dumps({"results": results, "tools": tools, "litellm": "litellm" in sys.modules,
                  "httpx": "httpx" in sys.modules}))
"""


def probe(var_dir: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(DJANGO_SETTINGS_MODULE="tests.settings", PLANNER_VAR_DIR=str(var_dir))
    completed = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def test_pages_and_api_answer_without_importing_litellm(tmp_path: Path) -> None:
    result = probe(tmp_path)

    statuses = {r["name"]: r["status"] for r in result["results"]}
    assert statuses == {name: 200 for name in statuses}, statuses
    first_importer = next((r["name"] for r in result["results"] if r["litellm"]), None)
    assert first_importer is None, f"{first_importer} imported litellm"
    assert result["litellm"] is False
    # Nor httpx (litellm's client, the HTTP tool's and Test connection's): the direct LLM path is
    # on aiohttp, and a server that never uses them need not hold them (#20).
    assert result["httpx"] is False
    # The tool catalogue comes from the engine, not from litellm, and is not empty.
    assert "calculator" in {tool["name"] for tool in result["tools"]["items"]}
