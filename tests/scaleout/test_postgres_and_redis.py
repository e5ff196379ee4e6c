"""Scale-out: the same code on PostgreSQL + Redis — migrations, API CRUD, cross-process channels."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.test import Client

from planner_site.tokens import token_create
from tests.planner_site.test_http import check_requests_reuse_connections

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_migrations_ran_on_postgresql() -> None:
    assert connection.vendor == "postgresql"
    tables = connection.introspection.table_names()
    assert {"agents_llm", "crews_crew", "crews_runevent", "django_tasks_database_dbtaskresult"} <= set(tables)


@pytest.mark.django_db(transaction=True)
async def test_http_requests_keep_their_postgresql_connection_from_one_to_the_next(builder: Any) -> None:
    # Persistent connections (conn_max_age) under ASGI: requests borrow kept threads.
    assert connection.vendor == "postgresql" and connection.settings_dict["CONN_MAX_AGE"] > 0
    await check_requests_reuse_connections(builder)


@pytest.mark.django_db
def test_crud_through_the_api_on_postgresql(builder: Any) -> None:
    _token, raw = token_create(user=builder)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    agent = client.post(
        "/api/agents", {"name": "Writer", "role": "Writer", "goal": "Write"}, content_type="application/json"
    )
    assert agent.status_code == 201, agent.content
    crew = client.post(
        "/api/crews", {"name": "Scale", "agent_ids": [agent.json()["id"]]}, content_type="application/json"
    )
    assert crew.status_code == 201, crew.content
    crew_id = crew.json()["id"]
    task = client.post(
        f"/api/crews/{crew_id}/tasks",
        {"name": "T", "description": "About {topic}", "expected_output": "A line", "agent_id": agent.json()["id"]},
        content_type="application/json",
    )
    assert task.status_code == 201, task.content
    patched = client.patch(f"/api/crews/{crew_id}", {"description": "changed"}, content_type="application/json")
    assert patched.status_code == 200 and patched.json()["description"] == "changed"
    assert client.get(f"/api/crews/{crew_id}").json()["input_names"] == ["topic"]
    assert client.delete(f"/api/crews/{crew_id}").status_code == 204
    assert client.get(f"/api/crews/{crew_id}").status_code == 404


SENDER = textwrap.dedent(
    """
    import asyncio, os, sys
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django
    django.setup()
    from channels.layers import get_channel_layer

    async def main():
        layer = get_channel_layer()
        await layer.group_send(sys.argv[1], {"type": "run.event", "text": sys.argv[2]})
        # And listen for the reply on our own channel, proving both directions.
        reply = await layer.new_channel()
        await layer.group_add(sys.argv[1] + ".reply", reply)
        print("READY", flush=True)
        message = await asyncio.wait_for(layer.receive(reply), timeout=10)
        print(message["text"], flush=True)

    asyncio.run(main())
    """
)


def test_channel_layer_round_trip_between_two_processes() -> None:
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == "channels_redis.core.RedisChannelLayer"

    async def scenario() -> list[str]:
        layer = get_channel_layer()
        group = f"scaleout-{uuid.uuid4().hex}"
        me = await layer.new_channel()
        await layer.group_add(group, me)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SENDER, group, "hello from the worker",
            cwd=ROOT, stdout=asyncio.subprocess.PIPE, env={**os.environ},
        )
        got = await asyncio.wait_for(layer.receive(me), timeout=20)
        assert proc.stdout is not None
        assert (await asyncio.wait_for(proc.stdout.readline(), timeout=20)).strip() == b"READY"
        await layer.group_send(group + ".reply", {"type": "run.event", "text": "hello from the web"})
        answer = (await asyncio.wait_for(proc.stdout.readline(), timeout=20)).decode().strip()
        await proc.wait()
        return [got["text"], answer, json.dumps(proc.returncode)]

    assert asyncio.run(scenario()) == ["hello from the worker", "hello from the web", "0"]


def test_a_burst_of_events_waits_in_the_inbox_of_a_busy_web_process() -> None:
    """A run's events sent while the web process is not reading yet are all kept (up to the
    layer's capacity, 1,000): a dropped final event would never reach the run's sockets."""

    async def scenario() -> list[int]:
        layer = get_channel_layer()
        group = f"scaleout-burst-{uuid.uuid4().hex}"
        me = await layer.new_channel()
        await layer.group_add(group, me)
        for seq in range(1, 301):  # three times channels_redis's default capacity
            await layer.group_send(group, {"type": "run.event", "seq": seq})
        got = [(await asyncio.wait_for(layer.receive(me), timeout=10))["seq"] for _ in range(300)]
        await layer.group_discard(group, me)
        return got

    assert asyncio.run(scenario()) == list(range(1, 301))
