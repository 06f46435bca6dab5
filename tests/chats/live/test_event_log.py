"""The event log: batched writes and frames, and one turn's unstorable event failing only it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import DatabaseError, connection, connections, transaction
from django.utils import timezone

from chats.agent.events import AgentEvent, AnswerEvent, StructuredOutputEvent, UnknownEvent
from chats.live.event_log import EventLog, PendingEvent, insert_sqlite_rows, write_batch
from chats.live.relay import RelayFrame, close_relay, get_relay
from chats.loop.ticks import Ticks, tick_number
from chats.models import Chat, Turn, TurnEvent
from tests.chats.refusals import refusing
from tests.waiting import run_on_virtual_clock, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def answer(content: str) -> AgentEvent:
    return AnswerEvent(content=content)


@database_sync_to_async
def make_turn(user) -> Turn:
    chat = Chat.objects.create(owner=user)
    return Turn.objects.create(chat=chat, question="q")


@database_sync_to_async
def stored(turn: Turn) -> list[tuple[int, dict]]:
    return list(TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("seq", "data"))


async def stored_contents(turn: Turn) -> list[str]:
    return [d["content"] for _, d in await stored(turn)]


class Page:
    """A relay subscriber that keeps what it is sent, as decoded frames."""

    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.delivered = asyncio.Event()

    def deliver(self, frame: RelayFrame) -> None:
        self.frames.append(json.loads(frame.text))
        self.delivered.set()

    def missed(self) -> None:
        self.frames.append({"type": "missed"})


async def listen(chat_id: int) -> Page:
    page = Page()
    await get_relay().join(chat_id, page)
    return page


async def frames_on(page: Page) -> list[dict]:
    """The frames delivered to the page: in its own process a publish delivers before it
    returns, so a flush's frames are there once the flush is."""
    return page.frames


async def test_a_tick_of_events_is_one_write_and_one_frame_per_turn(user, other_user):
    first, second = await make_turn(user), await make_turn(other_user)
    first_page, second_page = await listen(first.chat_id), await listen(second.chat_id)
    log = EventLog(Ticks(60))  # no flusher tick during the test: flush() is the tick
    for seq in (1, 2, 3):
        log.append(first.chat_id, first.pk, seq, answer(f"a{seq}"))
        log.append(second.chat_id, second.pk, seq, answer(f"b{seq}"))
    await log.flush()

    assert [d["content"] for _, d in await stored(first)] == ["a1", "a2", "a3"]
    assert [d["content"] for _, d in await stored(second)] == ["b1", "b2", "b3"]
    (frame,) = await frames_on(first_page)
    assert (frame["type"], frame["turn_id"]) == ("turn.events", first.pk)
    assert [e["content"] for e in frame["events"]] == ["a1", "a2", "a3"]
    (frame,) = await frames_on(second_page)
    assert [e["seq"] for e in frame["events"]] == [1, 2, 3]


async def test_every_row_of_a_batch_is_stored_with_its_seq_type_and_data(user):
    turn = await make_turn(user)
    contents = ['say "hi"', "back\\slash \\u0041", "line\nbreak\ttab", "Résumé — 東京 📈", "null"]
    events = [answer(content) for content in contents]
    events.append(StructuredOutputEvent(content={"n": [1, 2.5, None, True], "big": 2**70}))
    log = EventLog(Ticks(60))
    for seq, event in enumerate(events, 1):
        log.append(turn.chat_id, turn.pk, seq, event)
    before = timezone.now()
    await log.flush()

    rows = await database_sync_to_async(list)(
        TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("seq", "type", "data")
    )
    assert rows == [(seq, event.type, event.data) for seq, event in enumerate(events, 1)]
    # The database stamps each row when it is written (the column's default).
    times = await database_sync_to_async(list)(
        TurnEvent.objects.filter(turn=turn).values_list("received_at", flat=True)
    )
    assert all(before - timedelta(seconds=1) <= at <= timezone.now() for at in times)


