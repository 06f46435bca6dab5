"""Synchronising tests on conditions rather than on time.

`wait_until` polls a condition on the running event loop; `wait_until_sync` does the same from a
thread (a test that drives servers from outside their loop). Each fails with the condition's
description once `timeout` has passed: a generous bound for a busy machine, never a figure the
test asserts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

POLL = 0.01  # seconds between two looks at the condition


async def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Return once `condition()` is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {_name(condition)}"
        await asyncio.sleep(POLL)


def wait_until_sync(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """`wait_until` for code outside an event loop."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {_name(condition)}"
        time.sleep(POLL)


def _name(condition: Callable[[], object]) -> str:
    return getattr(condition, "__qualname__", repr(condition))
