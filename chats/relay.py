"""Chat frames from the process that runs a turn to every page open on the chat, in any process.

This is the site's hot path (issue 13): every agent event reaches its pages through here, so
it does as little per frame as it can.

- A frame is JSON text, encoded once by its publisher (`protocol.encode`) whatever the number of
  pages; pages forward the text as it is.
- Pages in the publishing process get the frame straight from memory: no channel layer, no copy.
- With Redis, each frame is also PUBLISHed once to the chat's pub/sub channel, and every tick's
  frames go in one command (a Lua script of PUBLISHes, `PUBLISH_ALL`): one round trip per tick,
  not one per message (channels_redis's core layer reads one message per round trip). Each
  process subscribes to the chats its pages show.

Nothing is dropped silently. The event log is written before anything is published, so a page
that may have missed a frame (its socket fell behind, or this process's subscription broke) is
told, through `Subscriber.missed`, and catches up from the log (`ChatConsumer`).

A Redis that stops answering holds up nothing here: pages in this process get their frames at
once and one task sends them on to Redis. Frames Redis did not take (it timed out or refused, or
too many waited) are dropped for the other processes, and once Redis answers again their pages of
those chats are told to catch up. A page's join waits at most SUBSCRIBE_TIMEOUT; a subscription
that did not happen is made again, and its pages told to catch up, when Redis answers.

The channel layer still carries what is rare and must reach one run or one user wherever it
lives: stop requests and logouts (`protocol.publish`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from .per_loop import PerLoop

logger = logging.getLogger(__name__)

RECONNECT_DELAY = 0.5  # seconds between attempts to re-subscribe after Redis went away
SUBSCRIBE_TIMEOUT = 5.0
PUBLISH_TIMEOUT = 5.0  # seconds Redis has to take one tick's frames
MAX_WAITING_FRAMES = 10_000  # frames waiting for Redis; past that, their chats catch up instead
MISSED = "missed"  # the kind of a message that tells other processes' pages to catch up
# One command publishes a tick's frames, however many: as a pipeline of PUBLISHes, packing each
# command and parsing each reply in redis-py was a tenth of a worker's time under 200 chats
# (docs/PERFORMANCE.md, "Wave 3, sixth session"). ARGV holds channel, message, channel, ...
# The site's Redis runs scripts already: channels_redis's group sends are Lua scripts too.
PUBLISH_ALL = "for i = 1, #ARGV, 2 do redis.call('PUBLISH', ARGV[i], ARGV[i + 1]) end"


@dataclass(frozen=True, slots=True)
class RelayFrame:
    """One server → page frame, encoded; the fields beside the text let a page check its order."""

    kind: str  # the frame's "type"
    turn_id: int
    text: str  # the frame as the page receives it
    first_seq: int = 0  # turn.events: the seqs the frame carries, first and last
    last_seq: int = 0


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
        self._deliver_here(frames)

    def _deliver_here(self, frames: list[tuple[int, RelayFrame]]) -> None:
        for chat_id, frame in frames:
            for subscriber in tuple(self.subscribers.get(chat_id, ())):
                try:
                    subscriber.deliver(frame)
                except Exception:  # one broken page must not cost the others their frames
                    logger.exception("Delivering a frame of chat %s failed", chat_id)

    async def close(self) -> None:
        self.subscribers.clear()


class RedisRelay(LocalRelay):
    """Many processes: pages here get frames from memory, other processes through Redis pub/sub.

    A message is `origin|kind|turn_id|first_seq|last_seq|text`; a process skips its own (it
    delivered them already). Frames of one chat come from the one process running its turn, in
    order, through one task and one connection, so Redis keeps their order. A message of kind
    MISSED tells the chat's pages in other processes to catch up from the log.
    """

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__()
        import redis.asyncio as redis

        self.redis = redis.Redis.from_url(url)
        self.prefix = prefix
        self.origin = uuid.uuid4().hex[:12] + f"-{os.getpid()}"
        self._pubsub = self.redis.pubsub()
        self._publish_all = self.redis.register_script(PUBLISH_ALL)
        self._reader: asyncio.Task | None = None
        self._confirmed: dict[bytes, asyncio.Future] = {}
        self._waiting: list[tuple[int, RelayFrame]] = []  # for Redis, in publishing order
        self._unsent: set[int] = set()  # chats whose frames other processes may have missed
        self._frames_waiting = asyncio.Event()
        self._publisher: asyncio.Task | None = None
        self._closing = False
        self._home = f"{prefix}process.{self.origin}".encode()  # keeps the reader subscribed
        self._own = f"{self.origin}|".encode()  # how this process's frames begin

    def channel(self, chat_id: int) -> bytes:
        return f"{self.prefix}chat.{chat_id}".encode()

    async def join(self, chat_id: int, subscriber: Subscriber) -> None:
        first = chat_id not in self.subscribers
        await super().join(chat_id, subscriber)
        if first:
            await self._subscribe(self.channel(chat_id))

    async def leave(self, chat_id: int, subscriber: Subscriber) -> None:
        await super().leave(chat_id, subscriber)
        if chat_id not in self.subscribers:
            try:
                await self._pubsub.unsubscribe(self.channel(chat_id))
            except Exception:  # the reader re-subscribes only to chats with pages
                logger.warning("Unsubscribing from chat %s failed", chat_id, exc_info=True)

    async def _subscribe(self, channel: bytes) -> None:
        """Subscribe and wait until Redis says so: a page reads the log only after that.

        At most SUBSCRIBE_TIMEOUT: then the reader starts over, subscribing every chat with
        pages here once Redis answers and telling those pages to catch up from the log.
        """
        confirmed = self._confirmed.setdefault(channel, asyncio.get_running_loop().create_future())
        try:
            async with asyncio.timeout(SUBSCRIBE_TIMEOUT):
                await self._ensure_reader()
                await self._pubsub.subscribe(channel)
                await asyncio.shield(confirmed)
        except TimeoutError:
            logger.warning("Redis did not subscribe this process to %s in time", channel)
            self._start_reader(recover=True)
        finally:
            self._confirmed.pop(channel, None)

    async def _ensure_reader(self) -> None:
        if self._reader is None or self._reader.done():
            await self._pubsub.subscribe(self._home)
            self._start_reader()

    def _start_reader(self, *, recover: bool = False) -> None:
        if self._reader is not None:
            self._reader.cancel()
        self._reader = asyncio.create_task(self._read_forever(recover), name="relay-reader")

    async def publish(self, frames: list[tuple[int, RelayFrame]]) -> None:
        """Deliver here at once; the publisher task sends the frames on to Redis, in order."""
        self._deliver_here(frames)
        if len(self._waiting) + len(frames) > MAX_WAITING_FRAMES:  # Redis is not keeping up
            if not self._unsent:
                logger.warning("Redis is not taking frames; other processes' pages will catch up")
            self._unsent.update(chat_id for chat_id, _ in (*self._waiting, *frames))
            self._waiting = []
        else:
            self._waiting.extend(frames)
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.create_task(self._publish_forever(), name="relay-publisher")
        self._frames_waiting.set()

    async def _publish_forever(self) -> None:
        """Send what is waiting in one command at a time; on a failure, drop it, remember its
        chats, and tell their pages to catch up with the next command Redis takes."""
        while not (self._closing and not self._waiting):
            await self._frames_waiting.wait()
            self._frames_waiting.clear()
            while self._waiting or self._unsent:
                frames, self._waiting = self._waiting, []
                unsent = set(self._unsent)
                try:
                    await self._send(frames, unsent)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    if not self._unsent:
                        logger.warning("Redis did not take frames; retrying", exc_info=True)
                    self._unsent.update(unsent, (chat_id for chat_id, _ in frames))
                    if self._closing:
                        return
                    await asyncio.sleep(RECONNECT_DELAY)
                    continue
                if unsent:
                    logger.info("Redis takes frames again: %d chats told to catch up", len(unsent))
                self._unsent -= unsent

    async def _send(self, frames: list[tuple[int, RelayFrame]], unsent: set[int]) -> None:
        head = self.origin
        args: list[bytes] = []
        for chat_id in unsent:
            args += (self.channel(chat_id), f"{head}|{MISSED}|0|0|0|".encode())
        for chat_id, f in frames:
            message = f"{head}|{f.kind}|{f.turn_id}|{f.first_seq}|{f.last_seq}|{f.text}"
            args += (self.channel(chat_id), message.encode())
        async with asyncio.timeout(PUBLISH_TIMEOUT):
            await self._publish_all(args=args)

    async def _read_forever(self, recover: bool = False) -> None:
        if recover:
            await self._resubscribe()
        while True:
            try:
                message = await self._pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("The relay's Redis subscription broke", exc_info=True)
                await self._resubscribe()
                continue
            if message is not None:
                self._receive(message)

    def _receive(self, message: dict) -> None:
        kind, channel = message["type"], message["channel"]
        if kind == b"subscribe" or kind == "subscribe":
            future = self._confirmed.get(channel)
            if future is not None and not future.done():
                future.set_result(None)
            return
        if kind not in (b"message", "message") or channel == self._home:
            return
        data = message["data"]
        if data.startswith(self._own):
            return  # Redis sends this process's frames back too: its pages have them already
        _, frame_kind, turn_id, first, last, text = data.decode().split("|", 5)
        chat_id = int(channel.decode().rsplit(".", 1)[1])
        if frame_kind == MISSED:
            for subscriber in tuple(self.subscribers.get(chat_id, ())):
                subscriber.missed()
            return
        frame = RelayFrame(frame_kind, int(turn_id), text, int(first), int(last))
        self._deliver_here([(chat_id, frame)])

    async def _resubscribe(self) -> None:
        """Reconnect until Redis answers, re-subscribe, then tell every page to catch up."""
        while True:
            await asyncio.sleep(RECONNECT_DELAY)
            try:
                await self._pubsub.aclose()
                self._pubsub = self.redis.pubsub()
                channels = [self._home, *(self.channel(c) for c in self.subscribers)]
                await self._pubsub.subscribe(*channels)
                # PING is answered after the subscriptions: from then on nothing is missed.
                await self._pubsub.ping()
                while True:  # frames that arrive before the PONG are delivered as usual
                    reply = await self._pubsub.get_message(timeout=SUBSCRIBE_TIMEOUT)
                    if reply is None:
                        raise TimeoutError("Redis did not answer PING")
                    if reply["type"] in (b"pong", "pong"):
                        break
                    self._receive(reply)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("Re-subscribing the relay to Redis failed; retrying", exc_info=True)
                continue
            break
        for members in list(self.subscribers.values()):
            for subscriber in tuple(members):
                subscriber.missed()

    async def close(self) -> None:
        if self._publisher is not None:  # what is waiting gets one try, PUBLISH_TIMEOUT at most
            self._closing = True
            self._frames_waiting.set()
            await asyncio.wait([self._publisher], timeout=PUBLISH_TIMEOUT)
            self._publisher.cancel()
            await asyncio.gather(self._publisher, return_exceptions=True)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await self._pubsub.aclose()
        await self.redis.aclose()
        await super().close()


def _new_relay() -> LocalRelay:  # a RedisRelay is a LocalRelay that also talks to Redis
    url = settings.REDIS_URL
    return RedisRelay(url, settings.RELAY_PREFIX) if url else LocalRelay()


get_relay = PerLoop(_new_relay)  # this event loop's relay


async def close_relay() -> None:
    """Close this event loop's relay, if it has one (tests, at the end of each)."""
    relay = get_relay.pop()
    if relay is not None:
        await relay.close()