async def test_an_agents_own_type_is_stored_as_it_came(user):
    turn = await make_turn(user)
    kinds = ["NOT_ENTITLED", "tab\there", "back\\slash", "line\nbreak", "x" * 40]
    log = EventLog(Ticks(60))
    for seq, kind in enumerate(kinds, 1):
        log.append(turn.chat_id, turn.pk, seq, UnknownEvent(type=kind, payload={"k": kind}))
    await log.flush()

    rows = await database_sync_to_async(list)(
        TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("type", "data")
    )
    assert [kind for kind, _ in rows] == kinds
    assert [data["k"] for _, data in rows] == kinds


@pytest.mark.parametrize("count", [1, 3, 1023, 1024, 1025, 2500])
async def test_a_batch_of_any_size_is_stored_whole_and_in_order(user, count):
    # SQLite writes a batch as statements of power-of-two sizes: every size in between counts
    turn = await make_turn(user)
    log = EventLog(Ticks(60))
    for seq in range(1, count + 1):
        log.append(turn.chat_id, turn.pk, seq, answer(f"w{seq} "))
    await log.flush()

    rows = await stored(turn)
    assert [seq for seq, _ in rows] == list(range(1, count + 1))
    assert all(data["content"] == f"w{seq} " for seq, data in rows)


def refused_by_this_database(event: AgentEvent) -> bool:
    """Whether the database behind the tests refuses this event as the log writes it."""
    vendor = connection.vendor
    data = json.dumps(event.data)  # what Django's JSONField sends (NaN, Infinity as tokens)
    if "NaN" in data or "Infinity" in data:
        return True  # SQLite's JSON_VALID check and PostgreSQL's jsonb both refuse them
    if "\\ud800" in data or "\\u0000" in data:
        return vendor == "postgresql"  # jsonb has neither; SQLite keeps the escapes as text
    return False


POISONS = {
    "nan": StructuredOutputEvent(content={"score": float("nan")}),
    "infinity": StructuredOutputEvent(content={"score": float("inf")}),
    "1e999": StructuredOutputEvent(content={"score": json.loads("1e999")}),
    "nul": AnswerEvent(content="before\x00after"),
    "lone surrogate": AnswerEvent(content="before\ud800after"),
}


async def test_a_refused_event_raises_djangos_error_class(user):
    # The flusher tells a passing refusal (retried) from a refused value (its turn fails) by
    # Django's classes: the writer's statements bypass Django's cursor, so it must wrap them.
    turn = await make_turn(user)
    bad = PendingEvent(turn.chat_id, turn.pk, 1, POISONS["nan"], POISONS["nan"].data)
    with pytest.raises(DatabaseError) as refused:
        await database_sync_to_async(write_batch)([bad])
    assert type(refused.value).__module__ == "django.db.utils"


def test_sqlite_batches_stay_within_a_build_that_allows_fewer_variables():
    raw = sqlite3.connect(":memory:")
    raw.execute("CREATE TABLE events (turn_id, seq, type, data, received_at)")
    raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)  # SQLite's default before 3.32
    rows = [(1, seq, "ANSWER", f'{{"n": {seq}}}') for seq in range(1, 2501)]
    insert_sqlite_rows(raw, "events", rows, "2026-01-01 00:00:00")
    stored_rows = raw.execute("SELECT turn_id, seq, type, data FROM events ORDER BY seq").fetchall()
    assert stored_rows == rows


