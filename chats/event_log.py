"""Store each run's events, then relay them: one batched write and one frame per chat per tick.

Every running turn in this process appends here; a single flusher writes all pending events in
one transaction every EVENT_FLUSH_INTERVAL and only then publishes them to each chat's group.
Publishing after the commit is what makes resume gap-free: a page that subscribes and then
reads the log sees every event either in the log or live (maybe both; seqs dedupe).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from itertools import groupby

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone

from .agent.events import AgentEvent
from .models import TurnEvent
from .protocol import chat_group, event_view, publish, turn_events

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PendingEvent:
    chat_id: int
    turn_id: int
    seq: int
    event: AgentEvent


class EventLog:
    """The batching writer and relay of one event loop."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._pending: list[PendingEvent] = []
        self._lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task | None = None

    def append(self, chat_id: int, turn_id: int, seq: int, event: AgentEvent) -> None:
        self._pending.append(PendingEvent(chat_id, turn_id, seq, event))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_forever(), name="event-log-flusher")
        self._wakeup.set()

    async def flush(self) -> None:
        """Write and publish everything appended so far (a run calls this before it finishes)."""
        async with self._lock:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await _write(batch)
                except Exception:
                    self._pending[:0] = batch  # nothing is lost: the next flush tries again
                    raise
                await _publish(batch)

    async def _flush_forever(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            # Let the batch fill for one interval: this is the frame-coalescing window.
            await asyncio.sleep(self.interval)
            try:
                await self.flush()
            except Exception:  # keep relaying other turns; the events stay pending
                logger.exception("Writing the event log failed; retrying")
                await asyncio.sleep(1)
                self._wakeup.set()


@database_sync_to_async
def _write(batch: list[PendingEvent]) -> None:
    # One executemany rather than bulk_create: compiling the INSERT field by field, row by row,
    # took most of the flusher's time, and that time is taken from every stream being read
    # (the flusher's thread shares the GIL with the event loop). bench/streaming.py measures it.
    db = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: it is a lookup per access
    data = TurnEvent._meta.get_field("data")
    received_at = db.ops.adapt_datetimefield_value(timezone.now())
    table = db.ops.quote_name(TurnEvent._meta.db_table)
    with transaction.atomic(), db.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} (turn_id, seq, type, data, received_at)"  # noqa: S608 (our table)
            " VALUES (%s, %s, %s, %s, %s)",
            [
                (
                    p.turn_id,
                    p.seq,
                    p.event.type[:40],
                    data.get_db_prep_save(p.event.data, db),
                    received_at,
                )
                for p in batch
            ],
        )


async def _publish(batch: list[PendingEvent]) -> None:
    by_turn = groupby(sorted(batch, key=lambda p: (p.turn_id, p.seq)), key=lambda p: p.turn_id)
    for turn_id, items in by_turn:
        items = list(items)
        views = [event_view(p.seq, p.event) for p in items]
        await publish(chat_group(items[0].chat_id), turn_events(turn_id, views))


_logs: dict[asyncio.AbstractEventLoop, EventLog] = {}


def get_event_log() -> EventLog:
    """Return this event loop's EventLog (tests run one loop each; servers run one)."""
    loop = asyncio.get_running_loop()
    for stale in [known for known in _logs if known.is_closed()]:
        del _logs[stale]
    if loop not in _logs:
        _logs[loop] = EventLog(settings.EVENT_FLUSH_INTERVAL)
    return _logs[loop]
