"""Following a chat live: one ordered outbox per follower, and the rule that sends each turn's
events once, in order.

A follower (a chat page's socket, `chats/pages/consumer.py`; an API event stream,
`chats/api/stream.py`) joins the relay (`chats/live/relay/`) with its `FrameOutbox`, then reads
the log after its cursor: the log is written before anything is published, so it sees every
event at least once, and seqs dedupe. Everything the follower is sent then goes through the
outbox, in order, to its one writer: the relay's frames and the follower's own items (a page's
`sync`). A frame of `turn.events` is placed against the turn's cursor (`place_events`): the
next events are sent as they are, events the follower has are skipped, and a gap means frames
were lost on the way, so the writer reads the log instead (`log_chunks`). A follower that reads
slower than its turns stream has its queued event frames dropped past `max_queued`, never
silently: a CATCH_UP item takes their place, and the log gives them back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import Enum
from typing import Any

from chats.live.protocol import EventView
from chats.live.relay import RelayFrame

logger = logging.getLogger(__name__)

CATCH_UP = "catch-up"  # an outbox item: frames may have been lost; catch up from the log
DROPPABLE = frozenset({"turn.events", "turn.notice"})  # what a follower that falls behind loses
REPLAY_CHUNK = 1000  # events read from the log at a time


class FrameOutbox:
    """What one follower of a chat is sent, in order; a relay Subscriber.

    `deliver` and `missed` (the relay's calls) and `put` (the follower's own items) return at
    once; the follower's writer takes the items one at a time with `next`.
    """

    def __init__(self, *, chat_id: int, max_queued: int) -> None:
        self.chat_id = chat_id
        self.max_queued = max_queued  # read once, not once a frame
        self.items: deque[Any] = deque()
        self._ready = asyncio.Event()

    def deliver(self, frame: RelayFrame) -> None:
        """A frame of this chat, from the relay (relay.Subscriber)."""
        if len(self.items) >= self.max_queued:
            self._fall_behind()
        self.put(frame)

    def missed(self) -> None:
        """The relay may have lost frames of this chat (relay.Subscriber)."""
        self.put(CATCH_UP)

    def put(self, item: Any) -> None:
        self.items.append(item)
        self._ready.set()

    async def next(self) -> Any:
        """The next item, once there is one."""
        while not self.items:
            self._ready.clear()
            await self._ready.wait()
        return self.items.popleft()

    def _fall_behind(self) -> None:
        """The follower reads slower than its turns stream: drop what the log can give back."""
        kept = [f for f in self.items if not (isinstance(f, RelayFrame) and f.kind in DROPPABLE)]
        if CATCH_UP not in kept:  # once per episode: a slow follower must not flood the log
            logger.warning(
                "A follower of chat %s fell %d frames behind; it catches up from the event log",
                self.chat_id,
                len(self.items) - len(kept),
            )
            kept.append(CATCH_UP)
        self.items = deque(kept)


class Placement(Enum):
    NEXT = "next"  # the events after the cursor: send the frame as it is
    SEEN = "seen"  # the follower has these events already
    GAP = "gap"  # events between the cursor and the frame were lost: read them from the log


def place_events(frame: RelayFrame, cursor: int) -> Placement:
    """Where a `turn.events` frame falls against the last seq sent of its turn."""
    if frame.last_seq <= cursor:
        return Placement.SEEN
    if frame.first_seq == cursor + 1:
        return Placement.NEXT
    return Placement.GAP


ReadLog = Callable[[int, int, int], Awaitable[list[EventView]]]  # turn id, after seq, limit


async def log_chunks(read: ReadLog, turn_id: int, after: int) -> AsyncIterator[list[EventView]]:
    """The turn's logged events after seq `after`, in order, REPLAY_CHUNK at a time."""
    while True:
        events = await read(turn_id, after, REPLAY_CHUNK)
        if not events:
            return
        yield events
        if len(events) < REPLAY_CHUNK:
            return
        after = events[-1]["seq"]
