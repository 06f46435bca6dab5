"""The relay's clock: the event log flushes at its ticks, and paced streams are read at them.

The event log relays what the runs read once per EVENT_FLUSH_INTERVAL (its coalescing window), so
reading an agent's stream more often than that buys the page nothing. It costs the server, though:
an agent paced at 50 events/s sends each event in a packet of its own, and each read wakes the
run's whole chain (the SSE parser, the transcript, the log) whether it carries one event or ten.
So the agents' transport reads a paced stream once per tick, aiohttp buffering what arrives in
between (`chats.agent.aiohttp_transport`), and the log's flusher waits for the same tick, then
lets those reads append before it writes (`chats.event_log`): an event waits for the next tick,
as it waited for the next flush before.

The ticks are multiples of the interval on the event loop's clock (`loop.time()`): every waiter
of one tick wakes in the same turn of the loop.
"""

from __future__ import annotations

import asyncio

from django.conf import settings

from .per_loop import PerLoop


def next_tick(now: float, interval: float) -> float:
    """The first multiple of `interval` after `now`."""
    return (now // interval + 1) * interval


class Ticks:
    """This event loop's ticks, `interval` seconds apart."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._tick: asyncio.Event | None = None  # set at _tick_at; shared by its waiters
        self._tick_at = 0.0

    async def wait(self) -> None:
        """Return at the next tick. Cancelling one waiter leaves the others waiting."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._tick is None or now >= self._tick_at:
            self._tick = tick = asyncio.Event()
            self._tick_at = next_tick(now, self.interval)
            loop.call_at(self._tick_at, tick.set)
        await self._tick.wait()


get_ticks = PerLoop(lambda: Ticks(settings.EVENT_FLUSH_INTERVAL))
