"""The run websockets on the real ASGI app: auth, replay after a seq, live events exactly once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.test import Client

from crews import consumers, realtime, runner, runs, selectors
from crews.bridge import payload_of, record_event
from crews.models import Run
from crews.realtime import EventPayload, broadcast, deltas_followed, run_group
from planner_site.asgi import application
from planner_site.tokens import token_create
from tests.crews.run_helpers import make_crew, scripted

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
EVIL = "<script>alert('tides')</script>"
DELTA: EventPayload = {"seq": None, "type": "llm.delta", "at": "2026-01-01T00:00:00Z",
                       "task_id": None, "step_id": None, "data": {"text": "Hel"}}


def session_headers(user: Any) -> list[tuple[bytes, bytes]]:
    client = Client()
    client.force_login(user)
    return [*ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


@pytest.fixture
def finished_run(builder: Any, monkeypatch: Any) -> Run:
    """A two-task run that has succeeded; the model's answers carry markup."""
    crew = make_crew(builder)
    scripted(monkeypatch, default=f"Final Answer: {EVIL} & more")
    run = runs.run_kickoff(actor=builder, crew=crew, inputs={"topic": "tides"}, enqueue=False)
    runner.execute(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    return run


@pytest.fixture(autouse=True)
def no_followers() -> None:
    cache.clear()  # who follows deltas lives in the cache, not in the test database


@pytest.fixture
def headers(builder: Any) -> list[tuple[bytes, bytes]]:
    return session_headers(builder)


@database_sync_to_async
def stored(run: Run, after: int = 0) -> list[EventPayload]:
    return [payload_of(e) for e in selectors.run_events(run=run, after=after)]


@database_sync_to_async
def store(run: Run, type_: str, data: dict[str, Any] | None = None) -> EventPayload:
    """An event stored as the worker stores it, but not (yet) broadcast."""
    return payload_of(record_event(run.pk, type_, data or {}))


async def connect(path: str, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(application, path, headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


async def receive_json(communicator: WebsocketCommunicator, count: int) -> list[dict[str, Any]]:
    return [json.loads(await communicator.receive_from(timeout=3)) for _ in range(count)]


async def receive_html(communicator: WebsocketCommunicator, count: int) -> list[str]:
    return [await communicator.receive_from(timeout=3) for _ in range(count)]


async def assert_closed_with(communicator: WebsocketCommunicator, code: int) -> None:
    message = await communicator.receive_output(timeout=3)
    assert message == {"type": "websocket.close", "code": code}
    await communicator.disconnect()


# JSON ----------------------------------------------------------------------------------------------


async def test_the_json_socket_replays_exactly_the_stored_events(finished_run, headers):
    expected = await stored(finished_run)
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)

    frames = await receive_json(communicator, len(expected))

    assert frames == [json.loads(json.dumps(e)) for e in expected]
    assert [f["seq"] for f in frames] == list(range(1, len(expected) + 1))
    assert set(frames[0]) == {"seq", "type", "at", "task_id", "step_id", "data"}
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_bearer_token_opens_the_json_socket(finished_run, builder):
    _token, raw = await database_sync_to_async(token_create)(user=builder)
    expected = await stored(finished_run)
    communicator = await connect(
        f"/ws/api/runs/{finished_run.pk}/", [*ORIGIN, (b"authorization", f"Bearer {raw}".encode())]
    )

    frames = await receive_json(communicator, len(expected))

    assert [f["seq"] for f in frames] == [e["seq"] for e in expected]
    await communicator.disconnect()


async def test_after_k_sends_only_the_events_after_k(finished_run, headers):
    everything = await stored(finished_run)
    k = 5
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/?after={k}", headers)

    frames = await receive_json(communicator, len(everything) - k)

    assert [f["seq"] for f in frames] == [e["seq"] for e in everything[k:]]
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_live_event_arrives_once_even_when_the_replay_had_it(finished_run, headers):
    count = len(await stored(finished_run))
    in_replay = await store(finished_run, "run.resumed")  # stored before the socket reads ...
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
    replayed = await receive_json(communicator, count + 1)
    assert replayed[-1]["seq"] == in_replay["seq"]

    await broadcast(finished_run.pk, in_replay)  # ... and broadcast after it did
    live = await store(finished_run, "run.started", {"worker": "w2"})
    await broadcast(finished_run.pk, live)
    await broadcast(finished_run.pk, live)  # a repeated delivery

    assert await receive_json(communicator, 1) == [json.loads(json.dumps(live))]
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_live_frame_is_the_json_broadcast_encoded_once_for_every_socket(finished_run, headers):
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
    await receive_json(communicator, count)
    live = await store(finished_run, "run.resumed", {"note": "é"})
    older = await store(finished_run, "run.started", {"worker": "w2"})

    await broadcast(finished_run.pk, live)
    await get_channel_layer().group_send(  # as a sender without the encoded text would
        run_group(finished_run.pk), {"type": "run.event", "event": older}
    )

    assert [await communicator.receive_from(timeout=3) for _ in range(2)] == [
        json.dumps(live), json.dumps(older)
    ]
    await communicator.disconnect()


async def test_a_gap_in_the_live_stream_is_filled_from_the_database(finished_run, headers):
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
    await receive_json(communicator, count)

    skipped = [await store(finished_run, "task.started", {"n": n}) for n in (1, 2)]
    newest = await store(finished_run, "task.completed", {"output": "late"})
    await broadcast(finished_run.pk, newest)  # the two before it are still on their way
    frames = await receive_json(communicator, 3)
    for event in skipped:  # and now they arrive: already sent, so dropped
        await broadcast(finished_run.pk, event)

    assert [f["seq"] for f in frames] == [skipped[0]["seq"], skipped[1]["seq"], newest["seq"]]
    assert frames[-1]["data"] == {"output": "late"}
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_an_event_whose_broadcast_was_lost_arrives_once_the_socket_is_idle(builder, headers, monkeypatch):
    """The last event has no later one to reveal the gap: a quiet socket reads the database."""
    monkeypatch.setattr(consumers, "IDLE_CATCH_UP_SECONDS", 0.2)

    @database_sync_to_async
    def working_run() -> Run:
        run = runs.run_kickoff(actor=builder, crew=make_crew(builder), inputs={"topic": "tides"}, enqueue=False)
        return runs.run_claim(run_id=run.pk, worker_id="w#1")

    run = await working_run()
    count = len(await stored(run))
    communicator = await connect(f"/ws/api/runs/{run.pk}/", headers)
    await receive_json(communicator, count)

    lost = await store(run, "task.started", {"n": 1})  # stored; its broadcast never comes

    assert await receive_json(communicator, 1) == [lost]
    assert await communicator.receive_nothing(timeout=0.5)  # sent once, not on every quiet period
    await communicator.disconnect()


def hold_open(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Hold the connect's one hop (the checks, then the replay's read) until released: set
    ``started`` when it begins, wait for ``release`` to go on."""
    started, release = asyncio.Event(), asyncio.Event()
    real_open = consumers._open

    async def slow_open(*args: Any) -> consumers.Opening:
        started.set()
        await release.wait()
        return await real_open(*args)

    monkeypatch.setattr(consumers, "_open", slow_open)
    return started, release


async def test_live_events_wait_for_the_replay_to_finish(finished_run, headers, monkeypatch):
    everything = await stored(finished_run)
    replay_started, replay_may_finish = hold_open(monkeypatch)
    communicator = WebsocketCommunicator(application, f"/ws/api/runs/{finished_run.pk}/", headers=headers)
    connecting = asyncio.ensure_future(communicator.connect())
    await replay_started.wait()  # joined the group, reading the database
    live = [await store(finished_run, "run.resumed", {"n": n}) for n in (1, 2)]
    for event in live:
        await broadcast(finished_run.pk, event)
    replay_may_finish.set()
    assert (await connecting)[0]

    frames = await receive_json(communicator, len(everything) + 2)

    assert [f["seq"] for f in frames] == list(range(1, len(everything) + 3))
    assert await communicator.receive_nothing(timeout=0.1)
    await communicator.disconnect()


async def test_a_message_the_socket_cannot_handle_fails_it_as_in_channels(finished_run, headers):
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
    await receive_json(communicator, count)

    await get_channel_layer().group_send(run_group(finished_run.pk), {"type": "run.unknown"})

    with pytest.raises(ValueError, match="No handler for message type run.unknown"):
        await communicator.receive_output(timeout=0.5)  # the app's error, once it has failed


async def test_deltas_are_skipped_unless_asked_for(finished_run, headers):
    count = len(await stored(finished_run))
    plain = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
    with_deltas = await connect(f"/ws/api/runs/{finished_run.pk}/?deltas=1", headers)
    await receive_json(plain, count)
    await receive_json(with_deltas, count)
    await broadcast(finished_run.pk, DELTA)

    assert await receive_json(with_deltas, 1) == [DELTA]
    assert await plain.receive_nothing(timeout=0.1)
    await plain.disconnect()
    await with_deltas.disconnect()


async def test_only_sockets_that_show_deltas_join_the_deltas_group_and_count_as_followers(
    finished_run, headers
):
    count = len(await stored(finished_run))
    sockets = {}
    for name, path, replay in (
        ("plain", "/ws/api/runs/{}/", receive_json),
        ("api", "/ws/api/runs/{}/?deltas=1", receive_json),
        ("page", "/ws/runs/{}/", receive_html),
    ):
        sockets[name] = await connect(path.format(finished_run.pk), headers)
        await replay(sockets[name], count)
    assert deltas_followed(finished_run.pk)

    await broadcast(finished_run.pk, DELTA)  # only to the deltas group
    assert await receive_json(sockets["api"], 1) == [DELTA]
    assert len(await receive_html(sockets["page"], 1)) == 1
    assert await sockets["plain"].receive_nothing(timeout=0.1)

    for name in ("api", "page"):
        await sockets[name].disconnect()
    assert not deltas_followed(finished_run.pk)
    await sockets["plain"].disconnect()


async def test_a_socket_that_fails_stops_following_the_run_once(finished_run, headers, monkeypatch):
    count = len(await stored(finished_run))
    real_emit = consumers.RunEventsJsonConsumer.emit

    async def emit(self: Any, event: EventPayload, text: str | None = None) -> None:
        if event["seq"] is None:
            raise ConnectionResetError("the client went away mid-send")
        await real_emit(self, event, text)

    monkeypatch.setattr(consumers.RunEventsJsonConsumer, "emit", emit)
    page = await connect(f"/ws/runs/{finished_run.pk}/", headers)
    failing = await connect(f"/ws/api/runs/{finished_run.pk}/?deltas=1", headers)
    await receive_html(page, count)
    await receive_json(failing, count)

    await broadcast(finished_run.pk, DELTA)
    with pytest.raises(ConnectionResetError):
        await failing.receive_output(timeout=3)

    assert deltas_followed(finished_run.pk)  # the page still follows: uncounted once, not twice
    await page.disconnect()
    assert not deltas_followed(finished_run.pk)


async def test_a_socket_the_server_cancels_stops_following_the_run(finished_run, headers):
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/?deltas=1", headers)
    await receive_json(communicator, count)
    assert deltas_followed(finished_run.pk)

    communicator.future.cancel()  # as at shutdown: no websocket.disconnect, no disconnect()
    with pytest.raises(asyncio.CancelledError):
        await communicator.future

    assert not deltas_followed(finished_run.pk)


async def test_a_failing_cache_still_lets_the_socket_show_deltas(finished_run, headers, monkeypatch):
    class BrokenCache:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any, **kwargs: Any) -> Any:
                raise ConnectionError("the cache is down")

            return fail

    monkeypatch.setattr(realtime, "cache", BrokenCache())
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/?deltas=1", headers)
    await receive_json(communicator, count)

    await broadcast(finished_run.pk, DELTA)  # another socket's follow made the run stream

    assert await receive_json(communicator, 1) == [DELTA]
    await communicator.disconnect()


async def test_a_refused_socket_follows_nothing(finished_run, other_builder):
    headers = await database_sync_to_async(session_headers)(other_builder)
    communicator = await connect(f"/ws/runs/{finished_run.pk}/", headers)
    await assert_closed_with(communicator, 4404)

    assert not deltas_followed(finished_run.pk)


async def test_without_a_session_the_socket_closes_with_4401(finished_run):
    communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", ORIGIN)
    await assert_closed_with(communicator, 4401)


async def test_a_bad_token_closes_with_4401(finished_run):
    communicator = await connect(
        f"/ws/api/runs/{finished_run.pk}/", [*ORIGIN, (b"authorization", b"Bearer cp_nope")]
    )
    await assert_closed_with(communicator, 4401)


@pytest.mark.parametrize("path", ["/ws/api/runs/{id}/", "/ws/runs/{id}/"])
async def test_another_users_run_closes_with_4404(finished_run, other_builder, path):
    headers = await database_sync_to_async(session_headers)(other_builder)
    communicator = await connect(path.format(id=finished_run.pk), headers)
    await assert_closed_with(communicator, 4404)


async def test_a_refused_socket_gets_nothing_broadcast_while_it_was_checked(
    finished_run, other_builder, monkeypatch
):
    headers = await database_sync_to_async(session_headers)(other_builder)
    checking, may_answer = hold_open(monkeypatch)
    communicator = WebsocketCommunicator(application, f"/ws/api/runs/{finished_run.pk}/", headers=headers)
    connecting = asyncio.ensure_future(communicator.connect())
    await checking.wait()  # in the run's group already, not yet told it may not see the run
    await broadcast(finished_run.pk, await store(finished_run, "run.resumed", {"secret": "x"}))
    await broadcast(finished_run.pk, DELTA)
    may_answer.set()
    assert (await connecting)[0]

    assert await communicator.receive_output(timeout=3) == {"type": "websocket.close", "code": 4404}
    assert await communicator.receive_nothing(timeout=0.2)  # not even after the close
    assert not get_channel_layer().groups.get(run_group(finished_run.pk))
    await communicator.disconnect()


async def test_a_missing_run_closes_with_4404(headers):
    communicator = await connect("/ws/api/runs/999999/", headers)
    await assert_closed_with(communicator, 4404)


async def test_a_foreign_origin_is_refused(finished_run, headers):
    headers = [(b"origin", b"http://evil.example"), *headers[1:]]
    communicator = WebsocketCommunicator(application, f"/ws/api/runs/{finished_run.pk}/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected


async def test_a_session_cookie_without_an_origin_is_refused(finished_run, headers):
    headers = [h for h in headers if h[0] != b"origin"]
    communicator = WebsocketCommunicator(application, f"/ws/api/runs/{finished_run.pk}/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected


async def test_an_api_client_sending_no_origin_follows_with_its_token(finished_run, builder):
    """Python's websockets and Node's ws send no Origin: a bearer token alone must do."""
    _token, raw = await database_sync_to_async(token_create)(user=builder)
    expected = await stored(finished_run)
    communicator = await connect(
        f"/ws/api/runs/{finished_run.pk}/",
        [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {raw}".encode())],
    )
    assert await receive_json(communicator, len(expected)) == expected
    await communicator.disconnect()


async def test_without_an_origin_a_bad_token_or_none_is_closed_4401(finished_run):
    for headers in ([(b"host", b"127.0.0.1"), (b"authorization", b"Bearer cp_nope")],
                    [(b"host", b"127.0.0.1")]):
        communicator = await connect(f"/ws/api/runs/{finished_run.pk}/", headers)
        await assert_closed_with(communicator, 4401)


# HTML ----------------------------------------------------------------------------------------------


async def test_the_html_socket_sends_escaped_out_of_band_fragments(finished_run, headers):
    expected = await stored(finished_run)
    communicator = await connect(f"/ws/runs/{finished_run.pk}/", headers)

    fragments = await receive_html(communicator, len(expected))

    for event, fragment in zip(expected, fragments, strict=True):
        assert 'hx-swap-oob="beforeend:#run-events"' in fragment
        assert fragment.count("<li ") == 1 and f'<li id="event-{event["seq"]}"' in fragment
        assert ('id="run-status"' in fragment) == event["type"].startswith("run.")
    completed = [f for e, f in zip(expected, fragments, strict=True) if e["type"] == "task.completed"]
    assert completed and all("&lt;script&gt;alert(&#x27;tides&#x27;)&lt;/script&gt;" in f for f in completed)
    assert all("<script" not in f for f in fragments)
    assert 'data-status="succeeded"' in fragments[-1]
    await communicator.disconnect()


async def test_the_html_socket_streams_deltas_into_the_answer_escaped(finished_run, headers):
    count = len(await stored(finished_run))
    communicator = await connect(f"/ws/runs/{finished_run.pk}/", headers)
    await receive_html(communicator, count)
    task_id = finished_run.snapshot["tasks"][0]["id"]

    for task in (task_id, None):
        await broadcast(finished_run.pk, {"seq": None, "type": "llm.delta", "at": "2026-01-01T00:00:00Z",
                                          "task_id": task, "step_id": None, "data": {"text": "<b>Hi"}})
    by_task, by_run = await receive_html(communicator, 2)

    assert by_task == f'<span hx-swap-oob="beforeend:#delta-{task_id}">&lt;b&gt;Hi</span>'
    assert by_run == '<span hx-swap-oob="beforeend:#delta-run">&lt;b&gt;Hi</span>'
    await communicator.disconnect()


async def test_reconnecting_with_after_sends_no_row_twice(finished_run, headers):
    count = len(await stored(finished_run))
    first = await connect(f"/ws/runs/{finished_run.pk}/", headers)
    rows = await receive_html(first, count)
    await first.disconnect()
    newer = await store(finished_run, "run.resumed")

    again = await connect(f"/ws/runs/{finished_run.pk}/?after={count}", headers)
    await broadcast(finished_run.pk, newer)
    more = await receive_html(again, 1)

    ids = [f'id="event-{n}"' for n in range(1, count + 2)]
    received = rows + more
    assert [sum(i in r for r in received) for i in ids] == [1] * (count + 1)
    assert 'data-status="queued"' in more[0]
    assert await again.receive_nothing(timeout=0.1)
    await again.disconnect()
