"""The single-process channel layer: channels' in-memory layer, whose expiry sweep is rationed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import channels.layers
import pytest
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer
from channels.layers import get_channel_layer

import researchsite.channel_layers
from researchsite.channel_layers import InMemoryChannelLayer


def test_the_site_uses_it_without_redis(settings):
    """One process (no REDIS_URL): this layer; several (REDIS_URL): channels_redis."""
    assert isinstance(get_channel_layer(), InMemoryChannelLayer) is not bool(settings.REDIS_URL)


async def test_many_receives_sweep_once_a_second(monkeypatch):
    """200 runs waiting for a stop request each walked every channel and group; now the first
    of them walks, and the rest within the second do not."""
    sweeps = []
    original = ChannelsInMemoryChannelLayer._clean_expired
    monkeypatch.setattr(
        ChannelsInMemoryChannelLayer, "_clean_expired", lambda self: sweeps.append(original(self))
    )
    layer = InMemoryChannelLayer()
    channels = [await layer.new_channel() for _ in range(200)]
    for channel in channels:
        await layer.group_add(f"turn-{channel[-8:]}", channel)
    waiting = [asyncio.create_task(layer.receive(channel)) for channel in channels]
    await asyncio.sleep(0)
    assert len(sweeps) == 1
    for channel in channels:
        await layer.send(channel, {"type": "stop"})
    assert [m["type"] for m in await asyncio.gather(*waiting)] == ["stop"] * 200


async def test_expired_messages_and_memberships_are_still_swept_once_a_sweep_is_due(monkeypatch):
    clock = SimpleNamespace(now=1000.0)  # channels' expiry reads time.time(), the sweep monotonic
    fake_time = SimpleNamespace(time=lambda: clock.now, monotonic=lambda: clock.now)
    monkeypatch.setattr(channels.layers, "time", fake_time)
    monkeypatch.setattr(researchsite.channel_layers, "time", fake_time)
    layer = InMemoryChannelLayer(expiry=0.5, group_expiry=1)
    await layer.group_add("old", "specific.gone!a")
    await layer.send("specific.gone!b", {"type": "never read"})
    await receive_briefly(layer)  # the first receive sweeps: nothing has expired yet

    clock.now += 0.8  # the message has expired, but the next sweep is due a second after the last
    await receive_briefly(layer)
    assert "specific.gone!b" in layer.channels and layer.groups["old"]

    clock.now += 1.7  # the sweep is due, and the membership has expired too
    await receive_briefly(layer)
    assert "specific.gone!b" not in layer.channels
    assert not layer.groups["old"]


async def receive_briefly(layer: InMemoryChannelLayer) -> None:
    """A receive on a channel nobody sends to: it sweeps as it starts, then waits (cancelled)."""
    receiving = asyncio.create_task(layer.receive("specific.other!c"))
    await asyncio.sleep(0)
    receiving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiving
