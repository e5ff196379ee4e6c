"""The local channel layer keeps channels' in-memory semantics while sweeping at most once a second."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull

from planner_site.layers import LocalChannelLayer


@pytest.fixture
def layer() -> LocalChannelLayer:
    return LocalChannelLayer()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The layer's time.time(), moved by hand."""
    now = [1_000_000.0]
    monkeypatch.setattr("planner_site.layers.time.time", lambda: now[0])
    monkeypatch.setattr("channels.layers.time.time", lambda: now[0])
    return now


async def test_a_message_sent_to_a_channel_is_received_once(layer):
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "hello", "n": 1})

    assert await layer.receive(channel) == {"type": "hello", "n": 1}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(channel), timeout=0.05)


async def test_group_send_reaches_every_member_in_order_and_not_others(layer):
    a, b, outsider = [await layer.new_channel() for _ in range(3)]
    await layer.group_add("run.1", a)
    await layer.group_add("run.1", b)

    for n in (1, 2):
        await layer.group_send("run.1", {"type": "run.event", "n": n})

    for channel in (a, b):
        assert [(await layer.receive(channel))["n"] for _ in range(2)] == [1, 2]
    await layer.group_send("run.2", {"type": "run.event"})  # nobody's group
    assert outsider not in layer.channels


async def test_group_send_copies_once_so_the_sender_may_change_its_dict(layer):
    a, b = await layer.new_channel(), await layer.new_channel()
    for channel in (a, b):
        await layer.group_add("run.1", channel)
    message = {"type": "run.event", "event": {"seq": 1}}

    await layer.group_send("run.1", message)
    message["event"]["seq"] = 99

    got_a, got_b = await layer.receive(a), await layer.receive(b)
    assert got_a == got_b == {"type": "run.event", "event": {"seq": 1}}
    assert got_a is got_b  # one copy shared by the members, not one each


async def test_a_discarded_member_gets_nothing_more(layer):
    a = await layer.new_channel()
    await layer.group_add("run.1", a)
    await layer.group_discard("run.1", a)

    await layer.group_send("run.1", {"type": "run.event"})

    assert a not in layer.channels and "run.1" not in layer.groups


async def test_a_full_channel_raises_on_send_and_misses_group_sends(clock):
    layer = LocalChannelLayer(capacity=2)
    full, other = await layer.new_channel(), await layer.new_channel()
    for channel in (full, other):
        await layer.group_add("run.1", channel)
    for n in (1, 2):
        await layer.send(full, {"type": "x", "n": n})

    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "x", "n": 3})
    await layer.group_send("run.1", {"type": "x", "n": 4})

    assert [(await layer.receive(full))["n"] for _ in range(2)] == [1, 2]
    assert (await layer.receive(other))["n"] == 4


async def test_an_expired_message_is_swept_and_drops_its_channel_from_groups(clock):
    layer = LocalChannelLayer(expiry=60)
    stale, fresh = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("run.1", stale)
    await layer.group_add("run.1", fresh)
    await layer.group_send("run.1", {"type": "x"})
    await layer.receive(fresh)

    clock[0] += 60.5
    await layer.group_send("run.2", {"type": "x"})

    assert stale not in layer.channels
    assert set(layer.groups["run.1"]) == {fresh}  # as in channels: an expiry ends the membership


async def test_no_sweep_within_a_second_of_the_last(clock):
    layer = LocalChannelLayer(expiry=1)
    channel = await layer.new_channel()
    await layer.group_add("run.1", channel)
    await layer.group_send("run.1", {"type": "x", "n": 1})  # sweeps (the first)

    clock[0] += 0.9
    await layer.group_send("run.1", {"type": "x", "n": 2})  # no sweep yet
    assert len(layer.channels[channel]._queue) == 2
    clock[0] += 0.2  # n=1 expired 0.1 s ago, and a second has passed: swept
    assert (await layer.receive(channel))["n"] == 2


async def test_group_memberships_expire_after_group_expiry(clock):
    layer = LocalChannelLayer(group_expiry=100)
    old = await layer.new_channel()
    await layer.group_add("run.1", old)
    clock[0] += 50
    young = await layer.new_channel()
    await layer.group_add("run.1", young)

    clock[0] += 60  # old joined 110 s ago, young 60 s ago
    await layer.group_send("run.1", {"type": "x"})

    assert young in layer.channels and old not in layer.channels


async def test_flush_forgets_everything(layer):
    channel = await layer.new_channel()
    await layer.group_add("run.1", channel)
    await layer.send(channel, {"type": "x"})

    await layer.flush()

    assert layer.channels == {} and layer.groups == {}


async def test_the_sweep_drops_idle_empty_queues_but_not_one_a_receiver_waits_on(clock):
    layer = LocalChannelLayer()
    idle, waiting = await layer.new_channel(), await layer.new_channel()
    await layer.send(idle, {"type": "x"})
    await layer.receive(idle)  # now empty, and nobody receives
    receiver = asyncio.ensure_future(layer.receive(waiting))
    await asyncio.sleep(0)
    assert {idle, waiting} <= set(layer.channels)

    clock[0] += 1.5
    await layer.group_send("run.1", {"type": "x"})  # sweeps

    assert idle not in layer.channels and waiting in layer.channels
    await layer.send(waiting, {"type": "x", "n": 1})
    assert (await receiver)["n"] == 1


async def test_the_configured_layer_keeps_a_burst_of_events_for_a_socket_that_reads_late():
    from channels.layers import channel_layers

    layer = channel_layers.make_backend("default")  # as settings configure it
    assert isinstance(layer, LocalChannelLayer)
    me = await layer.new_channel()
    await layer.group_add("run.burst", me)
    for seq in range(1, 301):  # three times channels' default capacity
        await layer.group_send("run.burst", {"type": "run.event", "seq": seq})
    assert [(await layer.receive(me))["seq"] for _ in range(300)] == list(range(1, 301))


async def test_a_handed_over_message_reaches_every_member_as_is_without_a_copy(layer: LocalChannelLayer) -> None:
    first, second = await layer.new_channel(), await layer.new_channel()
    for channel in (first, second):
        await layer.group_add("run-1", channel)
    message = {"type": "run.event", "event": {"seq": 1, "data": {"text": "hi"}}}
    await layer.group_send_shared("run-1", message)
    got = [await layer.receive(first), await layer.receive(second)]
    assert got[0] is message and got[1] is message  # shared, no copy made
    await layer.group_send("run-1", message)
    copied = await layer.receive(first)
    assert copied == message and copied is not message  # group_send still copies
