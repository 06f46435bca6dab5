"""Sending this process's frames to the other processes that show their chats.

Every tick the publisher asks Redis which other processes are listed for the tick's chats (one
script, LISTENERS), then PUBLISHes each frame to their inboxes (one script of PUBLISHes,
PUBLISH_ALL): two round trips per tick, and none of a frame's bytes travel when no other process
shows its chat, the usual case (a page and the run it asked for share a process). Asking first
is safe because the frames were logged before it: a process listed after the answer reads the
log after it too.

One task sends, so a chat's frames keep their order and a Redis that stops answering holds up
nothing else: frames Redis did not take within PUBLISH_TIMEOUT (or too many waiting) are
dropped, and once Redis takes a tick again the pages of those chats in other processes are told
to catch up (a MISSED message).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import chats.live.relay.timing as timing
from chats.live.relay.inbox import inbox_prefix, message, missed_message
from chats.live.relay.listing import listeners_prefix
from chats.live.relay.local import RelayFrame
from chats.log_context import shared_task

logger = logging.getLogger(__name__)

MAX_WAITING_FRAMES = 10_000  # frames waiting for Redis; past that, their chats catch up instead

# LISTENERS: ARGV[1] the asking process, ARGV[2] the sets' prefix, ARGV[3] the chat ids, space
# separated. Returns [chat id, origin, ...] of the other processes listed. The script uses
# Redis's clock (TIME) and builds the key names itself: one argument rather than one per chat,
# since redis-py packs each argument in Python (a tick of 200 chats cost 200 µs of CPU as keys,
# 100 as one string, of which any command's round trip is 75). So the relay does not run on
# Redis Cluster, whose scripts must name their keys.
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
# One command publishes a tick's frames, however many: as a pipeline of PUBLISHes, packing each
# command and parsing each reply in redis-py was a tenth of a worker's time under 200 chats
# (docs/PERFORMANCE.md, "One Lua script a tick to Redis"). ARGV holds channel, message, channel,
# ... The site's Redis runs scripts already: channels_redis's group sends are Lua scripts too.
PUBLISH_ALL = "for i = 1, #ARGV, 2 do redis.call('PUBLISH', ARGV[i], ARGV[i + 1]) end"


class Publisher:
    """The one task that sends this process's frames on to Redis, a tick at a time."""

    def __init__(self, redis: Any, origin: str, prefix: str) -> None:
        self.origin = origin
        self._inbox_prefix = inbox_prefix(prefix)
        self.listeners_prefix = listeners_prefix(prefix)
        self.listeners = redis.register_script(LISTENERS)
        self.publish_all = redis.register_script(PUBLISH_ALL)
        self._waiting: list[tuple[int, RelayFrame]] = []  # for Redis, in publishing order
        self.unsent: set[int] = set()  # chats whose frames other processes may have missed
        self._frames_waiting = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._closing = False

    def send(self, frames: list[tuple[int, RelayFrame]]) -> None:
        """Queue the frames for the other processes; returns at once."""
        if len(self._waiting) + len(frames) > MAX_WAITING_FRAMES:  # Redis is not keeping up
            if not self.unsent:
                logger.warning("Redis is not taking frames; other processes' pages will catch up")
            self.unsent.update(chat_id for chat_id, _ in (*self._waiting, *frames))
            self._waiting = []
        else:
            self._waiting.extend(frames)
        if self._task is None or self._task.done():
            self._task = shared_task(self._publish_forever(), name="relay-publisher")
        self._frames_waiting.set()

    async def _publish_forever(self) -> None:
        """Send what is waiting, one tick at a time; on a failure, drop it, remember its chats,
        and tell their pages elsewhere to catch up with the next tick Redis takes."""
        while not (self._closing and not self._waiting):
            await self._frames_waiting.wait()
            self._frames_waiting.clear()
            while self._waiting or self.unsent:
                frames, self._waiting = self._waiting, []
                unsent = set(self.unsent)
                try:
                    async with asyncio.timeout(timing.PUBLISH_TIMEOUT):
                        await self._send(frames, unsent)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    if not self.unsent:
                        logger.warning("Redis did not take frames; retrying", exc_info=True)
                    self.unsent.update(unsent, (chat_id for chat_id, _ in frames))
                    if self._closing:
                        return
                    await asyncio.sleep(timing.RECONNECT_DELAY)
                    continue
                if unsent:
                    logger.info("Redis takes frames again: %d chats told to catch up", len(unsent))
                self.unsent -= unsent

    async def _send(self, frames: list[tuple[int, RelayFrame]], unsent: set[int]) -> None:
        """Ask which other processes listen to the tick's chats, then send them their frames."""
        chat_ids = " ".join(map(str, {*unsent, *(chat_id for chat_id, _ in frames)}))
        found = await self.listeners(args=[self.origin, self.listeners_prefix, chat_ids])
        if not found:
            return  # no other process shows these chats: nothing to send
        inboxes: dict[int, list[bytes]] = {}
        for i in range(0, len(found), 2):
            inboxes.setdefault(found[i], []).append(self._inbox_prefix + found[i + 1])
        args: list[bytes] = []
        for chat_id in unsent:
            for inbox in inboxes.get(chat_id, ()):
                args += (inbox, missed_message(chat_id))
        for chat_id, frame in frames:
            targets = inboxes.get(chat_id)
            if targets:
                text = message(chat_id, frame)  # once, whatever the number of processes
                for inbox in targets:
                    args += (inbox, text)
        await self.publish_all(args=args)

    async def close(self) -> None:
        """Give what is waiting one try, PUBLISH_TIMEOUT at most, then stop."""
        self._closing = True
        if self._task is not None:
            self._frames_waiting.set()
            await asyncio.wait([self._task], timeout=timing.PUBLISH_TIMEOUT)
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
