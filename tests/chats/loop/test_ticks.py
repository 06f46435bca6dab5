"""The relay's clock: one grid of ticks per event loop, shared by the readers of paced streams."""

from __future__ import annotations

import asyncio
import itertools
import math
from typing import TypeVar

import pytest
import uvloop

from chats.loop import ticks as ticks_module
from chats.loop.ticks import QUIET_STREAMS, READ_LEAD, Ticks, get_ticks, tick_number
from tests.waiting import run_on_virtual_clock

T = TypeVar("T")


@pytest.mark.parametrize(
    ("now", "interval", "expected"),
    [
        (0.0, 0.1, 0.1),
        (0.05, 0.1, 0.1),
        (0.1, 0.1, 0.2),
        (0.19, 0.1, 0.2),
        (0.3, 0.1, 0.4),  # 0.3 / 0.1 is 2.9999999999999996 in floats: on a tick all the same
        (1.0, 0.1, 1.1),
    ],
)
def test_the_next_tick_is_the_next_multiple_of_the_interval(now, interval, expected):
    assert tick_number(now, interval) * interval == pytest.approx(expected)


def test_every_waiter_of_a_tick_wakes_at_that_tick():
    """Both at the next tick: not a whole interval after they began to wait."""
    ticks = Ticks(1.0)

    async def main(loop):
        tick = tick_number(loop.time() + 0.5, 1.0)  # in seconds, at an interval of 1 s
        await asyncio.sleep(tick - 0.7 - loop.time())  # 0.3 s after a tick

        async def woken_at() -> float:
            await ticks.wait()
            return loop.time()

        return tick, await asyncio.gather(woken_at(), woken_at())

    tick, woken = run_on_virtual_clock(main)
    assert woken == [pytest.approx(tick), pytest.approx(tick)]


def test_a_waiter_woken_by_a_tick_waits_for_the_next_one_on_uvloop():
    """uvloop's clock and timers count whole milliseconds: a reader that comes back within the
    tick's millisecond must not find the tick still to come, or already past and let through."""

    async def woken_at_ticks() -> list[float]:
        loop = asyncio.get_running_loop()
        ticks = Ticks(0.05)
        woken = []
        for _ in range(8):
            await ticks.wait()
            woken.append(loop.time())
        return woken

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        woken = runner.run(woken_at_ticks())
    assert len({math.floor((t + 0.002) / 0.05) for t in woken}) == len(woken)  # one a tick


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


@pytest.mark.parametrize("interval", [0, -1])
async def test_no_interval_is_every_turn_of_the_loop(interval):
    """EVENT_FLUSH_INTERVAL=0 turns batching off, as it did before the ticks."""
    await asyncio.wait_for(Ticks(interval).wait(), 0.5)


async def woken_together(ticks: Ticks, waiters: int) -> float:
    """Have `waiters` wait for the same tick; return the loop time it woke them."""
    await asyncio.gather(*(ticks.wait() for _ in range(waiters)))
    return asyncio.get_running_loop().time()


def test_a_tick_that_many_streams_wait_for_widens_the_next_window():
    """75 paced streams are one and a half times what one interval serves: the next tick is
    one and a half intervals after this one, and a quiet tick brings the interval back."""
    ticks = Ticks(0.02, longest=0.04)

    async def main(loop):
        return [await woken_together(ticks, n) for n in (int(QUIET_STREAMS * 1.5), 1, 1)]

    busy, after_busy, after_quiet = run_on_virtual_clock(main)
    assert after_busy - busy == pytest.approx(0.03)
    assert after_quiet - after_busy == pytest.approx(0.02)


def test_a_waiter_back_at_once_waits_a_whole_window_when_it_widens_or_narrows():
    """Never the tick that has just passed, whatever the window: each tick is one window
    after the last while the same waiters come straight back."""
    ticks = Ticks(0.02, longest=0.04)

    async def main(loop):
        return [await woken_together(ticks, n) for n in (QUIET_STREAMS * 2, QUIET_STREAMS, 1, 1)]

    woken = run_on_virtual_clock(main)
    gaps = [later - earlier for earlier, later in itertools.pairwise(woken)]
    assert gaps == pytest.approx([0.04, 0.02, 0.02])


