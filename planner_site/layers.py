"""The channel layer of a single process (``make run``, tests): channels' in-memory one, made cheap.

Channels' ``InMemoryChannelLayer`` sweeps every queue and group on every ``receive`` and
``group_send``, and ``group_send`` deep-copies the message and starts a task for each member. A
run followed by 100 sockets then costs O(sockets²) work per event, on the one event loop that
also serves the sockets. This layer keeps its behaviour (expiry, group expiry, capacity and
``ChannelFull``, channels named ``specific.inmemory!…``) with three differences:

- Expired messages and group memberships are swept at most once per ``sweep_interval`` (1 s), so
  a message may outlive its ``expiry`` (60 s) by up to that long.
- ``group_send`` copies the message once and puts that copy straight into each member's queue:
  the members share it and must not change it (channels' consumers do not).
  ``group_send_shared`` skips even that copy, for a message its sender hands over.
- A channel's queue is made when it is first needed and kept while it is in use, instead of one
  new queue per message; the sweep drops empty queues that no ``receive`` waits on.

Scale-out (several processes) uses ``channels_redis`` instead: see ``CHANNEL_LAYERS``.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class LocalChannelLayer(InMemoryChannelLayer):
    sweep_interval = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0
        self._receivers: dict[str, int] = {}  # channel -> receive() calls waiting on it

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        if not self._put(channel, deepcopy(message), time.time() + self.expiry):
            raise ChannelFull(channel)

    async def receive(self, channel: str) -> dict[str, Any]:
        self._clean_expired()
        queue = self.channels.get(channel)
        if queue is None:  # a channel with a queue was checked when the queue was made
            self.require_valid_channel_name(channel)
            queue = self._queue(channel)
        self._receivers[channel] = self._receivers.get(channel, 0) + 1
        try:
            _, message = await queue.get()
        finally:
            if self._receivers[channel] == 1:
                del self._receivers[channel]
            else:
                self._receivers[channel] -= 1
        return message

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self.group_send_shared(group, deepcopy(message))  # one copy, so the sender may reuse its dict

    async def group_send_shared(self, group: str, message: dict[str, Any]) -> None:
        """``group_send`` of a message the sender hands over: never changed after, by anyone, so
        the members get it without a copy (``crews.realtime.broadcast``: a deep copy of every
        event of every run, 1-2 % of a run's server CPU, bench/peer.py's profile, #20)."""
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        members = self.groups.get(group)
        if not members:
            return
        shared = message
        expires = time.time() + self.expiry
        for channel in list(members):
            # As in channels, a full member misses the message and the others still get it.
            self._put(channel, shared, expires)

    def _queue(self, channel: str) -> asyncio.Queue[tuple[float, dict[str, Any]]]:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        return queue

    def _put(self, channel: str, message: dict[str, Any], expires: float) -> bool:
        """Queue the message; False if the channel is at capacity."""
        try:
            self._queue(channel).put_nowait((expires, message))
        except asyncio.QueueFull:
            return False
        return True

    def _clean_expired(self) -> None:
        now = time.time()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.sweep_interval
        super()._clean_expired()
        # Channels drops a queue as soon as a receive empties it, and makes a new one for the
        # next; here the sweep drops the empty queues that nobody waits on.
        for channel in [c for c, q in self.channels.items() if q.empty() and c not in self._receivers]:
            del self.channels[channel]

    async def flush(self) -> None:
        await super().flush()
        self._next_sweep = 0.0
