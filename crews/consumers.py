"""Websockets that follow a run: every event exactly once, replayed from the database, then live.

The consumer joins the run's group before it reads the database (Zulip's "register before
fetch"): an event stored while the replay runs is then either in the replay or queued for
``run_event``, and ``last_sent`` drops whichever copy comes second. A live event that skips ahead
(its predecessors were broadcast by another process and are still on their way) first pulls the
missing ones from the database, so the client never sees a gap.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.utils import translation
from django.utils.functional import LazyObject
from django.utils.translation.trans_real import parse_accept_lang_header

from crews import selectors
from crews.bridge import payload_of
from crews.models import Run, RunEvent
from crews.realtime import (
    EventPayload,
    deltas_group,
    follow_deltas,
    run_group,
    unfollow_deltas,
)
from crews.run_view import RunView, crew_plan_steps, plan_key, render_event_html
from planner_site.prepared import (
    STAND_IN_ID,
    STAND_IN_ID_2,
    STAND_IN_NUMBER,
    Prepared,
    column_converters,
    converted,
)
from planner_site.roles import is_admin

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
REPLAY_PAGE = 500
# A socket that heard nothing for this long while its run works reads the database for events
# it has not sent: a broadcast can be lost (a full channel, a Redis hiccup) and only a later
# event would show the gap; for the last one there is none.
IDLE_CATCH_UP_SECONDS = 5.0
ENDS = frozenset({"run.succeeded", "run.failed", "run.cancelled"})  # nothing follows these


@dataclass
class Opening:
    """What a socket's one database hop at connect found: whether it may follow the run (else
    the close code), the first page of the replay, and what the consumer prepared for it."""

    code: int | None  # CLOSE_UNAUTHENTICATED or CLOSE_NOT_FOUND; None: the socket follows
    events: list[EventPayload] = field(default_factory=list)
    prepared: Any = None


@database_sync_to_async
def _open(
    user: Any, run_id: int, after: int, prepare: Callable[[Any, int, list[EventPayload]], Any]
) -> Opening:
    """Who the user is, whether they see the run and the stored events after ``after``: one hop,
    one connection, for the whole connect (``scope["user"]`` is lazy: it is read here too)."""
    if user is None or not user.is_authenticated:
        return Opening(CLOSE_UNAUTHENTICATED)
    if isinstance(user, LazyObject):  # read above: the user itself holds the groups read below
        user = user._wrapped
    # Each role check (is_admin, can_build) reads the user's groups: read them once for this
    # hop, and forget them after it, so the socket's next hop sees a role changed meanwhile.
    # (A superuser's role needs no groups.)
    if not user.is_superuser:
        selectors.related_rows_known(user, "groups", _USER_GROUPS.all(_Group, user=user.pk))
    try:
        if not _run_visible(user, run_id):
            return Opening(CLOSE_NOT_FOUND)
        events = _stored_events_sync(run_id, after)
        return Opening(None, events, prepare(user, run_id, events))
    finally:
        getattr(user, "_prefetched_objects_cache", {}).pop("groups", None)


# The connect's reads, compiled once (planner_site.prepared): compiling them was most of the
# connect's CPU on the database thread, paid by every socket.
_Group = get_user_model()._meta.get_field("groups").related_model
_USER_GROUPS = Prepared(lambda user: _Group.objects.filter(user=user).order_by(), user=STAND_IN_ID)


def _visible_runs(run: int, user: int | None = None) -> QuerySet[Run]:
    """``selectors.run_visible`` for an admin (no ``user``) or anyone else (the user's id), as
    one run's id: the rules stay the selector's, built for a stand-in user of that role."""
    stand_in = get_user_model()(pk=user, is_superuser=user is None)  # a superuser is an admin
    if user is not None:
        selectors.related_rows_known(stand_in, "groups", [])  # no role: not an admin
    return selectors.run_visible(user=stand_in).filter(pk=run).order_by().values_list("pk")[:1]


_RUN_SEEN_BY_ADMIN = Prepared(lambda run: _visible_runs(run), run=STAND_IN_ID)
_RUN_SEEN_BY = Prepared(_visible_runs, run=STAND_IN_ID, user=STAND_IN_ID_2)
_EVENT_FIELDS = ("seq", "type", "at", "task_id", "step_id", "data")  # what payload_of reads
_EventRow = namedtuple("_EventRow", _EVENT_FIELDS)
_EVENT_COLUMNS = [RunEvent._meta.get_field(name).get_col(RunEvent._meta.db_table) for name in _EVENT_FIELDS]
_EVENTS_AFTER = Prepared(
    lambda run, after: RunEvent.objects.filter(run=run, seq__gt=after)
    .order_by("seq")
    .values_list(*_EVENT_FIELDS)[:REPLAY_PAGE],
    run=STAND_IN_ID,
    after=STAND_IN_NUMBER,
)


def _run_visible(user: Any, run_id: int) -> bool:
    """``selectors.run_visible(user=user).filter(pk=run_id).exists()``, compiled once."""
    if is_admin(user):
        return bool(_RUN_SEEN_BY_ADMIN.rows(run=run_id))
    return bool(_RUN_SEEN_BY.rows(run=run_id, user=user.pk))


def _stored_events_sync(run_id: int, after: int, upto: int | None = None) -> list[EventPayload]:
    # Rows of a read compiled once, converted as the ORM's values_list() would convert them
    # (it compiled the read and found the converters anew each time): payload_of reads the
    # same attributes off a named row.
    db = connections[DEFAULT_DB_ALIAS]  # the thread's own connection, as Prepared reads it
    converters = column_converters(db, "run event replay", _EVENT_COLUMNS)
    events = []
    for row in _EVENTS_AFTER.rows(run=run_id, after=after):
        event = _EventRow._make(converted(db, row, converters))
        if upto is None or event.seq <= upto:
            events.append(payload_of(event))
    return events


_stored_events = database_sync_to_async(_stored_events_sync)


def _int_param(params: dict[str, list[str]], name: str) -> int:
    try:
        return max(0, int(params.get(name, ["0"])[-1]))
    except ValueError:
        return 0


class RunEventsConsumer(AsyncWebsocketConsumer):
    """Authentication, the replay and the exactly-once bookkeeping; subclasses format events."""

    run_id: int
    last_sent: int = 0  # the newest seq the client has (from ?after=, then what was sent)
    group: str | None = None
    following = False  # the user may see the run: live events are sent from now on
    deltas = True  # whether the socket shows streamed LLM deltas (joins the deltas group)
    deltas_joined = False  # in deltas_group, so leaving discards it
    # follow_deltas, as a task: a connect cancelled while it runs still leaves it to finish,
    # and leaving uncounts the socket only once (and if) it was counted.
    follow: asyncio.Future[bool] | None = None
    _leaving: asyncio.Future[None] | None = None  # the one leave of the groups, once started
    ended = False  # the run's last event was sent: no catching up when idle
    heard_at = 0.0  # the loop's time of the last live event (or catch-up)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Channels' ``AsyncConsumer.__call__`` with one reader per source, not a task per message.

        Channels waits for the next message from the socket or the channel layer with a new task
        and an ``asyncio.wait`` for every message: with 100 sockets on a run that was about a
        sixth of the loop's work per event. Here each source has one reader, which dispatches
        what it reads under a lock, so messages are still handled one at a time and in order
        (``run_event`` never overlaps ``connect``, the replay or ``disconnect``). When one reader
        stops (``StopConsumer`` after ``disconnect``, or an error) the other is cancelled.

        Whatever ends it (an error, or the server cancelling it at shutdown, neither of which
        runs ``disconnect``), the socket leaves its groups and stops counting as a delta
        follower: else the run would stream to nobody until the count expired.
        """
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.channel_name = await self.channel_layer.new_channel()
        self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
        self.base_send = send
        turn = asyncio.Lock()

        async def read(source: Any) -> None:
            while True:
                message = await source()
                async with turn:
                    await self.dispatch(message)

        readers = [asyncio.ensure_future(read(receive)), asyncio.ensure_future(read(self.channel_receive))]
        idle = asyncio.ensure_future(self._catch_up_when_idle(turn))
        try:
            done, _ = await asyncio.wait(readers, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*readers, idle):
                task.cancel()
            await asyncio.gather(*readers, idle, return_exceptions=True)
            try:
                await asyncio.shield(self.leave())  # shielded: a second cancel cannot cut it short
            except Exception:
                logger.warning("Run socket %s could not leave its groups", self.channel_name, exc_info=True)
        for reader in done:
            error = None if reader.cancelled() else reader.exception()
            if error is not None and not isinstance(error, StopConsumer):
                raise error

    async def _catch_up_when_idle(self, turn: asyncio.Lock) -> None:
        """While the run works, every ``IDLE_CATCH_UP_SECONDS`` without a live event, send what
        the database has after ``last_sent``: the events whose broadcast was lost."""
        loop = asyncio.get_running_loop()
        self.heard_at = loop.time()
        while not self.ended:
            await asyncio.sleep(IDLE_CATCH_UP_SECONDS)
            if loop.time() - self.heard_at < IDLE_CATCH_UP_SECONDS:
                continue
            async with turn:  # never amid a live event, the replay or a disconnect
                if self.following and not self.ended:
                    try:
                        await self.catch_up()
                    except Exception:  # noqa: BLE001 - the next quiet period tries again
                        logger.warning("Run socket %s could not catch up", self.channel_name, exc_info=True)
                self.heard_at = loop.time()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Live events go straight to ``run_event``, and the socket's own messages to their
        handlers.

        Channels' own dispatch first runs ``close_old_connections`` through ``sync_to_async``
        for every message (and once more after a disconnect): with 100 sockets on a run, every
        event queued 100 hops on the one shared thread, ahead of the sends, and every socket took
        three hops just to open and close. This consumer touches the database only in
        ``database_sync_to_async`` helpers, which close old connections themselves.
        """
        kind = message["type"]
        if kind == "run.event":
            if self.following:  # queued while the connect was still checking who may see it
                await self.run_event(message)
        elif kind == "websocket.connect":
            await self.connect()
        elif kind == "websocket.receive":
            await self.websocket_receive(message)
        elif kind == "websocket.disconnect":
            await self.disconnect(message["code"])
            raise StopConsumer()
        else:
            await super().dispatch(message)

    async def connect(self) -> None:
        # Accept, then close with a code: a refused handshake would reach a browser as a bare
        # HTTP 403, and API.md promises the client these codes.
        await self.accept()
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        params = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.last_sent = _int_param(params, "after")
        self.configure(params)
        # Join before the replay is read, so nothing stored meanwhile is missed; and before the
        # user and the run are checked, in the same hop as the read. Nothing from the group
        # reaches the client unless the check lets the socket follow the run.
        self.run_id = run_id
        self.group = run_group(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        if self.deltas:
            self.deltas_joined = True
            await self.channel_layer.group_add(deltas_group(run_id), self.channel_name)
        opening = await _open(self.scope.get("user"), run_id, self.last_sent, self.prepare)
        if opening.code is not None:
            await self.leave()
            await self.close(code=opening.code)
            return
        self.following = True
        if self.deltas:
            self.follow = asyncio.ensure_future(follow_deltas(run_id))
            await asyncio.shield(self.follow)
        self.prepared(opening.prepared)
        for event in opening.events:
            await self.send_event(event)
        if len(opening.events) == REPLAY_PAGE:
            await self.catch_up()

    async def disconnect(self, code: int) -> None:
        await asyncio.shield(self.leave())

    def leave(self) -> asyncio.Future[None]:
        """Leave the groups and uncount the follow, once: ``disconnect`` and ``__call__``'s
        cleanup both await the same leave, so the follower count drops by one, not two."""
        if self._leaving is None:
            self._leaving = asyncio.ensure_future(self._leave())
        return self._leaving

    async def _leave(self) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if self.deltas_joined:
            await self.channel_layer.group_discard(deltas_group(self.run_id), self.channel_name)
        if self.follow is not None and await self.follow:
            await unfollow_deltas(self.run_id)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        return None  # the stream is one-way; htmx's ws extension may still send form data

    async def catch_up(self, upto: int | None = None) -> None:
        """Send every stored event after ``last_sent`` (up to ``upto``), in pages, in order."""
        while True:
            events = await _stored_events(self.run_id, self.last_sent, upto)
            for event in events:
                await self.send_event(event)
            if len(events) < REPLAY_PAGE:
                return

    async def run_event(self, message: dict[str, Any]) -> None:
        """A live event from the group (``run.event``)."""
        self.heard_at = asyncio.get_running_loop().time()
        event: EventPayload = message["event"]
        text = message.get("text")
        seq = event["seq"]
        if seq is None:  # ephemeral (a streamed LLM delta): never stored, never replayed
            if self.deltas:
                await self.emit(event, text)
            return
        if seq <= self.last_sent:
            return  # already sent, from the replay or a gap fill
        if seq > self.last_sent + 1:
            await self.catch_up(upto=seq - 1)
        if seq > self.last_sent:
            await self.send_event(event, text)

    async def send_event(self, event: EventPayload, text: str | None = None) -> None:
        assert event["seq"] is not None
        await self.emit(event, text)
        self.last_sent = event["seq"]
        self.ended = self.ended or event["type"] in ENDS

    # Formatting: one message per event --------------------------------------------------------

    def configure(self, params: dict[str, list[str]]) -> None:
        return None

    def prepare(self, user: Any, run_id: int, events: list[EventPayload]) -> Any:
        """What sending ``events`` (the first replay page) needs from the database, read in the
        connect's hop (a worker thread): it goes to ``prepared`` on the event loop."""
        return None

    def prepared(self, value: Any) -> None:
        return None

    async def emit(self, event: EventPayload, text: str | None = None) -> None:
        """Send the event; ``text`` is its JSON when it came live (``broadcast`` encoded it)."""
        raise NotImplementedError


class RunEventsJsonConsumer(RunEventsConsumer):
    """``/ws/api/runs/<id>/?after=<seq>[&deltas=1]``: one API.md ``Event`` per JSON message."""

    deltas = False

    def configure(self, params: dict[str, list[str]]) -> None:
        self.deltas = params.get("deltas", ["0"])[-1].lower() in ("1", "true", "yes")

    async def emit(self, event: EventPayload, text: str | None = None) -> None:
        await self.send(text_data=text if text is not None else json.dumps(event))


class RunEventsHtmlConsumer(RunEventsConsumer):
    """``/ws/runs/<id>/?after=<seq>``: out-of-band HTML fragments for htmx's ws extension.

    The run page shows the run folded up to ``after``; this consumer keeps the same ``RunView``,
    folds each event it sends into it and sends the event's log row plus every part of the page
    it changed, rendered from the page's own partials (``crews.run_view.render_event_html``).
    Fragments are rendered in the language the page was, with the viewer's controls.
    """

    view: RunView | None = None
    can_write = False
    language = settings.LANGUAGE_CODE

    def configure(self, params: dict[str, list[str]]) -> None:
        self.language = _language(self.scope)

    def prepare(self, user: Any, run_id: int, events: list[EventPayload]) -> Any:
        # The page as it was, built in the connect's hop when the replay has rows to add to it.
        return _page_view_sync(user, run_id, self.last_sent) if events else None

    def prepared(self, value: Any) -> None:
        if value is not None:
            self.view, self.can_write = value

    async def emit(self, event: EventPayload, text: str | None = None) -> None:
        if self.view is None:  # the first message: the page has every event up to last_sent
            self.view, self.can_write = await _page_view(self.scope["user"], self.run_id, self.last_sent)
        if event["type"] == "crew_plan.approved":  # the page lists the approved plan's steps
            key = plan_key(event["data"] or {})
            if key is not None and key not in self.view.plan_steps:
                self.view.plan_steps[key] = await database_sync_to_async(crew_plan_steps)(*key)
        with translation.override(self.language):
            html = render_event_html(self.view, dict(event), can_write=self.can_write)
        await self.send(text_data=html)


def _page_view_sync(user: Any, run_id: int, upto: int) -> tuple[RunView, bool]:
    run = Run.objects.select_related("crew", "agent").get(pk=run_id)
    return RunView.build(run, upto=upto), selectors.run_can_write(user=user, run=run)


_page_view = database_sync_to_async(_page_view_sync)


def _language(scope: dict[str, Any]) -> str:
    """The page's language: the language cookie, else the browser's Accept-Language."""
    candidates = []
    cookie = (scope.get("cookies") or {}).get(settings.LANGUAGE_COOKIE_NAME)
    if cookie:
        candidates.append(cookie)
    headers = dict(scope.get("headers") or [])
    accept = headers.get(b"accept-language", b"").decode("latin-1")
    candidates += [code for code, _q in parse_accept_lang_header(accept) if code != "*"]
    for code in candidates:
        try:
            return translation.get_supported_language_variant(code)
        except LookupError:
            continue
    return settings.LANGUAGE_CODE
