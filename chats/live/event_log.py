"""Store each run's events, then relay them: one batched write and one frame per chat per tick.

Every running turn in this process appends here; a single flusher writes all pending events in
one transaction at each tick of the relay (every EVENT_FLUSH_INTERVAL, wider when busy:
`chats/loop/ticks.py`) and only then relays them to each chat's pages (`relay/`). Relaying after
the commit is what makes resume gap-free: a page that joins the relay and then reads the log sees
every event either in the log or live (maybe both; seqs dedupe).

A write that fails is retried turn by turn, so one turn's bad event never holds back the
others: the turn the database refuses is failed and its run told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import orjson
from channels.db import database_sync_to_async
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver
from django.utils import timezone

from chats.agent.events import AgentEvent
from chats.live.compact_json import strict_json, strict_json_bytes
from chats.live.protocol import event_view, publish_to_chats, turn_events
from chats.log_context import shared_task
from chats.loop.batches import DATABASE_FAILING
from chats.loop.per_loop import PerLoop
from chats.loop.ticks import Ticks, get_ticks
from chats.metrics import EVENT_LOG_FLUSH, EVENTS_RELAYED
from chats.models import Turn, TurnEvent
from citations.new_rows import copy_text, sqlite_row_chunks

logger = logging.getLogger(__name__)

# On errors of the database rather than of the data (DATABASE_FAILING: down, locked,
# restarting) the same write may succeed in a moment, so the turn's events stay pending, retried
# every RETRY_DELAY, until its writes have failed for TRANSIENT_GRACE seconds.
TRANSIENT_GRACE = 5.0
RETRY_DELAY = 1.0

WriteFailed = Callable[[str], None]


# A tuple: one is built per event, in a third of a frozen dataclass's time.
class PendingEvent(NamedTuple):
    chat_id: int
    turn_id: int
    seq: int
    event: AgentEvent
    data: dict[str, Any]  # what is stored: the event's data, made storable by the run


class EventLog:
    """The batching writer and relay of one event loop."""

    def __init__(self, ticks: Ticks) -> None:
        self.ticks = ticks  # flushes at these; the server's are the agents' reads' (get_ticks)
        self._pending: list[PendingEvent] = []
        self._lock = asyncio.Lock()
        self._wakeup = asyncio.Event()
        self._flusher: asyncio.Task | None = None
        self._failing_since: dict[int, float] = {}  # turn id -> loop time of its first failure
        # Events kept back by a transient error, retried from _retry_at on; later events of the
        # same turns wait behind them so that each turn's seqs are written and relayed in order.
        self._held: list[PendingEvent] = []
        self._retry_at = 0.0
        self._failures: dict[int, str] = {}  # turn id -> why its events could not be stored
        self._on_failure: dict[int, WriteFailed] = {}
        # When the oldest pending event was received (wall clock): one reading per tick, for
        # the event delay metric, rather than one per event.
        self._received_at = 0.0
        # Events appended so far, and how many of them a flush has handled (written, held or
        # failed): `flushed` waits for the second to reach what the first was.
        self._appended = 0
        self._handled = 0
        self._handled_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._forced_at = -math.inf  # loop time of the last flush a finishing run asked for

    def watch(self, turn_id: int, on_failure: WriteFailed) -> None:
        """Call `on_failure(message)` if this turn's events cannot be stored."""
        self._on_failure[turn_id] = on_failure

    def forget(self, turn_id: int) -> None:
        """The turn's run has ended: drop what the log remembers of it."""
        self._on_failure.pop(turn_id, None)
        self._failures.pop(turn_id, None)
        self._failing_since.pop(turn_id, None)

    def failure(self, turn_id: int) -> str | None:
        """Return why this turn's events could not be stored, or None."""
        return self._failures.get(turn_id)

    def append(
        self,
        chat_id: int,
        turn_id: int,
        seq: int,
        event: AgentEvent,
        data: dict[str, Any] | None = None,
    ) -> None:
        """Queue one event; `data` is what to store, when not `event.data` as it stands."""
        if turn_id in self._failures:
            return  # its run is being stopped; nothing more of it can be logged in order
        self._pending.append(
            PendingEvent(chat_id, turn_id, seq, event, event.data if data is None else data)
        )
        self._appended += 1
        if len(self._pending) == 1:  # the first of this tick's batch
            self._received_at = time.time()
        if self._flusher is None or self._flusher.done():
            self._flusher = shared_task(self._flush_forever(), name="event-log-flusher")
        self._wakeup.set()

    async def flushed(self) -> None:
        """Return once everything appended so far is written and published (or held back, or
        its turn failed): a run waits for this before it finishes.

        The first run to ask in a window has the log written now, a quiet site's answer not
        waiting for the tick; runs that ask later in the window wait for the flush of the tick
        (or one in progress), so that runs ending together are written together, not in a
        write each (200 answers ending at once made a convoy of small writes, up to 0.4 s).
        """
        target = self._appended
        if self._handled >= target:
            return
        loop = asyncio.get_running_loop()
        if loop.time() - self._forced_at >= self.ticks.window:
            self._forced_at = loop.time()
            await self.flush()
            return
        waiter = loop.create_future()
        self._handled_waiters.append((target, waiter))
        if self._flusher is None or self._flusher.done():  # appended, so it runs; unless it died
            self._flusher = shared_task(self._flush_forever(), name="event-log-flusher")
        self._wakeup.set()
        await waiter

    def _handled_through(self, count: int) -> None:
        """The first `count` events appended have been handled: wake who waits for them."""
        self._handled = max(self._handled, count)
        waiting = []
        for target, waiter in self._handled_waiters:
            if target > self._handled:
                waiting.append((target, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._handled_waiters = waiting

    async def flush(self) -> None:
        """Write and publish everything appended so far, at once (`flushed`, the shutdown).

        Never raises for a failed write: a turn whose events the database refuses is failed,
        and events kept back by a transient error are held for the flusher to retry.
        """
        async with self._lock:
            loop = asyncio.get_running_loop()
            if self._held and loop.time() >= self._retry_at:
                self._pending[:0], self._held = self._held, []
            while self._pending:
                batch, self._pending = self._pending, []
                through = self._appended  # every event appended so far is in this batch
                received_at = self._received_at
                if self._held:
                    waiting = {p.turn_id for p in self._held}
                    self._held += [p for p in batch if p.turn_id in waiting]
                    batch = [p for p in batch if p.turn_id not in waiting]
                    if not batch:
                        self._handled_through(through)
                        continue
                try:
                    began = time.perf_counter()
                    await _write(batch)
                    EVENT_LOG_FLUSH.observe(time.perf_counter() - began)
                    written = batch
                except Exception:
                    written, kept = await self._write_turn_by_turn(batch)
                    if kept:
                        self._held += kept
                        self._retry_at = loop.time() + RETRY_DELAY
                for turn_id in {p.turn_id for p in written}:
                    self._failing_since.pop(turn_id, None)
                if written:
                    try:
                        await _publish(written, received_at)
                    except Exception:  # stored all the same: pages catch up from the log
                        logger.exception("Relaying %d stored events failed", len(written))
                self._handled_through(through)
            self._handled_through(self._appended)  # nothing pending: all appended is handled

    async def _write_turn_by_turn(
        self, batch: list[PendingEvent]
    ) -> tuple[list[PendingEvent], list[PendingEvent]]:
        """Write each turn's events on their own; return (written, kept for a retry)."""
        written: list[PendingEvent] = []
        kept: list[PendingEvent] = []
        by_turn: dict[int, list[PendingEvent]] = {}
        for pending in batch:
            by_turn.setdefault(pending.turn_id, []).append(pending)
        for turn_id, events in by_turn.items():
            try:
                await _write(events)
            except DATABASE_FAILING as error:
                now = asyncio.get_running_loop().time()
                since = self._failing_since.setdefault(turn_id, now)
                if now - since < TRANSIENT_GRACE:
                    logger.warning(
                        "Writing %d events of turn %s failed (%s); retrying",
                        len(events),
                        turn_id,
                        type(error).__name__,
                    )
                    kept.extend(events)
                else:
                    self._fail(turn_id, error)
            except Exception as error:
                self._fail(turn_id, error)
            else:
                written.extend(events)
        return written, kept

    def _fail(self, turn_id: int, error: Exception) -> None:
        logger.error(
            "The events of turn %s cannot be stored; failing the turn", turn_id, exc_info=error
        )
        message = (
            "Part of this answer could not be saved: the database refused one of its events"
            f" ({type(error).__name__}), so the answer was stopped."
        )
        self._failures[turn_id] = message
        self._failing_since.pop(turn_id, None)
        self._pending = [p for p in self._pending if p.turn_id != turn_id]
        self._held = [p for p in self._held if p.turn_id != turn_id]
        on_failure = self._on_failure.get(turn_id)
        if on_failure is not None:
            try:
                on_failure(message)
            except Exception:
                logger.exception("Telling the run of turn %s to stop failed", turn_id)

    async def _flush_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self._held:  # wake for new events, or to retry the held ones when it is time
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), self._retry_at - loop.time())
            else:
                await self._wakeup.wait()
            self._wakeup.clear()
            # Let the batch fill until the relay's next tick: this is the frame-coalescing window.
            # The paced streams read what reached them meanwhile at that same tick
            # (chats.loop.ticks), from buffers, without waiting; one more turn of the loop lets
            # them append it first.
            # A stream whose socket was read again late (a busy loop fires the tick with the
            # early timer) has its bytes one turn later, when the loop polls: a second turn.
            await self.ticks.wait()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            try:
                await self.flush()
            except Exception:  # flush handles write errors; this is a bug, not a bad event
                logger.exception("Flushing the event log failed")
                self._handled_through(self._appended)  # no run waits for ever on a bug

    async def close(self) -> None:
        """Write what is pending, stop the flusher, and close the writer's database connection.

        The server's shutdown calls this so that no write outlives it: a write still running on
        the writer's thread after the loop has gone would race whatever the database sees next.
        """
        await self.flush()  # waits for a flush in progress, then writes anything left
        # Events held back by a transient refusal are retried until they are written or their
        # turns fail (TRANSIENT_GRACE), not dropped with the process.
        loop = asyncio.get_running_loop()
        while self._held:
            await asyncio.sleep(max(0.0, self._retry_at - loop.time()))
            await self.flush()
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        await _close_writer_connection()