def test_waiters_cancelled_before_the_tick_are_not_counted():
    ticks = Ticks(0.02, longest=0.04)

    async def main(loop):
        stopped = [asyncio.create_task(ticks.wait()) for _ in range(QUIET_STREAMS * 2)]
        await asyncio.sleep(0)
        for task in stopped:
            task.cancel()
        await woken_together(ticks, 1)

    run_on_virtual_clock(main)
    assert ticks.window == 0.02


async def test_the_window_widens_no_further_than_the_longest():
    ticks = Ticks(0.02, longest=0.04)
    await woken_together(ticks, QUIET_STREAMS * 10)
    assert ticks.window == 0.04


@pytest.mark.parametrize("longest", [0.0, 0.01, 0.02])
async def test_without_a_longer_window_many_streams_keep_the_interval(longest):
    """EVENT_FLUSH_INTERVAL_MAX at or under EVENT_FLUSH_INTERVAL keeps the window fixed."""
    ticks = Ticks(0.02, longest=longest)
    await woken_together(ticks, QUIET_STREAMS * 3)
    assert ticks.window == 0.02


async def test_a_few_streams_keep_the_interval():
    ticks = Ticks(0.02, longest=0.04)
    await woken_together(ticks, QUIET_STREAMS // 2)
    assert ticks.window == 0.02


def test_ticks_left_pending_by_a_closed_loop_do_not_hold_up_the_next_loop():
    """A tick still to come when its loop closed never comes: the next loop's waiters must not
    wait for it."""
    ticks = Ticks(0.02)

    async def leave_a_tick_pending(loop):
        waiter = asyncio.create_task(ticks.wait())
        await asyncio.sleep(0)
        waiter.cancel()  # the tick's timer stays, on a loop about to close
        await asyncio.gather(waiter, return_exceptions=True)

    run_on_virtual_clock(leave_a_tick_pending)

    async def wait_once(loop):
        await asyncio.wait_for(ticks.wait(), 1)

    run_on_virtual_clock(wait_once)


async def test_the_relay_ticks_take_both_windows_from_the_settings(settings):
    settings.EVENT_FLUSH_INTERVAL = 0.025
    settings.EVENT_FLUSH_INTERVAL_MAX = 0.07
    ticks = get_ticks()  # this test's loop's: made now, from these settings
    assert (ticks.interval, ticks.longest) == (0.025, 0.07)


def test_what_a_waiter_asks_to_run_before_the_tick_runs_read_lead_ahead_of_it():
    """A paced stream's socket is read again just before the tick, so the tick finds its bytes
    in the reader's buffer; a waiter cancelled meanwhile still gets its socket back."""
    ticks = Ticks(0.02)
    called: list[tuple[str, float]] = []

    async def main(loop):
        def before(name):
            return lambda: called.append((name, loop.time()))

        stopped = asyncio.create_task(ticks.wait(before("stopped")))
        waiting = asyncio.create_task(ticks.wait(before("waiting")))
        await asyncio.sleep(0)
        stopped.cancel()
        await waiting
        return loop.time()

    tick = run_on_virtual_clock(main)
    assert sorted(name for name, _ in called) == ["stopped", "waiting"]
    for _, at in called:
        assert at == pytest.approx(tick - READ_LEAD)


def test_what_runs_before_the_tick_runs_before_its_waiters_wake_even_when_late(monkeypatch):
    """A loop running late may fire the tick's timer first: the waiters wake after it all the
    same."""
    monkeypatch.setattr(ticks_module, "READ_LEAD", -0.005)  # its timer after the tick's
    ticks = Ticks(0.02)
    order: list[str] = []

    async def main(loop):
        await ticks.wait(lambda: order.append("before"))
        order.append("woken")

    run_on_virtual_clock(main)
    assert order == ["before", "woken"]


async def test_without_batching_what_runs_before_the_tick_runs_at_once():
    called = []
    await Ticks(0).wait(lambda: called.append(True))
    assert called == [True]
