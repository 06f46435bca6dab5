"""The relay's clock: one grid of ticks per event loop, shared by the readers of paced streams."""

from __future__ import annotations

import asyncio

import pytest

from chats.ticks import Ticks, next_tick


@pytest.mark.parametrize(
    ("now", "expected"),
    [(0.0, 0.1), (0.05, 0.1), (0.1, 0.2), (0.19, 0.2), (12.34, 12.4)],
)
def test_the_next_tick_is_the_next_multiple_of_the_interval(now, expected):
    assert next_tick(now, 0.1) == pytest.approx(expected)


async def test_every_waiter_of_a_tick_wakes_at_that_tick():
    loop = asyncio.get_running_loop()
    ticks = Ticks(0.05)
    tick = next_tick(loop.time(), 0.05)

    async def woken_at() -> float:
        await ticks.wait()
        return loop.time()

    first, second = await asyncio.gather(woken_at(), woken_at())
    assert min(first, second) >= tick - 0.002  # not before it (uvloop's clock counts in ms)
    assert abs(first - second) < 0.025  # the same tick: their reads come in together


async def test_cancelling_one_waiter_leaves_the_others_waiting():
    """A stopped run's reader is cancelled while it waits for a tick: the other runs' readers
    waiting for the same tick must still wake, not be cancelled with it."""
    ticks = Ticks(0.05)
    stopped = asyncio.create_task(ticks.wait())
    other = asyncio.create_task(ticks.wait())
    await asyncio.sleep(0)
    stopped.cancel()
    await asyncio.wait_for(other, 1)  # returns, rather than raising CancelledError
    assert stopped.cancelled()
    assert other.done() and not other.cancelled()
