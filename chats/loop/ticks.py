"""The relay's clock: the event log flushes at its ticks, and paced streams are read at them.

The event log relays what the runs read once per tick (its coalescing window), so reading an
agent's stream more often than that buys the page nothing. It costs the server, though:
an agent paced at 50 events/s sends each event in a packet of its own, and each read wakes the
run's whole chain (the SSE parser, the transcript, the log) whether it carries one event or ten.
So the agents' transport reads a paced stream once per tick, aiohttp buffering what arrives in
between (`chats.agent.aiohttp_transport`), and the log's flusher waits for the same tick, then
lets those reads append before it writes (`chats.live.event_log`): an event waits for the next tick,
as it waited for the next flush before.

Every waiter of one tick wakes in the same turn of the loop. A tick falls one window after the
last, or, after a quiet spell, on the next multiple of the window on the loop's clock.

The window is EVENT_FLUSH_INTERVAL, widened under load. Each tick costs the server per stream
read and per frame sent, whatever they carry, and every paced stream is read at every tick: when
a tick wakes more than QUIET_STREAMS waiters, the next tick is that much further away (75: 1.5
intervals), up to EVENT_FLUSH_INTERVAL_MAX; a tick that wakes fewer brings the interval back. A
quiet process keeps the short window; a busy one sends fewer, fuller frames rather than falling
behind (docs/PERFORMANCE.md, "A window that widens under load"). The first tick after a quiet spell
may still be a wide window away.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

from chats.loop.per_loop import PerLoop

logger = logging.getLogger(__name__)


def tick_number(now: float, interval: float) -> int:
    """The number of the first tick after `now`: it falls at that number times `interval`."""
    # The tolerance keeps a time that is a tick, give or take a float's rounding, on that tick
    # (0.3 / 0.1 is 2.9999999999999996). It fades once the quotient passes ~1e7 (days of uptime
    # on the loop's clock): then a waiter arriving on a tick's very millisecond may pass once.
    # What keeps a waiter the tick has just woken from passing is Ticks.wait's max().
    return math.floor(now / interval + 1e-9) + 1


# The paced streams one interval serves: past this, the window widens in proportion. Measured
# on two cores with 200 streams (docs/PERFORMANCE.md, "A window that widens under load"): in one
# process, a 60 ms window took 15-20% less CPU per event than 30 ms, and its 99th percentile of
# delay was no higher, the server being less saturated (100 ms gained no more CPU, and passed
# 250 ms at the 99th percentile); in two workers of 100 streams each, widening from 50 streams
# rather than 100 took ~12% less CPU per event for ~12 ms more median delay.
QUIET_STREAMS = 50

# How long before a tick the sockets held since the last one are read again (`wait(before=)`):
# the packets the kernel gathered meanwhile reach the reader's buffer in one read before the tick
# wakes it. What arrives in these last milliseconds is read packet by packet.
READ_LEAD = 0.003


class Ticks:
    """This event loop's ticks, `interval` seconds apart, or up to `longest` apart while many
    streams wait for them (0 or less: every turn of the loop)."""

    def __init__(self, interval: float, longest: float = 0.0) -> None:
        self.interval = interval  # the window of a quiet process
        self.longest = max(interval, longest)
        self.window = interval  # from the last tick to the next
        # The next tick's waiters, woken together; a future each rather than one asyncio.Event:
        # an Event's wait cost 0.5 µs more per waiter and tick (docs/PERFORMANCE.md, "A window
        # that widens under load"), and one shared future would be cancelled with any one waiter.
        self._waiters: list[asyncio.Future[None]] | None = None
        self._early: list[Callable[[], None]] = []  # due READ_LEAD before the next tick
        self._loop: asyncio.AbstractEventLoop | None = None  # whose clock _at is on
        self._at = -math.inf  # the last tick's time on the loop's clock

    async def wait(self, before: Callable[[], None] | None = None) -> None:
        """Return at the next tick; call `before` READ_LEAD seconds ahead of it (or, on a late
        loop, at the tick, before any waiter wakes). Cancelling one waiter leaves the others
        waiting, and its `before` is called all the same."""
        if self.interval <= 0:
            if before is not None:
                _call_all([before])
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        waiters = self._waiters
        if loop is not self._loop:  # a closed loop's tick never comes (tests run many loops)
            self._loop, self._at, waiters = loop, -math.inf, None
        if waiters is None:
            # Never a tick that has passed: uvloop may fire a timer up to a millisecond early,
            # and a reader woken by a tick that comes straight back must wait for the next one.
            window = self.window
            self._at = max(tick_number(loop.time(), window) * window, self._at + window)
            self._waiters = waiters = []
            self._early = []  # this tick's own: a tick calls only what was asked of it
            loop.call_at(self._at, self._tick, waiters, self._early)
        if before is not None:
            if not self._early:  # none asked yet, or its early timer has run: one more timer
                loop.call_at(self._at - READ_LEAD, _call_all, self._early)
            self._early.append(before)
        waiter = loop.create_future()
        waiters.append(waiter)
        await waiter

    def _tick(self, waiters: list[asyncio.Future[None]], early: list[Callable[[], None]]) -> None:
        if waiters is self._waiters:
            self._waiters = None
        _call_all(early)  # what its early timer has not called: a loop running late
        woken = 0
        for waiter in waiters:
            if not waiter.done():  # a cancelled waiter's future is done, and not counted
                waiter.set_result(None)
                woken += 1
        self.window = widened(self.interval, self.longest, woken)


def widened(interval: float, longest: float, waiters: int) -> float:
    """The window after a tick that woke `waiters` (the paced streams and the event log's
    flusher): `interval`, widened in proportion past QUIET_STREAMS, up to `longest`."""
    return min(max(interval, longest), max(interval, interval * waiters / QUIET_STREAMS))


def _call_all(callbacks: list[Callable[[], None]]) -> None:
    """Call each once, emptying the list (the tick calls what its early timer has not). One
    that fails is logged and the others are called all the same: each resumes a stream."""
    calling = callbacks[:]
    callbacks.clear()
    for callback in calling:
        try:
            callback()
        except Exception:
            logger.exception("A callback before the relay's tick failed")


def _relay_ticks() -> Ticks:
    # Imported here, not at the top: chats.agent uses this module, and imports no settings.
    from django.conf import settings

    return Ticks(settings.EVENT_FLUSH_INTERVAL, settings.EVENT_FLUSH_INTERVAL_MAX)


get_ticks = PerLoop(_relay_ticks)