@pytest.mark.parametrize("poison", list(POISONS), ids=list(POISONS))
async def test_an_event_the_database_refuses_fails_only_its_own_turn(user, other_user, poison):
    poisoned, healthy = await make_turn(user), await make_turn(other_user)
    healthy_page = await listen(healthy.chat_id)
    told: list[str] = []
    log = EventLog(Ticks(60))
    log.watch(poisoned.pk, told.append)
    bad = POISONS[poison]
    if not refused_by_this_database(bad):
        pytest.skip(f"{connection.vendor} stores this one as it is")

    log.append(poisoned.chat_id, poisoned.pk, 1, answer("first "))
    log.append(healthy.chat_id, healthy.pk, 1, answer("one "))
    log.append(poisoned.chat_id, poisoned.pk, 2, bad)
    log.append(healthy.chat_id, healthy.pk, 2, answer("two"))
    await log.flush()

    # The other turn's events are stored and relayed as if nothing happened.
    assert [d["content"] for _, d in await stored(healthy)] == ["one ", "two"]
    (frame,) = await frames_on(healthy_page)
    assert [e["content"] for e in frame["events"]] == ["one ", "two"]
    # The poisoned turn is failed, its run is told once, and nothing more of it is logged.
    assert await stored(poisoned) == []
    assert told == [log.failure(poisoned.pk)]
    assert told[0].startswith("Part of this answer could not be saved")
    log.append(poisoned.chat_id, poisoned.pk, 3, answer("later"))
    log.append(healthy.chat_id, healthy.pk, 3, answer(" three"))
    await log.flush()
    assert await stored(poisoned) == []
    assert [d["content"] for _, d in await stored(healthy)] == ["one ", "two", " three"]
    log.forget(poisoned.pk)
    assert log.failure(poisoned.pk) is None