def write_batch(batch: list[PendingEvent]) -> None:
    """Insert the batch at once: one COPY statement on PostgreSQL, a few INSERTs in one
    transaction on SQLite.

    Not bulk_create: compiling the INSERT field by field, row by row, took most of the flusher's
    time, and that time is taken from every stream being read (the writer's thread shares the
    GIL with the event loop). Both store the data as `strict_json` writes it: a value that
    slipped past `storable_event` (NaN, say) is written as the token JSONField would send,
    refused by the database, not quietly rewritten, and the turn fails alone.
    """
    db = connections[DEFAULT_DB_ALIAS]  # not the `connection` proxy: it is a lookup per access
    table = db.ops.quote_name(TurnEvent._meta.db_table)
    # The raw connection's statements: wrap_database_errors gives their errors Django's classes,
    # so a transient refusal is still an OperationalError, retried (DATABASE_FAILING), and a
    # refused value an IntegrityError, which fails its turn.
    turns = db.ops.quote_name(Turn._meta.db_table)
    turn_ids = sorted({p.turn_id for p in batch})
    if db.vendor == "postgresql":
        with db.wrap_database_errors:
            db.ensure_connection()
            copy_rows(db.connection, table, turns, turn_ids, batch)
        return
    rows = [(p.turn_id, p.seq, p.event.type[:40], strict_json(p.data)) for p in batch]
    with transaction.atomic(), db.wrap_database_errors:
        raw = db.connection
        (found,) = raw.execute(_sqlite_turns(turns), [orjson.dumps(turn_ids)]).fetchone()
        if found < len(turn_ids):
            _refuse_missing_turns(raw, turns, turn_ids, "?")
        now = db.ops.adapt_datetimefield_value(timezone.now())
        insert_sqlite_rows(raw, table, rows, now)


