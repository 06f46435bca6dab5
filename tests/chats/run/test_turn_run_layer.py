"""The process's stop listener: it shares its channel-layer receive with every page, and the
heartbeat keeps it listening."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.layers import get_channel_layer

from chats.run.registry import LISTENER_CLOSE, RunRegistry, request_stop
from tests.waiting import wait_until


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


class WaitingRun:
    """Stands in for TurnRun: streams until it is stopped."""

    def __init__(self, turn_id: int) -> None:
        self.turn_id = turn_id
        self.task = None
        self.stop_requested = False
        self.finishing = False
        self.began = True

    async def run(self) -> None:
        await asyncio.Event().wait()


async def test_a_stop_listener_the_layer_ended_is_started_again_by_the_heartbeat():
    registry = RunRegistry()
    run = WaitingRun(turn_id=7)
    registry.runs[run.turn_id] = run
    run.task = asyncio.create_task(registry._supervise(run))
    await wait_until(lambda: registry.stops.channel() is not None)
    ended = registry.stops.task
    await get_channel_layer().send(registry.stops.channel(), {"type": LISTENER_CLOSE})
    await wait_until(ended.done)

    await registry.stops.keep()
    await wait_until(lambda: registry.stops.channel() is not None)
    await request_stop(run.turn_id)
    await wait_until(run.task.done, what="the run stopped")
    assert run.stop_requested
    await registry.shutdown()
