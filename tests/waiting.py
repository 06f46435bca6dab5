"""Synchronising tests on conditions rather than on time.

`wait_until` polls a condition on the running event loop; `wait_until_sync` does the same from a
thread (a test that drives servers from outside their loop). Each fails with the condition's
description once `timeout` has passed: a generous bound for a busy machine, never a figure the
test asserts. `run_on_virtual_clock` runs a coroutine on a loop whose clock moves only when it
would sleep, for tests of timing.
"""

from __future__ import annotations

import asyncio
import inspect
import selectors
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

POLL = 0.01  # seconds between two looks at the condition


async def wait_until(
    condition: Callable[[], object], timeout: float = 10.0, what: str = ""
) -> None:
    """Return once `condition()` is true (awaited, if it returns an awaitable: a query through
    `database_sync_to_async`, say); fail the test after `timeout` seconds, naming `what` it
    waited for (else the condition's name)."""
    deadline = time.monotonic() + timeout
    while not await _holds(condition):
        assert time.monotonic() < deadline, f"timed out waiting for {what or _name(condition)}"
        await asyncio.sleep(POLL)


async def _holds(condition: Callable[[], object]) -> bool:
    value = condition()
    if inspect.isawaitable(value):
        value = await value
    return bool(value)


def wait_until_sync(condition: Callable[[], object], timeout: float = 10.0, what: str = "") -> None:
    """`wait_until` for code outside an event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or _name(condition)}"
        time.sleep(POLL)


def _name(condition: Callable[[], object]) -> str:
    return getattr(condition, "__qualname__", repr(condition))


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when it would sleep, and by exactly that long: tick
    times are exact however busy the machine is, and no real time passes. Work handed to a
    thread is waited for by spinning, with the clock still."""

    class Selector(selectors.DefaultSelector):
        now = 1000.0

        def select(self, timeout=None):
            self.now += timeout or 0.0
            return []

    def __init__(self) -> None:
        super().__init__(self.Selector())

    def time(self) -> float:
        return self._selector.now


def run_on_virtual_clock(main: Callable[[asyncio.AbstractEventLoop], Awaitable[T]]) -> T:
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()