# The log's rows name their turn without a foreign key constraint: the database's check runs
# once a row (on PostgreSQL 3.6 of a write's 10 µs an event), where one query a batch counts
# the turns the batch names, and holds them (FOR KEY SHARE on PostgreSQL; SQLite's write lock
# holds everything) so that none is deleted before the batch commits. It answers one row: the
# sqlite3 module hands the GIL back at each row it steps through, and beside a busy event loop
# each row waited for it while the write lock was held. A batch naming a turn that is gone is
# refused as the constraint would have refused it, and is retried turn by turn
# (docs/PERFORMANCE.md, "The event log's writes"). A turn deleted while its batch was being
# written loses the batch's rows with it: `forget_events_of_deleted_turns`.
def _refuse_missing_turns(raw: Any, turns: str, turn_ids: list[int], placeholder: str) -> None:
    placeholders = ", ".join([placeholder] * len(turn_ids))
    sql = f"SELECT id FROM {turns} WHERE id IN ({placeholders})"  # noqa: S608
    found = {row[0] for row in raw.execute(sql, turn_ids).fetchall()}
    gone = sorted(set(turn_ids) - found)
    raise IntegrityError(f"The event log names turns that do not exist: {gone}")


@functools.cache
def _sqlite_turns(turns: str) -> str:
    return f"SELECT count(*) FROM {turns} WHERE id IN (SELECT value FROM json_each(?))"  # noqa: S608


