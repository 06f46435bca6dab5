"""Limits on who follows chats live (the chat pages' sockets, the API's event streams), and
the sockets' end at logout.

- Open sockets per user (WS_MAX_SOCKETS_PER_USER) are counted in the database (`OpenSocket`),
  because a user's sockets may land on several server processes and a count kept in one
  process would let each process admit the cap. The database is the one store every
  deployment shares (the cache is per process by default; Redis is optional). Each process
  renews the leases of its sockets, so the rows of a process that died stop counting. An API
  event stream (`chats/api/stream.py`) is counted as one more socket of its user.
- Frames per second per socket (WS_MAX_FRAMES_PER_SECOND) are a token bucket in the consumer:
  a socket is one connection to one process, so its own memory is the right place. The API
  gives each token the same bucket for its requests (`chats/api/auth.py`).
- At logout every socket of the user is told to close, in whichever process it lives.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import timedelta

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone

from chats.live.protocol import publish, session_end, user_group
from chats.locks import lock_users
from chats.log_context import shared_task
from chats.loop.batches import DatabaseBatches
from chats.loop.per_loop import PerLoop
from chats.models import OpenSocket

logger = logging.getLogger(__name__)

SOCKET_LEASE_SECONDS = 60.0
SOCKET_RENEW_SECONDS = 20.0


def socket_open(*, user_id: int, channel_name: str, limit: int) -> bool:
    """Record an open socket of the user; return False, recording nothing, at `limit`."""
    return sockets_open([(user_id, channel_name)], limit=limit)[0]


def sockets_open(opens: Sequence[tuple[int, str]], *, limit: int) -> list[bool]:
    """`socket_open` for each (user id, channel name) in turn, in one transaction of four
    statements however many open (pages reconnecting together after a restart, say)."""
    if not opens:
        return []
    now = timezone.now()
    user_ids = {user_id for user_id, _ in opens}
    admitted: list[bool] = []
    with transaction.atomic():
        lock_users(user_ids)  # two connects at once cannot both see room for one more
        sockets = OpenSocket.objects.filter(user_id__in=user_ids)
        sockets.filter(lease_expires_at__lte=now).delete()  # rows of a process that died
        counts = Counter(sockets.values_list("user_id", flat=True))
        lease = now + timedelta(seconds=SOCKET_LEASE_SECONDS)
        rows = []
        for user_id, channel_name in opens:
            admitted.append(counts[user_id] < limit)
            if admitted[-1]:
                counts[user_id] += 1
                # A channel name is new with each socket, so there is no row of it to update.
                rows.append(
                    OpenSocket(user_id=user_id, channel_name=channel_name, lease_expires_at=lease)
                )
        OpenSocket.objects.bulk_create(rows)
    return admitted


def sockets_close(*, channel_names: list[str]) -> None:
    OpenSocket.objects.filter(channel_name__in=channel_names).delete()


def _close_batch(channel_names: list[str]) -> list[None]:
    sockets_close(channel_names=channel_names)
    return [None] * len(channel_names)


# Sockets closing together (the pages of a burst of answers, a restart's reconnects) are
# forgotten in one trip to the database thread, not one each.
_socket_closes = PerLoop(lambda: DatabaseBatches(_close_batch, name="socket closes"))


async def socket_close(channel_name: str) -> None:
    """Forget an open socket of its user: it no longer counts against WS_MAX_SOCKETS_PER_USER."""
    await _socket_closes().submit(channel_name)


def socket_renew_leases(*, channel_names: list[str]) -> None:
    expires = timezone.now() + timedelta(seconds=SOCKET_LEASE_SECONDS)
    OpenSocket.objects.filter(channel_name__in=channel_names).update(lease_expires_at=expires)


class SocketLeases:
    """The open sockets of this process, whose leases one task renews."""

    def __init__(self) -> None:
        self.channel_names: set[str] = set()
        self._renewer: asyncio.Task | None = None

    def hold(self, channel_name: str) -> None:
        self.channel_names.add(channel_name)
        if self._renewer is None or self._renewer.done():
            self._renewer = shared_task(self._renew_forever(), name="socket-leases")

    def release(self, channel_name: str) -> None:
        self.channel_names.discard(channel_name)
        if not self.channel_names and self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(SOCKET_RENEW_SECONDS)
            try:
                await database_sync_to_async(socket_renew_leases)(
                    channel_names=list(self.channel_names)
                )
            except Exception:
                logger.exception("Renewing the socket leases failed")


get_socket_leases = PerLoop(SocketLeases)  # this event loop's open sockets


class FrameRate:
    """A token bucket: `rate` frames a second with bursts of `rate`, and an abuse meter.

    Every refused frame also takes from a second bucket (ABUSE_SECONDS worth of refusals,
    refilled at a quarter of the rate): a page that slips over the rate now and then is only
    slowed down, while one that keeps sending far beyond it runs that bucket dry and is closed.
    """

    ABUSE_SECONDS = 5

    def __init__(self, rate: float, clock: Callable[[], float] | None = None) -> None:
        self.rate = rate
        self.clock = clock or time.monotonic  # looked up now: a test may set the module's clock
        self.tokens = rate
        self.patience = rate * self.ABUSE_SECONDS
        self.updated = self.clock()

    def allow(self) -> bool:
        """Return True when a frame may be handled now; otherwise count one refusal."""
        now = self.clock()
        elapsed, self.updated = now - self.updated, now
        self.tokens = min(self.rate, self.tokens + elapsed * self.rate)
        self.patience = min(self.rate * self.ABUSE_SECONDS, self.patience + elapsed * self.rate / 4)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        self.patience -= 1
        return False

    @property
    def exhausted(self) -> bool:
        """Return True once the refusals have gone on long enough to close the socket."""
        return self.patience <= 0


@receiver(user_logged_out, dispatch_uid="chats.live.limits.close_on_logout")
def close_sockets_on_logout(sender, request, user, **kwargs) -> None:
    """Close every chat socket of a user who logs out, in any process."""
    if user is None:
        return
    try:
        async_to_sync(publish)(user_group(user.pk), session_end())
    except Exception:  # the logout itself must not fail; asks re-check the session anyway
        logger.exception("Could not close the sockets of user %s at logout", user.pk)