async def test_the_events_of_a_deleted_turn_fail_only_that_turn(user, other_user):
    # The log's rows name their turn without a database constraint: the writer checks the
    # batch's turns itself, and a turn deleted while it streams is refused as one would be.
    deleted, healthy = await make_turn(user), await make_turn(other_user)
    told: list[str] = []
    log = EventLog(Ticks(60))
    log.watch(deleted.pk, told.append)
    log.append(deleted.chat_id, deleted.pk, 1, answer("first "))
    await log.flush()
    await database_sync_to_async(Chat.objects.filter(pk=deleted.chat_id).delete)()

    log.append(deleted.chat_id, deleted.pk, 2, answer("second"))
    log.append(healthy.chat_id, healthy.pk, 1, answer("one"))
    await log.flush()

    assert await stored_contents(healthy) == ["one"]
    assert await stored(deleted) == []
    assert told == [log.failure(deleted.pk)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite's write lock is global")
def test_a_turns_deletion_takes_the_events_written_while_it_ran(user):
    # On PostgreSQL a batch can commit after a deletion has deleted the turn's events and before
    # it deletes the turn (the batch holds the turn, so the deletion waits for it): those rows
    # go when the deletion commits.
    chat = Chat.objects.create(owner=user)
    turn = Turn.objects.create(chat=chat, question="q")
    write_batch([PendingEvent(chat.pk, turn.pk, 1, answer("a"), {"content": "a"})])
    with transaction.atomic():
        chat.delete()
        # The log writer's batch, on its own connection, lands after the events' DELETE.
        run_in_other_thread(
            lambda: write_unchecked(turn.pk, 2)  # what a batch that held the turn left behind
        )
        assert TurnEvent.objects.filter(turn_id=turn.pk).values_list("seq", flat=True).get() == 2
    assert not TurnEvent.objects.filter(turn_id=turn.pk).exists()


def write_unchecked(turn_id: int, seq: int) -> None:
    TurnEvent.objects.bulk_create([TurnEvent(turn_id=turn_id, seq=seq, type="ANSWER", data={})])


def run_in_other_thread(work) -> None:
    def on_its_own_connection() -> None:
        try:
            work()
        finally:
            connections.close_all()

    thread = threading.Thread(target=on_its_own_connection)
    thread.start()
    thread.join()


async def test_the_flusher_keeps_relaying_other_turns_past_a_refused_event(user, other_user):
    poisoned, healthy = await make_turn(user), await make_turn(other_user)
    healthy_page = await listen(healthy.chat_id)
    log = EventLog(Ticks(0.01))
    log.append(poisoned.chat_id, poisoned.pk, 1, POISONS["nan"])

    def relayed() -> int:
        return sum(len(frame["events"]) for frame in healthy_page.frames)

    for seq in range(1, 6):
        # A paced stream: the next event comes once the flusher has relayed this one, so the
        # events span several flushes, the first of them with the refused event.
        log.append(healthy.chat_id, healthy.pk, seq, answer(str(seq)))
        await wait_until(lambda: relayed() == seq)  # noqa: B023
    frames = await frames_on(healthy_page)
    assert [e["content"] for f in frames for e in f["events"]] == ["1", "2", "3", "4", "5"]
    assert log.failure(poisoned.pk) is not None


def test_the_flusher_writes_at_the_relays_next_tick(user, settings):
    """The coalescing window ends at a tick of the relay's clock (chats.loop.ticks), not a whole
    interval after the window's first event. On a virtual clock: the times are exact (and no
    socket is read, so the pages are in this process's relay)."""
    settings.REDIS_URL = ""
    interval = 1.0

    async def main(loop):
        turn = await make_turn(user)
        page = await listen(turn.chat_id)
        log = EventLog(Ticks(interval))
        try:
            tick = tick_number(loop.time() + 0.5, interval) * interval
            await asyncio.sleep(tick - interval + 0.3 - loop.time())  # 0.3 s after a tick
            log.append(turn.chat_id, turn.pk, 1, answer("a"))
            await page.delivered.wait()
            return tick, loop.time(), await stored(turn)
        finally:
            await log.close()
            await close_relay()

    tick, relayed, rows = run_on_virtual_clock(main)
    assert relayed == pytest.approx(tick)  # 0.7 s after the event, not the 1.0 of a window
    assert [d["content"] for _, d in rows] == ["a"]


def test_what_a_paced_stream_reads_at_a_tick_goes_out_with_that_ticks_flush(user, settings):
    """The flusher waits for the same tick as the paced streams' readers, then lets them append
    what they read before it writes: one frame, no event held back a whole window (on a
    virtual clock, in this process's relay)."""
    settings.REDIS_URL = ""

    async def main(loop):
        turn = await make_turn(user)
        page = await listen(turn.chat_id)
        ticks = Ticks(0.5)
        log = EventLog(ticks)
        try:
            await ticks.wait()
            await asyncio.sleep(0.3)  # a window counted from the first event would end 0.3 s late
            log.append(turn.chat_id, turn.pk, 1, answer("before the tick"))
            await asyncio.sleep(0)  # the flusher starts, and is the tick's first waiter

            async def paced_reader() -> None:
                await ticks.wait()
                log.append(turn.chat_id, turn.pk, 2, answer("read at the tick"))

            tick = tick_number(loop.time(), 0.5) * 0.5
            await paced_reader()
            await page.delivered.wait()
            return tick, loop.time(), page.frames
        finally:
            await log.close()
            await close_relay()

    tick, relayed, frames = run_on_virtual_clock(main)
    (frame,) = frames  # one frame: the reader's event was not left for the next tick
    assert [e["content"] for e in frame["events"]] == ["before the tick", "read at the tick"]
    assert relayed == pytest.approx(tick)


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a trigger raises a transient error on PostgreSQL"
)
async def test_a_transient_refusal_is_retried_in_order_and_fails_nothing(user, other_user):
    waiting, other = await make_turn(user), await make_turn(other_user)
    waiting_page = await listen(waiting.chat_id)
    told: list[str] = []
    log = EventLog(Ticks(0.01))
    log.watch(waiting.pk, told.append)
    refusal = refusing("chats_turnevent", "data", "WAIT-FOR-IT", transient=True)
    await database_sync_to_async(refusal.__enter__)()
    try:
        log.append(waiting.chat_id, waiting.pk, 1, answer("WAIT-FOR-IT "))
        await log.flush()  # the first write is refused: its event is held for a retry
        assert await stored(waiting) == []
        log.append(waiting.chat_id, waiting.pk, 2, answer("then "))
        log.append(other.chat_id, other.pk, 1, answer("meanwhile"))
        await wait_until(lambda: stored_contents(other))
        assert await stored_contents(other) == ["meanwhile"]
        assert await stored(waiting) == []
    finally:
        await database_sync_to_async(refusal.__exit__)(None, None, None)
    await wait_until(lambda: stored_contents(waiting))  # the flusher retries every RETRY_DELAY
    log.append(waiting.chat_id, waiting.pk, 3, answer("done"))
    await log.flush()
    assert [s for s, _ in await stored(waiting)] == [1, 2, 3]
    frames = await frames_on(waiting_page)
    assert [e["seq"] for f in frames for e in f["events"]] == [1, 2, 3]
    assert told == [] and log.failure(waiting.pk) is None


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a trigger raises a transient error on PostgreSQL"
)
async def test_a_refusal_that_outlasts_the_grace_fails_the_turn(user, other_user, monkeypatch):
    monkeypatch.setattr("chats.live.event_log.TRANSIENT_GRACE", 0.5)
    monkeypatch.setattr("chats.live.event_log.RETRY_DELAY", 0.1)
    waiting, other = await make_turn(user), await make_turn(other_user)
    told: list[str] = []
    log = EventLog(Ticks(0.01))
    log.watch(waiting.pk, told.append)
    refusal = refusing("chats_turnevent", "data", "WAIT-FOR-IT", transient=True)
    await database_sync_to_async(refusal.__enter__)()
    try:
        log.append(waiting.chat_id, waiting.pk, 1, answer("WAIT-FOR-IT"))
        log.append(other.chat_id, other.pk, 1, answer("meanwhile"))
        await wait_until(lambda: told)  # past TRANSIENT_GRACE
    finally:
        await database_sync_to_async(refusal.__exit__)(None, None, None)
    assert told and told[0].startswith("Part of this answer could not be saved")
    assert "OperationalError" in told[0]
    assert await stored(waiting) == []
    assert [d["content"] for _, d in await stored(other)] == ["meanwhile"]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a trigger raises a transient error on PostgreSQL"
)
async def test_closing_the_log_writes_events_held_for_a_retry(user, monkeypatch):
    """The server's shut-down must not drop events kept back by a passing refusal."""
    monkeypatch.setattr("chats.live.event_log.RETRY_DELAY", 0.5)  # the flusher retries after close
    waiting = await make_turn(user)
    log = EventLog(Ticks(0.01))
    refusal = refusing("chats_turnevent", "data", "WAIT-FOR-IT", transient=True)
    await database_sync_to_async(refusal.__enter__)()
    try:
        log.append(waiting.chat_id, waiting.pk, 1, answer("WAIT-FOR-IT"))
        await log.flush()
        assert await stored(waiting) == []  # held for a retry
    finally:
        await database_sync_to_async(refusal.__exit__)(None, None, None)
    await log.close()
    assert [d["content"] for _, d in await stored(waiting)] == ["WAIT-FOR-IT"]
    assert log.failure(waiting.pk) is None


