"""Which processes get a chat's frames: this process's listings in Redis.

A chat's listeners are a sorted set in Redis, `<prefix>listeners.<chat id>`: process origin →
when its listing lapses. A process lists itself for each chat its pages show; a publisher asks
who is listed before it sends (`publisher.py`).

One task (`Listing.run`) is the process's only writer of its listings, so they change in the
order pages come and go: each pass lists the chats that gained a first page here and unlists
those that lost their last, all in one script call, and every LISTEN_RENEW it renews them all.
A join waits for a pass that began after it; a leave does not wait. A listing found lapsed
(Redis lost it) tells its pages to catch up. A listing may outlive its last page by up to
LISTEN_LEASE (a process that died, an unlisting Redis did not take): frames sent to it are
dropped there, which costs only their bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import chats.live.relay.timing as timing
from chats.live.relay.local import LocalRelay
from chats.log_context import shared_task

logger = logging.getLogger(__name__)

# LIST: ARGV[1] the process, ARGV[2] the lease, ARGV[3] the sets' prefix, ARGV[4] the chats to
# list the process for and ARGV[5] those to unlist it from, space separated. Drops lapsed
# listings, and returns the chats the process was not listed for already. The script uses
# Redis's clock (TIME), so the processes' clocks need not agree, and builds the key names itself
# (one argument rather than one per chat: see LISTENERS in publisher.py).
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


def listeners_prefix(prefix: str) -> str:
    """The start of every chat's listeners key (RELAY_PREFIX, then `listeners.`)."""
    return f"{prefix}listeners."


class Listing:
    """This process's listings: which chats other processes must send it frames of."""

    def __init__(
        self,
        relay: LocalRelay,
        origin: str,
        open_inbox: Callable[[], Awaitable[None]],
        redis: Any,
        prefix: str,
    ) -> None:
        self.origin = origin
        self.prefix = listeners_prefix(prefix)
        self._subscribers = relay.subscribers  # the relay's pages, by chat: what to list
        self._open_inbox = open_inbox  # frames sent once the process is listed must arrive
        self._tell_missed = relay.tell_missed
        self._script = redis.register_script(LIST)
        self.listed: set[int] = set()  # chats this process is listed for
        self.unlisting: set[int] = set()  # chats the pass under way unlists
        self._maybe_listed: set[int] = set()  # chats a failed pass may have left listed
        self._catch_up_once_listed: set[int] = set()  # chats whose join gave up waiting
        self._epoch = 0  # counts `forget`s: a pass begun before one knows nothing after it
        self.task: asyncio.Task | None = None
        self._wanted = asyncio.Event()
        self._next_pass: asyncio.Future | None = None  # True once the next pass has listed
        self.closing = False

    def key(self, chat_id: int) -> str:
        return f"{self.prefix}{chat_id}"

    def is_listed(self, chat_id: int) -> bool:
        """Listed, and no pass under way is unlisting it."""
        return chat_id in self.listed and chat_id not in self.unlisting

    def request_pass(self) -> asyncio.Future:
        """Ask for a pass; its future says whether the pass listed what it was asked to (False:
        it failed, or the relay is closing)."""
        loop = asyncio.get_running_loop()
        if self.closing:
            refused = loop.create_future()
            refused.set_result(False)
            return refused
        if self.task is None or self.task.done():
            self.task = shared_task(self.run(), name="relay-lister")
        if self._next_pass is None:
            self._next_pass = loop.create_future()
        self._wanted.set()
        return self._next_pass

    def catch_up_once_listed(self, chat_id: int) -> None:
        """The chat's join gave up waiting: tell its pages to catch up once a pass lists it."""
        self._catch_up_once_listed.add(chat_id)
        self.request_pass()

    def forget(self) -> None:
        """Redis may have lost every listing (the inbox reconnects): what was listed is listed
        again, or unlisted if its pages left, by the next passes."""
        self._epoch += 1
        self._maybe_listed |= self.listed
        self.listed.clear()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        renew_at = loop.time() + timing.LISTEN_RENEW
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(renew_at - loop.time()):
                    await self._wanted.wait()
            self._wanted.clear()
            renewing = loop.time() >= renew_at
            if renewing:
                renew_at = loop.time() + timing.LISTEN_RENEW
            this_pass, self._next_pass = self._next_pass, None
            try:
                lapsed = await self._pass(renew=renewing)
            except BaseException as error:
                if this_pass is not None and not this_pass.done():
                    this_pass.set_result(False)
                if not isinstance(error, Exception):
                    raise  # cancelled: the relay is closing
                logger.warning("Listing this process's chats in Redis failed", exc_info=True)
                renew_at = loop.time() + timing.RECONNECT_DELAY  # then renew every listing
                continue
            if this_pass is not None:
                this_pass.set_result(True)
            if lapsed:  # Redis lost them (restarted, evicted): frames may have gone elsewhere
                logger.warning("Redis had lost %d of this process's listings", len(lapsed))
            for chat_id in (*lapsed, *(self._catch_up_once_listed & self.listed)):
                self._tell_missed(chat_id)
            self._catch_up_once_listed &= set(self._subscribers) - self.listed

    async def _pass(self, *, renew: bool) -> list[int]:
        """List this process for the chats with pages here, unlist it from the others; return
        the chats whose listing Redis had lost."""
        epoch, wanted, listed = self._epoch, set(self._subscribers), set(self.listed)
        to_list = wanted if renew else wanted - listed
        to_unlist = (listed | self._maybe_listed) - wanted
        if not to_list and not to_unlist:
            return []
        self.unlisting = to_unlist
        try:
            async with asyncio.timeout(timing.PUBLISH_TIMEOUT):
                await self._open_inbox()
                new = await self.list_in_redis(to_list, to_unlist)
        except BaseException:
            # Redis may or may not have unlisted them: not listed as far as a join can tell
            # (it waits for a pass that lists it again), and unlisted again by the next pass.
            self.listed -= to_unlist
            self._maybe_listed |= to_unlist | (to_list - self.listed)
            raise
        finally:
            self.unlisting = set()
        self._maybe_listed -= to_unlist | to_list
        if epoch != self._epoch:
            return []  # the inbox reconnected meanwhile: it lists everything again
        self.listed = (self.listed - to_unlist) | to_list
        return [chat_id for chat_id in new if chat_id in listed and chat_id in self._subscribers]

    async def list_in_redis(self, to_list: set[int], to_unlist: set[int]) -> list[int]:
        args = [self.origin, timing.LISTEN_LEASE, self.prefix]
        args += (" ".join(map(str, to_list)), " ".join(map(str, to_unlist)))
        return await self._script(args=args)

    async def stop(self) -> None:
        """Stop listing: a join waiting for a pass gets False, the task ends."""
        self.closing = True
        if self._next_pass is not None and not self._next_pass.done():
            self._next_pass.set_result(False)  # a page joining now reads the log as it is
        self._next_pass = None
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def unlist_all(self) -> None:
        """Unlist every chat this process may be listed for, so that other processes stop
        sending it frames now rather than at LISTEN_LEASE: also what a cancelled or failed pass
        may have left listed, or was about to list."""
        listed = self.listed | self._maybe_listed | set(self._subscribers)
        self.listed = set()
        if not listed:
            return
        try:
            async with asyncio.timeout(timing.PUBLISH_TIMEOUT):
                await self.list_in_redis(set(), listed)
        except Exception:
            logger.warning("Unlisting %d chats at shutdown failed", len(listed), exc_info=True)
