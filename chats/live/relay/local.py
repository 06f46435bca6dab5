"""One process: a chat's frames go from their publisher to its pages in memory."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RelayFrame:
    """One server → page frame, encoded; the fields beside the text let a page check its order."""

    kind: str  # the frame's "type"
    turn_id: int
    text: str  # the frame as the page receives it
    first_seq: int = 0  # turn.events: the seqs the frame carries, first and last
    last_seq: int = 0
    # When its oldest agent event was received (time.time()), for the event delay metric; 0
    # when unknown, as for frames from other processes (their Redis messages do not carry it).
    received_at: float = 0.0


class Subscriber(Protocol):
    """A page's socket, as the relay sees it. Both calls must return at once."""

    def deliver(self, frame: RelayFrame) -> None: ...

    def missed(self) -> None:
        """Frames may have been lost on the way: catch up from the event log."""


class LocalRelay:
    """One process: frames go from publisher to pages in memory."""

    def __init__(self) -> None:
        self.subscribers: dict[int, set[Subscriber]] = {}

    async def join(self, chat_id: int, subscriber: Subscriber) -> None:
        """Deliver the chat's frames to `subscriber` from now on (publishes after this returns)."""
        self.subscribers.setdefault(chat_id, set()).add(subscriber)

    async def leave(self, chat_id: int, subscriber: Subscriber) -> None:
        members = self.subscribers.get(chat_id)
        if members is not None:
            members.discard(subscriber)
            if not members:
                del self.subscribers[chat_id]

    async def publish(self, frames: list[tuple[int, RelayFrame]]) -> None:
        """Send each (chat id, frame) to the chat's pages, in order."""
        self.deliver_here(frames)

    def deliver_here(self, frames: list[tuple[int, RelayFrame]]) -> None:
        """Hand each frame to the chat's pages in this process."""
        for chat_id, frame in frames:
            for subscriber in tuple(self.subscribers.get(chat_id, ())):
                try:
                    subscriber.deliver(frame)
                except Exception:  # one broken page must not cost the others their frames
                    logger.exception("Delivering a frame of chat %s failed", chat_id)

    def tell_missed(self, chat_id: int) -> None:
        """Tell the chat's pages in this process to catch up from the event log."""
        for subscriber in tuple(self.subscribers.get(chat_id, ())):
            try:
                subscriber.missed()
            except Exception:  # one broken page must not cost the others their catch-up
                logger.exception("Telling a page of chat %s to catch up failed", chat_id)

    async def close(self) -> None:
        self.subscribers.clear()
