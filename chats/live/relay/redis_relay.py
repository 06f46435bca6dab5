"""Many processes: pages here get frames from memory, other processes' through Redis."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid

import chats.live.relay.timing as timing
from chats.live.relay.inbox import Inbox
from chats.live.relay.listing import Listing
from chats.live.relay.local import LocalRelay, RelayFrame, Subscriber
from chats.live.relay.publisher import Publisher

logger = logging.getLogger(__name__)


class RedisRelay(LocalRelay):
    """A LocalRelay that also lists this process for its pages' chats (`listing`), reads the
    frames other processes send it (`inbox`) and sends its frames to theirs (`publisher`)."""

    def __init__(self, url: str, prefix: str) -> None:
        super().__init__()
        import redis.asyncio as redis
        from redis.driver_info import DriverInfo

        # One DriverInfo for every connection: without it, each new connection looks redis-py's
        # version up in the installed packages' metadata (~0.2 ms).
        self.redis = redis.Redis.from_url(url, driver_info=DriverInfo())
        self.origin = uuid.uuid4().hex[:12] + f"-{os.getpid()}"
        self.listing = Listing(self, self.origin, self._open_inbox, self.redis, prefix)
        self.inbox = Inbox(self, self.origin, self.listing, self.redis, prefix)
        self.publisher = Publisher(self.redis, self.origin, prefix)
        self._closing = False

    def listeners_key(self, chat_id: int) -> str:
        return self.listing.key(chat_id)

    async def _open_inbox(self) -> None:
        await self.inbox.open()

    async def join(self, chat_id: int, subscriber: Subscriber) -> None:
        """Deliver the chat's frames to `subscriber` from now on, from any process: once this
        returns, this process is listed, or, if Redis did not list it within JOIN_TIMEOUT,
        will be, and the chat's pages here are then told to catch up."""
        await super().join(chat_id, subscriber)
        if self.listing.is_listed(chat_id) or self.inbox.recovering:
            return  # listed already; or a recovery lists every chat with pages before it ends
        try:
            async with asyncio.timeout(timing.JOIN_TIMEOUT):
                listed = await asyncio.shield(self.listing.request_pass())
        except TimeoutError:
            listed = False
        if listed or self._closing:
            return
        logger.warning("Redis did not list this process for chat %s in time", chat_id)
        if not self.inbox.reading or not self.inbox.is_open:
            self.inbox.start(recover=True)  # lists every chat, then tells every page
        else:  # the inbox works and the lister is slow: no need to drop the subscription
            self.listing.catch_up_once_listed(chat_id)

    async def leave(self, chat_id: int, subscriber: Subscriber) -> None:
        await super().leave(chat_id, subscriber)
        if chat_id not in self.subscribers:
            self.listing.request_pass()  # unlisted in the background: a page closing does not wait

    async def publish(self, frames: list[tuple[int, RelayFrame]]) -> None:
        """Deliver here at once; the publisher task sends the frames on to Redis, in order."""
        self.deliver_here(frames)
        self.publisher.send(frames)

    async def close(self) -> None:
        self._closing = True
        self.inbox.closing = self.listing.closing = True
        await self.publisher.close()
        await asyncio.gather(self.listing.stop(), self.inbox.stop())
        await self.listing.unlist_all()
        await self.inbox.close()
        await self.redis.aclose()
        await super().close()