class HeldTicks(Ticks):
    """A minute's window whose one tick comes when the test gives it: however long a write
    takes, no tick comes between two steps of the test."""

    def __init__(self) -> None:
        super().__init__(60)
        self._given = asyncio.Event()

    async def wait(self, before=None) -> None:
        await self._given.wait()
        self._given.clear()

    def give(self) -> None:
        self._given.set()


async def test_runs_ending_in_one_window_are_written_together(user, other_user, monkeypatch):
    """A run waits for its events to be stored before its final frame. The first run to end in
    a window has them written at once; those ending later in the window are written by the
    tick's flush, together, rather than in a write each."""
    from chats.live import event_log

    writes: list[int] = []
    write = event_log._write

    async def counted(batch: list[PendingEvent]) -> None:
        writes.append(len(batch))
        await write(batch)

    monkeypatch.setattr(event_log, "_write", counted)
    turns = [await make_turn(user), await make_turn(other_user), await make_turn(user)]
    ticks = HeldTicks()
    log = EventLog(ticks)
    log.append(turns[0].chat_id, turns[0].pk, 1, answer("a1"))
    await log.flushed()
    assert writes == [1]  # at once: a quiet site's answer does not wait for the tick

    for turn, text in zip(turns[1:], ("b1", "c1"), strict=True):
        log.append(turn.chat_id, turn.pk, 1, answer(text))
    later = [asyncio.create_task(log.flushed()) for _ in turns[1:]]
    await asyncio.sleep(0)
    assert writes == [1] and not any(task.done() for task in later)

    ticks.give()
    await asyncio.gather(*later)

    assert writes == [1, 2]
    assert [await stored_contents(turn) for turn in turns] == [["a1"], ["b1"], ["c1"]]
    await log.flushed()  # nothing appended since: at once
    assert writes == [1, 2]
    await log.close()
