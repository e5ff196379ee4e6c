"""Warming a run worker (issue #20): what a run imports is loaded before "ready", out of the
collector's sight, and health says "warming" until then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from planner_site import warmup

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
import django
django.setup()
from planner_site.warmup import warm, is_warm
before = "litellm" in sys.modules
took = warm(litellm=True)
again = warm()
print(json.dumps({"before": before, "after": "litellm" in sys.modules, "runner": "crews.runner" in sys.modules,
                  "frozen": gc.get_freeze_count(), "threshold": gc.get_threshold()[0], "warm": is_warm(),
                  "took": took, "again": again}))
"""


def test_warming_imports_litellm_when_asked_and_the_runner_then_freezes_them_once() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip().splitlines()[-1]
    result = json.loads(out)
    assert result["before"] is False  # nothing imported litellm on the way
    assert result["after"] is True and result["runner"] is True
    assert result["frozen"] > 100_000  # litellm's graph, out of every full collection's walk
    assert result["threshold"] == warmup.GC_THRESHOLD[0]
    assert result["warm"] is True
    assert result["took"] > 0 and result["again"] == 0.0


LEAN = """
import json, sys
import django
django.setup()
from planner_site.warmup import warm
warm(litellm=False)
warm_httpx = "httpx" in sys.modules
import httpx  # as the HTTP tool or Test connection would, later
print(json.dumps({"httpx": warm_httpx, "cli": [m for m in ("rich", "pygments") if m in sys.modules]}))
"""


def test_a_warm_worker_without_litellm_leaves_out_httpxs_command_line_client() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run(
        [sys.executable, "-c", LEAN], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    ).stdout.strip().splitlines()[-1]
    # Warm without httpx at all (the direct path is on aiohttp); loaded later, still without its
    # command-line client (rich and pygments: 8 MiB a process).
    assert json.loads(out) == {"httpx": False, "cli": []}


@pytest.mark.django_db
def test_health_says_warming_while_this_processs_workers_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warmup, "_started", _Flag(True))
    monkeypatch.setattr(warmup, "_warm", _Flag(False))
    assert Client().get("/api/health").json()["worker"] == "warming"
    monkeypatch.setattr(warmup, "_warm", _Flag(True))
    assert Client().get("/api/health").json()["worker"] in ("ok", "none")


class _Flag:
    def __init__(self, value: bool) -> None:
        self.value = value

    def is_set(self) -> bool:
        return self.value

    def set(self) -> None:
        self.value = True


@pytest.mark.django_db
def test_litellm_is_loaded_only_for_an_llm_that_goes_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.models import DEMO_MODEL, LLM

    LLM.objects.exclude(model=DEMO_MODEL).delete()
    monkeypatch.delenv("PLANNER_LLM_PATH", raising=False)
    assert warmup.litellm_needed() is False  # nothing but the demo model
    LLM.objects.create(name="llama.cpp", model="openai/local-model", api_base="http://127.0.0.1:8080/v1")
    assert warmup.litellm_needed() is False  # the direct path takes it
    LLM.objects.create(name="Claude", model="anthropic/claude-3-5-haiku")
    assert warmup.litellm_needed() is True
    LLM.objects.filter(name="Claude").delete()
    monkeypatch.setenv("PLANNER_LLM_PATH", "litellm")
    assert warmup.litellm_needed() is True


SLOW_THEN_QUICK = """
import gc, json
from planner_site import warmup
kept = [[i] for i in range(50_000)]  # a heap loaded after warm-up, as a late litellm import is
warmup.SLOW_COLLECTION = 0.0  # every collection counts as slow
warmup.collect()
frozen = gc.get_freeze_count()
warmup.SLOW_COLLECTION = 3600.0  # and now none does
more = [[i] for i in range(1_000)]
warmup.collect()
print(json.dumps({"frozen": frozen, "after": gc.get_freeze_count()}))
"""


def test_a_slow_full_collection_freezes_what_survived_and_a_quick_one_does_not() -> None:
    """serve collects every second: a heap imported after warm-up must stall the loop once, not
    every second (review of #20: 0.3-0.5 s a collection with litellm loaded late)."""
    done = subprocess.run([sys.executable, "-c", SLOW_THEN_QUICK], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["frozen"] >= 50_000
    assert figures["after"] == figures["frozen"]
