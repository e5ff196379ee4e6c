"""What following a run over the JSON socket costs the server: database hops and queries.

Every ``database_sync_to_async`` hop is a thread hop and, without persistent connections, a new
database connection; these tests keep a token client's follow at one hop and four queries.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.db.backends import utils as db_utils
from django.test import Client

from crews import consumers, runner, runs, selectors
from crews.models import Run
from planner_site.asgi import application
from planner_site.tokens import token_create
from tests.crews.run_helpers import make_crew, scripted

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


@pytest.fixture
def finished_run(builder: Any, monkeypatch: Any) -> Run:
    crew = make_crew(builder)
    scripted(monkeypatch, default="Final Answer: done")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    return run


@pytest.fixture
def counted(monkeypatch: Any) -> dict[str, list[Any]]:
    """The hops to a worker thread (``sync_to_async``, of which ``database_sync_to_async`` is
    one) and the SQL run."""
    seen: dict[str, list[Any]] = {"hops": [], "queries": []}
    real_handler = SyncToAsync.thread_handler
    real_execute = db_utils.CursorWrapper._execute

    def thread_handler(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen["hops"].append(self.func)
        return real_handler(self, *args, **kwargs)

    def execute(self: Any, sql: str, *args: Any) -> Any:
        seen["queries"].append(sql)
        return real_execute(self, sql, *args)

    monkeypatch.setattr(SyncToAsync, "thread_handler", thread_handler)
    monkeypatch.setattr(db_utils.CursorWrapper, "_execute", execute)
    return seen


async def follow(run: Run, user: Any, counted: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Follow the run to its last stored event; ``counted`` then holds the follow's hops and SQL."""
    _token, raw = await database_sync_to_async(token_create)(user=user)
    count = len(await database_sync_to_async(selectors.run_events)(run=run.pk))
    counted["hops"].clear()
    counted["queries"].clear()
    headers = [*ORIGIN, (b"authorization", f"Bearer {raw}".encode())]
    communicator = WebsocketCommunicator(application, f"/ws/api/runs/{run.pk}/", headers=headers)
    assert (await communicator.connect())[0]
    frames = [json.loads(await communicator.receive_from(timeout=3)) for _ in range(count)]
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()
    return frames


def selects(queries: list[str]) -> list[str]:
    return [q.split(" FROM ")[1].split()[0] for q in queries if q.lstrip().startswith("SELECT")]


async def test_a_token_client_follows_a_run_in_one_hop_and_four_queries(
    finished_run, builder, counted
):
    frames = await follow(finished_run, builder, counted)

    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert [f.__name__ for f in counted["hops"]] == ["_open"]
    # The token, the user's groups (once, for every role check), who may see the run, the replay.
    assert selects(counted["queries"]) == [
        '"planner_site_apitoken"', '"auth_group"', '"crews_run"', '"crews_runevent"'
    ]


async def test_a_superusers_follow_reads_no_groups(finished_run, admin_user, counted):
    admin_user.is_superuser = True
    await database_sync_to_async(admin_user.save)()

    await follow(finished_run, admin_user, counted)

    assert '"auth_group"' not in selects(counted["queries"])


async def test_the_groups_read_for_a_connect_are_not_kept_on_the_user(finished_run, builder):
    """A role changed while a socket is open shows in its next hop (the page's controls)."""
    opening = await consumers._open(builder, finished_run.pk, 0, lambda *args: None)

    assert opening.code is None and opening.events
    assert "groups" not in getattr(builder, "_prefetched_objects_cache", {})


async def test_the_page_socket_reads_its_session_user_in_its_one_database_hop(
    finished_run, builder, counted
):
    client = await database_sync_to_async(Client)()
    await database_sync_to_async(client.force_login)(builder)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    count = len(await database_sync_to_async(selectors.run_events)(run=finished_run.pk))
    counted["hops"].clear()
    communicator = WebsocketCommunicator(
        application, f"/ws/runs/{finished_run.pk}/", headers=[*ORIGIN, (b"cookie", cookie)]
    )
    assert (await communicator.connect())[0]
    fragments = [await communicator.receive_from(timeout=3) for _ in range(count)]
    await communicator.disconnect()

    assert all('hx-swap-oob="beforeend:#run-events"' in f for f in fragments)
    # The database once (session, user, run, page); the delta followers' count twice, in the cache.
    assert [f.__name__ for f in counted["hops"]] == ["_open", "_count", "_count"]


def test_the_connects_visibility_check_is_run_visible(builder, other_builder, viewer, admin_user):
    """The connect's compiled check answers as ``selectors.run_visible`` for every role: runs of
    a private crew, of a shared crew, and agent runs (started by one user, of another's agent)."""
    from django.contrib.auth import get_user_model

    from tests.crews.run_helpers import make_agent

    superuser = get_user_model().objects.create_superuser("sue", password="pw-sue")
    mine = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "t"}, enqueue=False)
    shared = runs.run_kickoff(
        actor=other_builder, crew=make_crew(other_builder, name="Shared", shared=True),
        inputs={"topic": "t"}, enqueue=False,
    )
    theirs = runs.run_kickoff(
        actor=other_builder, crew=make_crew(other_builder, name="Private"), inputs={"topic": "t"}, enqueue=False
    )
    asked = runs.run_kickoff_agent(actor=other_builder, agent=make_agent(builder, "Builder's"), message="hi")
    their_agent = runs.run_kickoff_agent(actor=other_builder, agent=make_agent(other_builder, "Olga's"), message="hi")
    everyone = [builder, other_builder, viewer, admin_user, superuser]
    ids = [mine.pk, shared.pk, theirs.pk, asked.pk, their_agent.pk, 10**9]
    for user in everyone:
        selectors.related_rows_known(user, "groups", list(user.groups.all()))
        expected = [selectors.run_visible(user=user).filter(pk=i).exists() for i in ids]

        assert [consumers._run_visible(user, i) for i in ids] == expected, user.username
        if user == builder:  # the cases differ: the own, the shared, the agent's; not the others
            assert expected == [True, True, False, True, False, False]


@pytest.mark.parametrize("after", [2**31, 2**63, 10**30])
async def test_an_after_beyond_any_seq_replays_nothing(finished_run, builder, after):
    """The compiled replay read takes any ``?after=``: beyond 64 bits too (SQLite would raise)."""
    opening = await consumers._open(builder, finished_run.pk, after, lambda *args: None)

    assert opening.code is None and opening.events == []
