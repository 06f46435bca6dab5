"""The single-process channel layer: channels' in-memory layer, whose expiry sweep is rationed."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer
from channels.layers import get_channel_layer

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


async def test_expired_messages_and_memberships_are_still_swept():
    layer = InMemoryChannelLayer(expiry=0.05, group_expiry=1)
    layer.sweep_interval = 0.1
    await layer.group_add("old", "specific.gone!a")
    layer.groups["old"]["specific.gone!a"] -= 10  # joined long ago
    await layer.send("specific.gone!b", {"type": "never read"})
    await asyncio.sleep(0.15)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await layer.receive("specific.other!c")  # a receive sweeps first
    assert "specific.gone!b" not in layer.channels
    assert not layer.groups["old"]