# PostgreSQL: the batch is one COPY, in one transaction with the lock of its turns. The rows go
# as one buffer of COPY's text format, each row's JSON the bytes orjson writes: psycopg's
# write_row adapted each value of each row, and encoded the JSON text again. `received_at` is
# the column's default, the statement's time: the same timestamp sent in each row was parsed
# again in each row, 0.5 µs a row (docs/PERFORMANCE.md, "The event log's writes").
@functools.lru_cache(maxsize=256)
def _copy_text(text: str) -> bytes:
    """A column's text in COPY's text format (an unknown event's type is the agent's own)."""
    return copy_text(text).encode()


def copy_rows(
    raw: Any,
    table: str,
    turns: str,
    turn_ids: list[int],
    batch: list[PendingEvent],
) -> None:
    lines = []
    for p in batch:
        data = strict_json_bytes(p.data)
        if b"\\" in data:  # JSON holds no raw tab, CR or LF: only its escapes' backslashes
            data = data.replace(b"\\", b"\\\\")
        kind = _copy_text(p.event.type[:40])
        lines.append(b"%d\t%d\t%s\t%s\n" % (p.turn_id, p.seq, kind, data))
    with raw.transaction(), raw.cursor() as cursor:
        held = f"SELECT count(*) FROM (SELECT FROM {turns} WHERE id = ANY(%s) FOR KEY SHARE) AS t"  # noqa: S608
        (found,) = cursor.execute(held, [turn_ids]).fetchone()
        if found < len(turn_ids):
            _refuse_missing_turns(raw, turns, turn_ids, "%s")
        with cursor.copy(f"COPY {table} (turn_id, seq, type, data) FROM STDIN") as copy:
            copy.write(b"".join(lines))


@receiver(post_delete, sender=Turn, dispatch_uid="chats.live.event_log.forget_events")
def forget_events_of_deleted_turns(sender, instance: Turn, using: str, **kwargs) -> None:
    """Delete a deleted turn's events once more when its deletion commits.

    Django deletes a turn's events before the turn. On PostgreSQL a batch the log was writing
    meanwhile holds the turn (FOR KEY SHARE), so the turn's deletion waits for the batch to
    commit, and its rows were not there to be deleted; from then on every batch naming the turn
    is refused. (On SQLite the two cannot interleave: its write lock is the whole database's.)
    """
    db = connections[using]
    # One callback a transaction for all the turns it deletes; Django drops it on a rollback.
    callback = next(
        (f for _, f, _ in db.run_on_commit if isinstance(f, _DeleteOrphanedEvents)), None
    )
    if callback is None:
        callback = _DeleteOrphanedEvents(using)
        transaction.on_commit(callback, using=using)  # at the commit: Django deletes in one
    callback.turn_ids.add(instance.pk)


