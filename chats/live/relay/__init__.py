"""Chat frames from the process that runs a turn to every page open on the chat, in any process.

This is the site's hot path: every agent event reaches its pages through here, so it does as
little per frame as it can.

- A frame is JSON text, encoded once by its publisher (`protocol.encode`) whatever the number of
  pages; pages forward the text as it is.
- Pages in the publishing process get the frame straight from memory (`local.py`): no channel
  layer, no copy.
- With Redis (`redis_relay.py`), a frame goes only to the other processes that have a page of its
  chat open. Each process subscribes to one pub/sub channel of its own (`inbox.py`) and lists
  itself, in Redis, as a listener of each chat its pages show (`listing.py`). Every tick the
  publisher asks which other processes listen to the tick's chats, then sends each frame to
  their inboxes (`publisher.py`).

Nothing is dropped silently. The event log is written before anything is published, and a
process lists itself before its page reads the log, so a frame either reaches the page or was
in the log the page read. A page that may have missed a frame (its socket fell behind, this
process's inbox or listing lapsed) is told, through `Subscriber.missed`, and catches up from the
log (`ChatConsumer`). A Redis that stops answering holds up nothing here: pages in this process
get their frames at once, and the waits on Redis are bounded (`timing.py`).

**Who may publish** (the rule of `chats/live/__init__.py`). `publish` below is the relay's one way
in, and only `chats.live.protocol.publish_to_chats` calls it. That in turn is called only by code
that has committed what its frames say: the event log's flusher, after its batch's transaction (the
frames of `turn.events`), and the run, after the transaction that started or finished a turn (its
cards). A frame published before its commit could show a page what the log does not hold, and the
page's catch-up would then contradict it.

The channel layer carries what is rare and must reach one run or one user wherever it lives:
stop requests and logouts (`protocol.publish`), never chat frames.
"""

from __future__ import annotations

from django.conf import settings

from chats.live.relay.local import LocalRelay, RelayFrame, Subscriber
from chats.live.relay.redis_relay import RedisRelay
from chats.loop.per_loop import PerLoop

__all__ = [
    "LocalRelay",
    "RedisRelay",
    "RelayFrame",
    "Subscriber",
    "close_relay",
    "get_relay",
    "publish",
]


def _new_relay() -> LocalRelay:  # a RedisRelay is a LocalRelay that also talks to Redis
    url = settings.REDIS_URL
    return RedisRelay(url, settings.RELAY_PREFIX) if url else LocalRelay()


get_relay = PerLoop(_new_relay)  # this event loop's relay


async def publish(frames: list[tuple[int, RelayFrame]]) -> None:
    """Send each (chat id, encoded frame) to every page open on that chat, in any process, in
    order. Called only by `chats.live.protocol.publish_to_chats` (see "Who may publish")."""
    await get_relay().publish(frames)


async def close_relay() -> None:
    """Close this event loop's relay, if it has one (tests, at the end of each)."""
    relay = get_relay.pop()
    if relay is not None:
        await relay.close()
