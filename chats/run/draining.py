"""A worker told to stop (SIGTERM) lets its running turns finish before it exits.

On the first SIGTERM uvicorn stops listening and closes every websocket with code 1012 (service
restart): the pages reconnect, through the proxy, to another worker and resume from the event
log, as after a dropped connection. Then it runs the ASGI lifespan's shutdown
(chats/run/lifespan.py), which takes no more questions and calls `drain`: this process's runs
carry on, storing their events and relaying them through Redis to the pages' new worker, until
they end or SHUTDOWN_GRACE_SECONDS pass. A second SIGTERM, or SIGINT, cuts the wait short; what
still runs is then ended "interrupted" (`RunRegistry.shutdown`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

from chats.run.registry import RunRegistry

logger = logging.getLogger(__name__)

_draining = False


def is_draining() -> bool:
    """True once this process has begun to shut down (/readyz reports it)."""
    return _draining


async def drain(registry: RunRegistry, *, grace: float) -> None:
    """Wait for `registry`'s runs to end by themselves, for `grace` seconds at most, or until
    a second SIGTERM or SIGINT arrives."""
    global _draining
    _draining = True
    if not registry.runs:
        return
    hurry = asyncio.Event()
    with _signals_set(hurry):
        logger.info(
            "Shutting down: waiting up to %g s for %d running turns", grace, len(registry.runs)
        )
        idle = asyncio.create_task(registry.wait_idle(), name="drain-idle")
        hurried = asyncio.create_task(hurry.wait(), name="drain-hurry")
        try:
            await asyncio.wait({idle, hurried}, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
        finally:
            idle.cancel()
            hurried.cancel()
            await asyncio.gather(idle, hurried, return_exceptions=True)
    if registry.runs:
        why = "a second signal" if hurry.is_set() else f"{grace:g} s passed"
        logger.warning("Shutting down (%s): ending %d running turns", why, len(registry.runs))
    else:
        logger.info("Shutting down: every running turn has ended")


@contextlib.contextmanager
def _signals_set(event: asyncio.Event) -> Iterator[None]:
    """Set `event` on SIGTERM or SIGINT while inside, then restore the handlers (uvicorn's)."""
    loop = asyncio.get_running_loop()

    def handler(signum: int, frame: object) -> None:
        loop.call_soon_threadsafe(event.set)

    previous = {}
    for number in (signal.SIGTERM, signal.SIGINT):
        # Outside the main thread (an embedded loop) there are no signals to catch here.
        with contextlib.suppress(ValueError):
            previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)
