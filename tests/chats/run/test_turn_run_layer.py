"""The process's stop listener shares its channel-layer receive with every page."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import get_channel_layer

from chats.run.registry import RunRegistry


class FinishingRun:
    """Stands in for TurnRun: publishes to a page's channel as it ends, as finishing a turn does."""

    def __init__(self, page_channel: str) -> None:
        self.turn_id = 1
        self.page_channel = page_channel
        self.task = None
        self.stop_requested = False

    async def run(self) -> None:
        await get_channel_layer().send(self.page_channel, {"type": "turn.finished", "turn_id": 1})


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="the shared receive is channels_redis's"
)
async def test_runs_ending_and_the_listener_closing_lose_no_message_meant_for_a_page():
    layer = get_channel_layer()

    async def received(page: str) -> dict | None:
        try:
            return await asyncio.wait_for(layer.receive(page), timeout=3)
        except TimeoutError:
            return None

    messages = []
    for _ in range(10):
        registry = RunRegistry()
        for _ in range(2):
            page = await layer.new_channel()
            await registry._supervise(FinishingRun(page))
            messages.append(await received(page))
        page = await layer.new_channel()
        await layer.send(page, {"type": "turn.finished", "turn_id": 1})
        await registry.shutdown()  # its stop listener leaves
        messages.append(await received(page))
    assert messages == [{"type": "turn.finished", "turn_id": 1}] * 30
