"""A run's stop listener shares the process's channel-layer receive with every page."""

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
async def test_ending_a_run_loses_no_message_meant_for_a_page():
    layer = get_channel_layer()
    lost = 0
    for _ in range(20):
        page = await layer.new_channel()
        await RunRegistry()._supervise(FinishingRun(page))
        try:
            message = await asyncio.wait_for(layer.receive(page), timeout=3)
        except TimeoutError:
            lost += 1
        else:
            assert message == {"type": "turn.finished", "turn_id": 1}
    assert lost == 0