class _DeleteOrphanedEvents:
    def __init__(self, using: str) -> None:
        self.using = using
        self.turn_ids: set[int] = set()

    def __call__(self) -> None:
        # Only turns that are gone: one whose deletion a savepoint rolled back is still here.
        kept = (
            Turn.objects.using(self.using).filter(pk__in=self.turn_ids).values_list("pk", flat=True)
        )
        gone = self.turn_ids.difference(kept)
        TurnEvent.objects.using(self.using).filter(turn_id__in=gone).delete()


# SQLite: rows go in through multi-row INSERTs of a power-of-two size, at most SQLITE_ROWS each
# (`citations.new_rows.sqlite_row_chunks`, which the finishes' references share), so a batch
# is a few statements (one per SQLITE_ROWS rows, then one per bit of the rest's size)
# and there are only eleven of them: each is prepared once and kept in the connection's
# statement cache. A statement of a new size each time was parsed again each time, which cost as
# much as the insert itself; executemany steps once a row, and each step hands the GIL back and
# waits up to the switch interval (researchsite/asgi.py) to take it again while the event loop is
# busy (a tick's 300 rows took 40-175 ms beside a busy thread). The data goes in as text, so the
# column's JSON check still judges it. These statements go past Django's cursor, so its query log
# (DEBUG) and execute wrappers do not see them.
def insert_sqlite_rows(
    raw: sqlite3.Connection, table: str, rows: list[tuple[Any, ...]], received_at: str
) -> None:
    for size, values in sqlite_row_chunks(raw, rows, leading=(received_at,)):
        raw.execute(_sqlite_insert(table, size), values)


@functools.cache
def _sqlite_insert(table: str, size: int) -> str:
    values = ",".join(["(?,?,?,?)"] * size)
    return (
        f"INSERT INTO {table} {_COLUMNS} SELECT column1, column2, column3, column4, ?"  # noqa: S608
        f" FROM (VALUES {values})"
    )


_COLUMNS = "(turn_id, seq, type, data, received_at)"


# The log writes on a thread (and database connection) of its own: a burst of asks or finishing
# answers on the shared database thread must not hold back every stream's events, nor the
# reverse. On SQLite (WAL, IMMEDIATE transactions) the two threads' writes then wait for each
# other in SQLite's busy handler, a few milliseconds, rather than in one queue behind a burst:
# at 200 chats that halved the p99 added latency (docs/PERFORMANCE.md, "The event log's writes").
_writer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-log-writer")
_write = database_sync_to_async(write_batch, thread_sensitive=False, executor=_writer_thread)
_close_writer_connection = database_sync_to_async(
    connections.close_all, thread_sensitive=False, executor=_writer_thread
)


def _seq(pending: PendingEvent) -> int:
    return pending.seq


async def _publish(batch: list[PendingEvent], received_at: float = 0.0) -> None:
    """One frame per turn for the whole tick, all sent together (one round trip on Redis).
    `received_at`: when the batch's oldest event was received (time.time()), for the pages'
    event delay metric."""
    EVENTS_RELAYED.inc(len(batch))
    by_turn: dict[int, list[PendingEvent]] = {}
    for pending in batch:
        by_turn.setdefault(pending.turn_id, []).append(pending)
    frames = []
    for turn_id, items in by_turn.items():
        items.sort(key=_seq)  # held-back retries come first; a few items per turn per tick
        views = [event_view(p.seq, p.event) for p in items]
        frames.append((items[0].chat_id, turn_events(turn_id, views)))
    await publish_to_chats(frames, received_at=received_at)


# This event loop's log (tests run one loop each; servers run one).
get_event_log = PerLoop(lambda: EventLog(get_ticks()))
