"""One object per running event loop: a server process runs one loop, a test runs one of its own.

The event log, the relay, the run registry, the search index queue, the socket leases and the
agents' connection pool hold tasks and connections that belong to the loop that made them; a
closed loop's object is dropped. It imports nothing of the site, so `chats.agent` can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """Call it for this loop's object, made by `factory` on first use."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self.factory = factory
        self._by_loop: dict[asyncio.AbstractEventLoop, T] = {}

    def __call__(self) -> T:
        loop = asyncio.get_running_loop()
        for stale in [known for known in self._by_loop if known.is_closed()]:
            del self._by_loop[stale]
        if loop not in self._by_loop:
            self._by_loop[loop] = self.factory()
        return self._by_loop[loop]

    def pop(self) -> T | None:
        """Forget this loop's object, if any, and return it (to close it)."""
        return self._by_loop.pop(asyncio.get_running_loop(), None)
