"""This process's inbox: the one pub/sub channel other processes send it frames on.

A message is `chat_id|kind|turn_id|first_seq|last_seq|text` (`message`); one of kind MISSED
(`missed_message`) tells the chat's pages here to catch up from the event log. The reader
delivers each frame to the chat's pages in this process. When the subscription breaks (a
killed connection, a failover, a PING left unanswered) it reconnects, lists every chat with
pages here again, then tells every page to catch up: frames sent meanwhile went nowhere.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import chats.live.relay.timing as timing
from chats.live.relay.listing import Listing
from chats.live.relay.local import LocalRelay, RelayFrame
from chats.log_context import shared_task

logger = logging.getLogger(__name__)

MISSED = "missed"  # the kind of a message that tells other processes' pages to catch up


def inbox_prefix(prefix: str) -> bytes:
    """The start of every process's inbox channel (RELAY_PREFIX, then `process.`)."""
    return f"{prefix}process.".encode()


def message(chat_id: int, frame: RelayFrame) -> bytes:
    """A frame as an inbox carries it."""
    f = frame
    return f"{chat_id}|{f.kind}|{f.turn_id}|{f.first_seq}|{f.last_seq}|{f.text}".encode()


def missed_message(chat_id: int) -> bytes:
    """What tells the chat's pages in the receiving process to catch up from the log."""
    return f"{chat_id}|{MISSED}|0|0|0|".encode()


class Inbox:
    """The reader of this process's inbox, and its recovery when the subscription breaks."""

    def __init__(
        self, relay: LocalRelay, origin: str, listing: Listing, redis: Any, prefix: str
    ) -> None:
        self._redis = redis
        self.channel = inbox_prefix(prefix) + origin.encode()
        self._subscribers = relay.subscribers  # the relay's pages, by chat
        self._listing = listing
        self._deliver = relay.deliver_here
        self._tell_missed = relay.tell_missed
        self.pubsub = redis.pubsub()
        self.reader: asyncio.Task | None = None
        self._open: asyncio.Future | None = None  # done once Redis confirms the subscription
        self.recovering = False  # the reader is reconnecting: it lists every chat after
        self.closing = False

    @property
    def is_open(self) -> bool:
        return self._open is not None and self._open.done()

    @property
    def reading(self) -> bool:
        return self.reader is not None and not self.reader.done()

    async def open(self) -> None:
        """Return once Redis has confirmed the subscription (starting the reader if need be)."""
        if not self.reading:
            self.start()
        await asyncio.shield(self._open)

    def start(self, *, recover: bool = False) -> None:
        """Start the reader; `recover`: reconnect first, relist, and tell every page."""
        if self.closing:
            return
        if recover and self.recovering and self.reading:
            return  # a recovery is under way already
        if self.reader is not None:
            self.reader.cancel()
        if self._open is None or self._open.done():
            self._open = asyncio.get_running_loop().create_future()
        if recover:
            self.recovering = True
        self.reader = shared_task(self._read_forever(recover), name="relay-reader")

    async def _read_forever(self, recover: bool) -> None:
        if recover:
            await self._reconnect()
        else:
            try:
                await self.pubsub.subscribe(self.channel)
            except Exception:
                logger.warning("Subscribing the relay's inbox failed", exc_info=True)
                await self._reconnect()
        while True:
            try:
                received = await self.pubsub.get_message(timeout=timing.LISTEN_RENEW)
                if received is None:  # quiet: a connection can die without a word (a failover)
                    await self.pubsub.ping()
                    received = await self.pubsub.get_message(timeout=timing.JOIN_TIMEOUT)
                    if received is None:
                        raise TimeoutError("Redis did not answer PING")
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("The relay's Redis subscription broke", exc_info=True)
                await self._reconnect()
                continue
            self._receive_safely(received)

    def _receive_safely(self, received: dict) -> None:
        try:
            self._receive(received)
        except Exception:  # a message not of our making must not stop the reader
            logger.exception("The relay could not read a message from Redis")

    def _receive(self, received: dict) -> None:
        kind = received["type"]
        if kind == b"subscribe" or kind == "subscribe":
            if self._open is not None and not self._open.done():
                self._open.set_result(None)
            return
        if kind not in (b"message", "message"):
            return
        chat, frame_kind, turn_id, first, last, text = received["data"].decode().split("|", 5)
        chat_id = int(chat)
        if frame_kind == MISSED:
            self._tell_missed(chat_id)
            return
        frame = RelayFrame(frame_kind, int(turn_id), text, int(first), int(last))
        self._deliver([(chat_id, frame)])

    async def _reconnect(self) -> None:
        """Reconnect until Redis answers, open the inbox, list every chat with pages here, then
        tell every page to catch up: frames sent meanwhile went nowhere."""
        self.recovering = True
        self._listing.forget()
        while True:
            await asyncio.sleep(timing.RECONNECT_DELAY)
            try:
                await self.pubsub.aclose()
                self.pubsub = self._redis.pubsub()
                await self.pubsub.subscribe(self.channel)
                # PING is answered after the subscription: from then on nothing is missed.
                await self.pubsub.ping()
                while True:  # frames that arrive before the PONG are delivered as usual
                    reply = await self.pubsub.get_message(timeout=timing.JOIN_TIMEOUT)
                    if reply is None:
                        raise TimeoutError("Redis did not answer PING")
                    if reply["type"] in (b"pong", "pong"):
                        break
                    self._receive_safely(reply)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("Reconnecting the relay to Redis failed; retrying", exc_info=True)
                continue
            break
        if self._open is not None and not self._open.done():
            self._open.set_result(None)
        # Pages may join while the lister works: until none is left out.
        while not set(self._subscribers) <= self._listing.listed:
            if not await asyncio.shield(self._listing.request_pass()):
                await asyncio.sleep(timing.RECONNECT_DELAY)
        self.recovering = False
        for chat_id in list(self._subscribers):
            self._tell_missed(chat_id)

    async def stop(self) -> None:
        self.closing = True
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)

    async def close(self) -> None:
        await self.pubsub.aclose()
