"""Chat frames from the process that runs a turn to every page open on the chat, in any process.

This is the site's hot path (issue 13): every agent event reaches its pages through here, so
it does as little per frame as it can.

- A frame is JSON text, encoded once by its publisher (`protocol.encode`) whatever the number of
  pages; pages forward the text as it is.
- Pages in the publishing process get the frame straight from memory: no channel layer, no copy.
- With Redis, a frame goes only to the other processes that have a page of its chat open. Each
  process subscribes to one pub/sub channel of its own (its inbox) and lists itself, in Redis,
  as a listener of each chat its pages show. Every tick the publisher asks which other
  processes listen to the tick's chats (one script, `LISTENERS`), then PUBLISHes each frame to
  their inboxes (one script of PUBLISHes, `PUBLISH_ALL`): two round trips per tick, and none of
  a frame's bytes travel when no other process shows its chat, the usual case (a page and the
  run it asked for share a process).

Nothing is dropped silently. The event log is written before anything is published, and a
process lists itself before its page reads the log, so a frame either reaches the page or was
in the log the page read. A page that may have missed a frame (its socket fell behind, this
process's inbox or listing lapsed) is told, through `Subscriber.missed`, and catches up from the
log (`ChatConsumer`).

A Redis that stops answering holds up nothing here: pages in this process get their frames at
once and one task sends them on to Redis. Frames Redis did not take (it timed out or refused, or
too many waited) are dropped for the other processes, and once Redis answers again their pages of
those chats are told to catch up. A page's join waits at most JOIN_TIMEOUT; a listing that did
not happen is made again, and the process's pages told to catch up, when Redis answers.

The channel layer still carries what is rare and must reach one run or one user wherever it
lives: stop requests and logouts (`protocol.publish`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

from chats.live.per_loop import PerLoop
from chats.log_context import shared_task

logger = logging.getLogger(__name__)

RECONNECT_DELAY = 0.5  # seconds between attempts to re-subscribe after Redis went away
JOIN_TIMEOUT = 5.0  # seconds a page's join waits for Redis to list its process
PUBLISH_TIMEOUT = 5.0  # seconds Redis has to take one tick's frames, or one pass of listings
MAX_WAITING_FRAMES = 10_000  # frames waiting for Redis; past that, their chats catch up instead
# A process's listing of a chat lasts LISTEN_LEASE seconds, renewed every LISTEN_RENEW: the
# listings of a process that died lapse on their own.
LISTEN_LEASE = 60
LISTEN_RENEW = 20.0
MISSED = "missed"  # the kind of a message that tells other processes' pages to catch up

# The scripts use Redis's clock (TIME), so the processes' clocks need not agree. A chat's
# listeners are a sorted set: process origin -> when its listing lapses.
#
# LISTENERS: ARGV[1] the asking process, ARGV[2] the sets' prefix, ARGV[3] the chat ids, space
# separated. Returns [chat id, origin, ...] of the other processes listed. The script builds the
# key names itself: one argument rather than one per chat, since redis-py packs each argument in
# Python (a tick of 200 chats cost 200 µs of CPU as keys, 100 as one string, of which any
# command's round trip is 75). So the relay does not run on Redis Cluster, whose scripts must
# name their keys.
LISTENERS = """
local now = tonumber(redis.call('TIME')[1])
local found = {}
for chat in string.gmatch(ARGV[3], '%d+') do
  for _, origin in ipairs(redis.call('ZRANGE', ARGV[2] .. chat, now, '+inf', 'BYSCORE')) do
    if origin ~= ARGV[1] then
      found[#found + 1] = tonumber(chat)
      found[#found + 1] = origin
    end
  end
end
return found
"""
# LIST: ARGV[1] the process, ARGV[2] the lease, ARGV[3] the sets' prefix, ARGV[4] the chats to
# list the process for and ARGV[5] those to unlist it from, space separated. Drops lapsed
# listings, and returns the chats the process was not listed for already.
LIST = """
local now = tonumber(redis.call('TIME')[1])
local lease = tonumber(ARGV[2])
local new = {}
for chat in string.gmatch(ARGV[4], '%d+') do
  local key = ARGV[3] .. chat
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. now)
  if redis.call('ZADD', key, now + lease, ARGV[1]) == 1 then new[#new + 1] = tonumber(chat) end
  redis.call('EXPIRE', key, 2 * lease)
end
for chat in string.gmatch(ARGV[5], '%d+') do
  redis.call('ZREM', ARGV[3] .. chat, ARGV[1])
end
return new
"""
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
    """Many processes: pages here get frames from memory, other processes' through Redis.

    A message is `chat_id|kind|turn_id|first_seq|last_seq|text`, PUBLISHed to the inbox of each
    other process listed as a listener of the chat. Frames of one chat come from the one process
    running its turn, in order, through one task and one connection, so Redis keeps their
    order. A message of kind MISSED tells the chat's pages in that process to catch up.

    One task (`_list_forever`) is the process's only writer of its listings, so they change in
    the order pages come and go: each pass lists the chats that gained a first page here and
    unlists those that lost their last, all in one script call, and every LISTEN_RENEW it
    renews them all. A join waits for a pass that began after it; a leave does not wait. A
    listing found lapsed (Redis lost it) tells its pages to catch up. A listing may outlive its
    last page by up to LISTEN_LEASE (a process that died, an unlisting Redis did not take):
    frames sent to it are dropped there, which costs only their bytes.
    """

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__()
        import redis.asyncio as redis
        from redis.driver_info import DriverInfo

        # One DriverInfo for every connection: without it, each new connection looks redis-py's
        # version up in the installed packages' metadata (~0.2 ms).
        self.redis = redis.Redis.from_url(url, driver_info=DriverInfo())
        self.origin = uuid.uuid4().hex[:12] + f"-{os.getpid()}"
        self._inbox_prefix = f"{prefix}process.".encode()
        self._inbox = self._inbox_prefix + self.origin.encode()
        self._listeners_prefix = f"{prefix}listeners."
        self._pubsub = self.redis.pubsub()
        self._listeners = self.redis.register_script(LISTENERS)
        self._list = self.redis.register_script(LIST)
        self._publish_all = self.redis.register_script(PUBLISH_ALL)
        self._reader: asyncio.Task | None = None
        self._inbox_open: asyncio.Future | None = None  # done once Redis confirms the inbox
        self._recovering = False  # the reader is reconnecting: it lists every chat after
        self._epoch = 0  # counts reconnections: a pass begun before one knows nothing after it
        self._listed: set[int] = set()  # chats this process is listed for
        self._unlisting: set[int] = set()  # chats the pass under way unlists
        self._maybe_listed: set[int] = set()  # chats a failed pass may have left listed
        self._catch_up_once_listed: set[int] = set()  # chats whose join gave up waiting
        self._lister: asyncio.Task | None = None
        self._listing_wanted = asyncio.Event()
        self._next_pass: asyncio.Future | None = None  # True once the next pass has listed
        self._waiting: list[tuple[int, RelayFrame]] = []  # for Redis, in publishing order
        self._unsent: set[int] = set()  # chats whose frames other processes may have missed
        self._frames_waiting = asyncio.Event()
        self._publisher: asyncio.Task | None = None
        self._closing = False

    def listeners_key(self, chat_id: int) -> str:
        return f"{self._listeners_prefix}{chat_id}"

    # --- Listing: which processes get a chat's frames ---------------------------------------

    async def join(self, chat_id: int, subscriber: Subscriber) -> None:
        """Deliver the chat's frames to `subscriber` from now on, from any process: once this
        returns, this process is listed, or, if Redis did not list it within JOIN_TIMEOUT,
        will be, and the chat's pages here are then told to catch up."""
        await super().join(chat_id, subscriber)
        if (chat_id in self._listed and chat_id not in self._unlisting) or self._recovering:
            return  # listed already; or a recovery lists every chat with pages before it ends
        try:
            async with asyncio.timeout(JOIN_TIMEOUT):
                listed = await asyncio.shield(self._listing_pass())
        except TimeoutError:
            listed = False
        if listed or self._closing:
            return
        logger.warning("Redis did not list this process for chat %s in time", chat_id)
        inbox_open = self._inbox_open is not None and self._inbox_open.done()
        if self._reader is None or self._reader.done() or not inbox_open:
            self._start_reader(recover=True)  # lists every chat, then tells every page
        else:  # the inbox works and the lister is slow: no need to drop the subscription
            self._catch_up_once_listed.add(chat_id)
            self._listing_pass()

    async def leave(self, chat_id: int, subscriber: Subscriber) -> None:
        await super().leave(chat_id, subscriber)
        if chat_id not in self.subscribers:
            self._listing_pass()  # unlisted in the background: a page closing does not wait

    def _listing_pass(self) -> asyncio.Future:
        """Ask for a pass of the lister; its future says whether the pass listed what it was
        asked to (False: it failed, or the relay is closing)."""
        loop = asyncio.get_running_loop()
        if self._closing:
            refused = loop.create_future()
            refused.set_result(False)
            return refused
        if self._lister is None or self._lister.done():
            self._lister = shared_task(self._list_forever(), name="relay-lister")
        if self._next_pass is None:
            self._next_pass = loop.create_future()
        self._listing_wanted.set()
        return self._next_pass

    async def _list_forever(self) -> None:
        loop = asyncio.get_running_loop()
        renew_at = loop.time() + LISTEN_RENEW
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(renew_at - loop.time()):
                    await self._listing_wanted.wait()
            self._listing_wanted.clear()
            renewing = loop.time() >= renew_at
            if renewing:
                renew_at = loop.time() + LISTEN_RENEW
            this_pass, self._next_pass = self._next_pass, None
            try:
                lapsed = await self._list_pass(renew=renewing)
            except BaseException as error:
                if this_pass is not None and not this_pass.done():
                    this_pass.set_result(False)
                if not isinstance(error, Exception):
                    raise  # cancelled: the relay is closing
                logger.warning("Listing this process's chats in Redis failed", exc_info=True)
                renew_at = loop.time() + RECONNECT_DELAY  # then renew every listing
                continue
            if this_pass is not None:
                this_pass.set_result(True)
            if lapsed:  # Redis lost them (restarted, evicted): frames may have gone elsewhere
                logger.warning("Redis had lost %d of this process's listings", len(lapsed))
            for chat_id in (*lapsed, *(self._catch_up_once_listed & self._listed)):
                self._tell_missed(chat_id)
            self._catch_up_once_listed &= set(self.subscribers) - self._listed

    async def _list_pass(self, *, renew: bool) -> list[int]:
        """List this process for the chats with pages here, unlist it from the others; return
        the chats whose listing Redis had lost."""
        epoch, wanted, listed = self._epoch, set(self.subscribers), set(self._listed)
        to_list = wanted if renew else wanted - listed
        to_unlist = (listed | self._maybe_listed) - wanted
        if not to_list and not to_unlist:
            return []
        self._unlisting = to_unlist
        try:
            async with asyncio.timeout(PUBLISH_TIMEOUT):
                await self._open_inbox()  # frames sent once the process is listed must arrive
                new = await self._list_in_redis(to_list, to_unlist)
        except BaseException:
            # Redis may or may not have unlisted them: not listed as far as a join can tell
            # (it waits for a pass that lists it again), and unlisted again by the next pass.
            self._listed -= to_unlist
            self._maybe_listed |= to_unlist | (to_list - self._listed)
            raise
        finally:
            self._unlisting = set()
        self._maybe_listed -= to_unlist | to_list
        if epoch != self._epoch:
            return []  # the reader reconnected meanwhile: it lists everything again
        self._listed = (self._listed - to_unlist) | to_list
        return [chat_id for chat_id in new if chat_id in listed and chat_id in self.subscribers]

    async def _list_in_redis(self, to_list: set[int], to_unlist: set[int]) -> list[int]:
        args = [self.origin, LISTEN_LEASE, self._listeners_prefix]
        args += (" ".join(map(str, to_list)), " ".join(map(str, to_unlist)))
        return await self._list(args=args)

    # --- The inbox: frames from other processes ---------------------------------------------

    async def _open_inbox(self) -> None:
        if self._reader is None or self._reader.done():
            self._start_reader()
        await asyncio.shield(self._inbox_open)

    def _start_reader(self, *, recover: bool = False) -> None:
        if self._closing:
            return
        if recover and self._recovering and self._reader is not None and not self._reader.done():
            return  # a recovery is under way already
        if self._reader is not None:
            self._reader.cancel()
        if self._inbox_open is None or self._inbox_open.done():
            self._inbox_open = asyncio.get_running_loop().create_future()
        if recover:
            self._recovering = True
        self._reader = shared_task(self._read_forever(recover), name="relay-reader")

    async def _read_forever(self, recover: bool) -> None:
        if recover:
            await self._reconnect()
        else:
            try:
                await self._pubsub.subscribe(self._inbox)
            except Exception:
                logger.warning("Subscribing the relay's inbox failed", exc_info=True)
                await self._reconnect()
        while True:
            try:
                message = await self._pubsub.get_message(timeout=LISTEN_RENEW)
                if message is None:  # quiet: a connection can die without a word (a failover)
                    await self._pubsub.ping()
                    message = await self._pubsub.get_message(timeout=JOIN_TIMEOUT)
                    if message is None:
                        raise TimeoutError("Redis did not answer PING")
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("The relay's Redis subscription broke", exc_info=True)
                await self._reconnect()
                continue
            self._receive_safely(message)

    def _receive_safely(self, message: dict) -> None:
        try:
            self._receive(message)
        except Exception:  # a message not of our making must not stop the reader
            logger.exception("The relay could not read a message from Redis")

    def _receive(self, message: dict) -> None:
        kind = message["type"]
        if kind == b"subscribe" or kind == "subscribe":
            if self._inbox_open is not None and not self._inbox_open.done():
                self._inbox_open.set_result(None)
            return
        if kind not in (b"message", "message"):
            return
        chat, frame_kind, turn_id, first, last, text = message["data"].decode().split("|", 5)
        chat_id = int(chat)
        if frame_kind == MISSED:
            self._tell_missed(chat_id)
            return
        frame = RelayFrame(frame_kind, int(turn_id), text, int(first), int(last))
        self._deliver_here([(chat_id, frame)])

    def _tell_missed(self, chat_id: int) -> None:
        for subscriber in tuple(self.subscribers.get(chat_id, ())):
            try:
                subscriber.missed()
            except Exception:  # one broken page must not cost the others their catch-up
                logger.exception("Telling a page of chat %s to catch up failed", chat_id)

    async def _reconnect(self) -> None:
        """Reconnect until Redis answers, open the inbox, list every chat with pages here, then
        tell every page to catch up: frames sent meanwhile went nowhere."""
        self._recovering = True
        self._epoch += 1
        self._maybe_listed |= self._listed  # listed again below, or unlisted if their pages left
        self._listed.clear()
        while True:
            await asyncio.sleep(RECONNECT_DELAY)
            try:
                await self._pubsub.aclose()
                self._pubsub = self.redis.pubsub()
                await self._pubsub.subscribe(self._inbox)
                # PING is answered after the subscription: from then on nothing is missed.
                await self._pubsub.ping()
                while True:  # frames that arrive before the PONG are delivered as usual
                    reply = await self._pubsub.get_message(timeout=JOIN_TIMEOUT)
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
        if self._inbox_open is not None and not self._inbox_open.done():
            self._inbox_open.set_result(None)
        # Pages may join while the lister works: until none is left out.
        while not set(self.subscribers) <= self._listed:
            if not await asyncio.shield(self._listing_pass()):
                await asyncio.sleep(RECONNECT_DELAY)
        self._recovering = False
        for chat_id in list(self.subscribers):
            self._tell_missed(chat_id)

    # --- Publishing -------------------------------------------------------------------------

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
            self._publisher = shared_task(self._publish_forever(), name="relay-publisher")
        self._frames_waiting.set()

    async def _publish_forever(self) -> None:
        """Send what is waiting, one tick at a time; on a failure, drop it, remember its chats,
        and tell their pages elsewhere to catch up with the next tick Redis takes."""
        while not (self._closing and not self._waiting):
            await self._frames_waiting.wait()
            self._frames_waiting.clear()
            while self._waiting or self._unsent:
                frames, self._waiting = self._waiting, []
                unsent = set(self._unsent)
                try:
                    async with asyncio.timeout(PUBLISH_TIMEOUT):
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
        """Ask which other processes listen to the tick's chats, then send them their frames.

        Asking first is safe because the frames were logged before it: a process listed after
        the answer reads the log after it too.
        """
        chat_ids = " ".join(map(str, {*unsent, *(chat_id for chat_id, _ in frames)}))
        found = await self._listeners(args=[self.origin, self._listeners_prefix, chat_ids])
        if not found:
            return  # no other process shows these chats: nothing to send
        inboxes: dict[int, list[bytes]] = {}
        for i in range(0, len(found), 2):
            inboxes.setdefault(found[i], []).append(self._inbox_prefix + found[i + 1])
        args: list[bytes] = []
        for chat_id in unsent:
            for inbox in inboxes.get(chat_id, ()):
                args += (inbox, f"{chat_id}|{MISSED}|0|0|0|".encode())
        for chat_id, f in frames:
            targets = inboxes.get(chat_id)
            if targets:
                text = f"{chat_id}|{f.kind}|{f.turn_id}|{f.first_seq}|{f.last_seq}|{f.text}"
                message = text.encode()  # once, whatever the number of processes
                for inbox in targets:
                    args += (inbox, message)
        await self._publish_all(args=args)

    async def close(self) -> None:
        self._closing = True
        if self._publisher is not None:  # what is waiting gets one try, PUBLISH_TIMEOUT at most
            self._frames_waiting.set()
            await asyncio.wait([self._publisher], timeout=PUBLISH_TIMEOUT)
            self._publisher.cancel()
            await asyncio.gather(self._publisher, return_exceptions=True)
        if self._next_pass is not None and not self._next_pass.done():
            self._next_pass.set_result(False)  # a page joining now reads the log as it is
        self._next_pass = None
        tasks = [t for t in (self._reader, self._lister) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # And what a cancelled or failed pass may have left listed (it put them in _maybe_listed),
        # or was about to list.
        listed = self._listed | self._maybe_listed | set(self.subscribers)
        self._listed = set()
        if listed:  # other processes stop sending this one frames now, not at LISTEN_LEASE
            try:
                async with asyncio.timeout(PUBLISH_TIMEOUT):
                    await self._list_in_redis(set(), listed)
            except Exception:
                logger.warning("Unlisting %d chats at shutdown failed", len(listed), exc_info=True)
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
