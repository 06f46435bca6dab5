"""The garbage collector's settings for a serving process (docs/PERFORMANCE.md, "The garbage
collector's settings").

Relaying an event allocates a few dozen small containers (the parsed JSON, the typed event, its
stored and relayed forms), nearly all freed by reference counting within one flush interval.
At CPython's default the youngest generation is collected after every 700 net allocations, so
200 streaming chats paid hundreds of collections a run that each found little to free, and every
tenth of those promoted whatever was still in flight. Full collections walked the whole heap,
some 80,000 objects of Django and the site's own modules left by start-up, for nothing: each
was a pause of 40-85 ms in every stream of the process (measured on Python 3.11, whose
collector has three generations).
"""

from __future__ import annotations

import gc

# Net allocations before the youngest generation is collected (CPython 3.11's default: 700).
# The older generations keep their defaults (10, 10).
YOUNG_GENERATION_THRESHOLD = 10_000

_startup_heap_frozen = False


def tune_collector() -> None:
    """Collect the youngest generation less often: most of what a relayed event allocates is
    freed by reference counting before the collector would look at it."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, oldest)


def freeze_heap_after_startup(lifespan_app):
    """Wrap an ASGI lifespan app: freeze the heap once start-up is complete."""

    async def lifespan(scope, receive, send) -> None:
        async def send_then_freeze(message) -> None:
            if message["type"] == "lifespan.startup.complete":
                freeze_startup_heap()
            await send(message)

        await lifespan_app(scope, receive, send_then_freeze)

    lifespan.__wrapped__ = lifespan_app
    return lifespan


def freeze_startup_heap() -> None:
    """Move what start-up left alive (modules, settings, URL patterns, templates) out of the
    collector's sight, so full collections walk only what serving allocates.

    Once per process: a test session starts many servers, and its later heaps are its tests'.
    """
    global _startup_heap_frozen
    if _startup_heap_frozen:
        return
    gc.collect()  # free start-up's cyclic garbage first: frozen objects are never collected
    gc.freeze()
    _startup_heap_frozen = True
