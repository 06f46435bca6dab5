"""The CPU cost of one relayed event, stage by stage, through the site's own functions.

    .venv/bin/python bench/stages.py [--rounds 5] [--metrics-cost] [--window SECONDS]
                                       [--read-streams 200]

Deterministic and in-process: every stage calls the site's real functions on a bench-like load,
200 turns of `bench._site.agent_messages(150)` (PLANNING, ANSWER words, a few ACTIONs, a
PLANNING update, GROUNDING, COMPLETE), processed in ticks as the site does at that load: its 200
runs and the log's flusher wake at each tick of the relay's clock, which widens the window from
EVENT_FLUSH_INTERVAL (30 ms) to EVENT_FLUSH_INTERVAL_MAX (60 ms; chats.loop.ticks, `widened`),
so 200 chats at 50 events/s make ~600 events per tick, 3 per turn (`--window 0.03` gives the
figures of a 30 ms window: 300 events a tick, 1.5 per turn). Each stage is
timed with time.perf_counter over a whole round (30,000 events unless said otherwise); a figure
is the median of 5 rounds, divided by the events the round relayed (the database stages take
the median of 5 parts of one run: see `database_stages`).

1. read: the upstream HTTP read as the site does it (httpx over `AiohttpTransport`), no parsing.
   The stand-in agent (`demo_agent.scripted.ScriptedAgent` under uvicorn, `bench._site.Upstream`)
   paces the load's 200 streams at 50 events/s, each event in a packet of its own, as in
   production; the site's client reads them (`httpx.AsyncClient(transport=http_transport())`,
   `client.stream`, `aiter_body(response)`: the body's bytes straight from aiohttp) at the
   relay's ticks (chats.loop.ticks, in the window the site's 200 runs widen it to: this
   process has no runs, so `use_window` sets it), so a read returns what arrived in one window,
   ~3 events (~1.4 at 30 ms), and the 200 reads of a tick share the event loop's wake-ups as
   they do in the site (fewer streams share them less: `--read-streams 20` costs ~1.7x a read).
   Wall time would be mostly waiting, so this stage is this process's CPU time
   (time.process_time) from the moment every stream has its first chunk to the end, over the
   events read meanwhile: the event loop's wake-ups and the socket syscalls are in it.
   Opening the request (client, connect, POST, headers) is a per-turn cost, reported per turn
   and amortised over 150 events; after the first round the streams reuse the pool's kept-alive
   connections, as turns one after another do in the site. One unpaced 5,000-event stream is
   also read, for comparison: its chunks carry many events each.
2. parse: byte chunks (a window's events each, as the paced read returns them) to typed events:
   `chats.agent.sse.aiter_events` with a `StreamReader(BigdataAdapter())`, under
   `providers.attempts.with_retries`, as `AgentStream` reads them; one stream per turn,
   advanced 3 events per turn per tick.
3. store-prep: the run's per-event work before the log: `storable_event`,
   `TurnRun._within_answer_limit`, `Transcript.apply` and `EventLog.append` (its PendingEvent).
4. write: `chats.live.event_log.write_batch(batch)`, one batch of 600 events (3 per turn) per
   tick, on a fresh migrated SQLite database, and on a fresh PostgreSQL database
   (`bench_stages_<pid>`, dropped at the end) when one answers on 127.0.0.1:5432 (user
   postgres): Django is configured once per process, so the database stages run again in a
   subprocess of this script (`--db-only`) with that DATABASE_URL.
5. view+encode: `chats.live.event_log._publish(batch)` per tick with no page open: sorts and groups
   the tick by turn, `protocol.event_view` for each event, `protocol.turn_events` and
   `protocol.encode` (the JSON text) for each turn's frame, and the relay's lookup of pages.
6. deliver: `LocalRelay.publish` of the tick's frames to one page per chat, a real
   `ChatConsumer` (its outbox's `deliver` queues the frame; its `_write_forever` task wakes, checks
   the turn's cursor and calls `send`), up to the ASGI `send` callable the server gives it.
7. ws-send: what uvicorn's websockets-sansio implementation does with a `websocket.send`:
   `websockets.ServerProtocol.send_text(text.encode())` + `data_to_send()`, per frame.
8. turn start / turn finish / search index, per turn and amortised over 150 events:
   as the site batches them (chats/loop/batches.py), in 5 batches of 40:
   `services.turn_start_many(...)` + `cards.turn_card_frame("turn.started", ...)` per turn;
   `finishes.store_finishes(...)` (turn_finish_many, then the final cards);
   `chats.library.search._index_chats` for the 200 chats at once. One user per chat, a fresh
   chat per turn (the bench's first questions).

Figures are CPU-bound, single-thread costs of the code itself in an otherwise idle process
whose garbage collector is set as a serving process sets it (`researchsite.heap`: the youngest
generation collected every 10,000 allocations, start-up's heap frozen).
The server also pays what this does not see: GIL switches between the event loop and the
database thread, the event loop scheduling 200 runs and the flusher, and the websockets' socket
writes (only the read stage, timed as process CPU, includes its loop and syscalls). Compare the
total with bench/streaming.py's "server CPU µs/event", which measures the whole server under
the same load. The database rows are wall time (with PostgreSQL, round trips and commits
included); a table below them gives this process's CPU time for the same calls. On a shared
machine, expect a run-to-run spread of 10-20%.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))  # run from anywhere
sys.path.insert(0, str(BENCH))

from _machine import machine  # noqa: E402
from _site import (  # noqa: E402
    PYTHON,
    UPSTREAM_CHAT_ID,
    Upstream,
    agent_messages,
    invocation,
    question,
    setup_django,
    table,
)

from demo_agent.wire import sse_event  # noqa: E402

TURNS = 200
EVENTS = 150  # per turn
TICK_EVENTS = 600  # per tick: 200 chats x 50 events/s x the window (`use_window`)
WINDOW = 0.06  # seconds between the relay's ticks at this load (`use_window`)
READ_STREAMS = TURNS  # `--read-streams`
READ_RATE = 50.0  # events per second per stream
READ_EVENTS = 50  # per paced stream (1 s a round)
UNPACED_EVENTS = 5000
READS = [0]  # chunks the read stage was given, to tell how many events a read returns
GOAL_US = 50.0  # on SQLite and on PostgreSQL
QUESTION = question(events=EVENTS, rate=50)


# --- Set-up ----------------------------------------------------------------------------------


def migrated_site(database_url: str) -> None:
    """The site's settings on `database_url`, migrated; limits per user lifted."""
    setup_django(
        DATABASE_URL=database_url,
        REDIS_URL="",
        DEMO_AGENT_ENABLED="false",
        SECRET_KEY="bench-stages-not-secret",  # else settings keep one in .local/
        LOG_LEVEL="WARNING",
        AGENT_MAX_CONCURRENT_TURNS="100000",
        WS_MAX_SOCKETS_PER_USER="100000",
    )
    from django.core.management import call_command

    from researchsite.heap import freeze_startup_heap, tune_collector

    call_command("migrate", verbosity=0)
    # The collector as a serving process has it (researchsite/asgi.py): the youngest generation
    # collected less often, and what start-up left alive out of its sight.
    tune_collector()
    freeze_startup_heap()


def new_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed, as uvicorn's `--loop auto` picks it."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def tick_plan(turns: int, events: int, per_tick: int) -> list[list[tuple[int, int]]]:
    """[(turn index, seq), ...] for each tick: every turn moves on its share of the tick."""
    rate = per_tick / turns
    plan = []
    for tick in range(math.ceil(events / rate)):
        low, high = int(tick * rate), min(events, int((tick + 1) * rate))
        plan.append([(i, seq) for i in range(turns) for seq in range(low + 1, high + 1)])
    return plan


PLAN = tick_plan(TURNS, EVENTS, TICK_EVENTS)


def site_window() -> float:
    """The relay's window in the site at this load: its 200 runs and the log's flusher wake at
    each tick, which widens the window (chats.loop.ticks)."""
    from django.conf import settings

    from chats.loop.ticks import widened

    interval, longest = settings.EVENT_FLUSH_INTERVAL, settings.EVENT_FLUSH_INTERVAL_MAX
    return widened(interval, longest, TURNS + 1)


def use_window(window: float) -> None:
    """Process the load in ticks `window` apart: each tick's events, and the read stage's reads
    (this process has no runs to widen the window as the site's 200 do)."""
    global WINDOW, TICK_EVENTS, PLAN
    from django.conf import settings

    WINDOW = window
    TICK_EVENTS = round(TURNS * READ_RATE * window)
    PLAN = tick_plan(TURNS, EVENTS, TICK_EVENTS)
    settings.EVENT_FLUSH_INTERVAL = settings.EVENT_FLUSH_INTERVAL_MAX = window


CHUNKS = [sse_event(UPSTREAM_CHAT_ID, m) for m in agent_messages(EVENTS)]


def median_round(rounds: int, one_round: Callable[[], float]) -> float:
    """The median of `rounds` runs of `one_round`, which returns the seconds it measured."""
    return statistics.median(one_round() for _ in range(rounds))


def parsed_events() -> list[Any]:
    """The typed events of one turn, as the parser makes them (not timed)."""
    from chats.agent.providers.bigdata import BigdataAdapter
    from chats.agent.sse import StreamReader

    reader = StreamReader(BigdataAdapter())
    events = [e for chunk in CHUNKS for e in reader.feed(chunk)] + reader.close()
    assert len(events) == EVENTS, len(events)
    return events


def pending_ticks(ids: list[tuple[int, int]], turns: int = TURNS) -> list[list[Any]]:
    """The event log's batches, tick by tick, for turns `ids` [(chat id, turn id), ...]."""
    from chats.live.event_log import PendingEvent
    from chats.run.storable import storable_event

    prepared = [storable_event(e)[:2] for e in parsed_events()]
    return [
        [PendingEvent(ids[i][0], ids[i][1], seq, *prepared[seq - 1]) for i, seq in tick]
        for tick in (PLAN if turns == TURNS else tick_plan(turns, EVENTS, turns))
    ]


# --- 1. read ---------------------------------------------------------------------------------


async def read_stream(url: str, text: str, counts: list[int], index: int, opened: Any) -> None:
    """One run's HTTP read as `AgentStream` does it, without the parsing."""
    import httpx

    from chats.agent import http_transport, stream_timeout
    from chats.agent.aiohttp_transport import aiter_body
    from chats.agent.providers.bigdata import request_body
    from chats.agent.request import AgentRequest

    timeout = stream_timeout(connect=10.0, idle=120.0)
    headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}  # as the site's
    async with (
        httpx.AsyncClient(timeout=timeout, transport=http_transport()) as client,
        client.stream(
            "POST", url, json=request_body(AgentRequest(message=text)), headers=headers
        ) as response,
    ):
        async for chunk in aiter_body(response):
            first = not counts[index]
            counts[index] += chunk.count(b"\n\n")  # events end with a blank line
            READS[0] += 1
            if first:
                opened(index)


async def read_paced(url: str) -> tuple[float, float]:
    """(CPU seconds per event once every stream flows, CPU seconds per stream opened)."""
    counts = [0] * READ_STREAMS
    waiting = set(range(READ_STREAMS))
    mark: list[float] = []

    def opened(index: int) -> None:
        waiting.discard(index)
        if not waiting:
            mark.extend([time.process_time(), sum(counts)])

    text = question(events=READ_EVENTS, rate=READ_RATE)
    started = time.process_time()
    await asyncio.gather(*(read_stream(url, text, counts, i, opened) for i in range(READ_STREAMS)))
    ended = time.process_time()
    total = sum(counts)
    assert total == READ_STREAMS * READ_EVENTS, total
    cpu_at_mark, events_at_mark = mark
    per_event = (ended - cpu_at_mark) / (total - events_at_mark)
    # Streams opened early read a few events before the last one opened: not opening costs.
    opening = cpu_at_mark - started - events_at_mark * per_event
    return per_event, opening / READ_STREAMS


async def read_unpaced(url: str) -> float:
    counts = [0]
    started = time.process_time()
    await read_stream(url, question(events=UNPACED_EVENTS), counts, 0, lambda i: None)
    assert counts[0] == UNPACED_EVENTS, counts
    return (time.process_time() - started) / UNPACED_EVENTS


def stage_read(runner: asyncio.Runner, rounds: int) -> dict[str, float]:
    """Turns after the first reuse the pool's connections (`http_transport`), as in the site."""
    from chats.agent import close_http_sessions

    with Upstream() as upstream:
        runner.run(read_unpaced(upstream.url))  # warm-up: imports, first connection
        READS[0] = 0
        paced = [runner.run(read_paced(upstream.url)) for _ in range(rounds)]
        paced_reads = READS[0]
        unpaced = statistics.median(runner.run(read_unpaced(upstream.url)) for _ in range(rounds))
        runner.run(close_http_sessions())  # the loop's pool, as the server's shutdown closes it
    return {
        "read": statistics.median(p[0] for p in paced),
        "open_per_turn": statistics.median(p[1] for p in paced),
        "unpaced": unpaced,
        "events_per_read": rounds * READ_STREAMS * READ_EVENTS / paced_reads,
    }


# --- 2. parse --------------------------------------------------------------------------------


async def parse_round() -> float:
    from chats.agent.providers.attempts import with_retries
    from chats.agent.providers.bigdata import BigdataAdapter
    from chats.agent.sse import StreamReader, aiter_events

    per_read = max(1, round(TICK_EVENTS / TURNS))

    async def body():  # the chunks aiter_body(response) yields: what arrived in one window
        for start in range(0, len(CHUNKS), per_read):
            yield b"".join(CHUNKS[start : start + per_read])

    streams = []
    for _ in range(TURNS):
        reader = StreamReader(BigdataAdapter())
        attempt = functools.partial(aiter_events, body(), reader)
        streams.append(with_retries(attempt, max_retries=3))
    events = 0
    started = time.perf_counter()
    for tick in PLAN:
        for i, _seq in tick:
            await anext(streams[i])
            events += 1
    for stream in streams:  # the end of each stream
        async for _ in stream:
            events += 1
    elapsed = time.perf_counter() - started
    assert events == TURNS * EVENTS, events
    return elapsed / events


# --- 3. store-prep ---------------------------------------------------------------------------


async def store_prep_round(events: list[Any]) -> float:
    from django.conf import settings

    from chats.agent.transcript import Transcript
    from chats.live.event_log import EventLog
    from chats.loop.ticks import Ticks
    from chats.run.storable import storable_event
    from chats.run.turn_run import TurnRun

    log = EventLog(Ticks(60))  # its flusher waits a minute: nothing is written here
    runs = []
    for i in range(TURNS):
        run = TurnRun.__new__(TurnRun)  # the run's per-event state, without a turn in a database
        run.chat_id, run.turn_id = i + 1, 1000 + i
        run.transcript, run.sanitized_events, run.answer_chars = Transcript(), 0, 0
        run.max_answer_chars = settings.AGENT_MAX_ANSWER_CHARS  # as TurnRun._read sets it
        runs.append(run)
    started = time.perf_counter()
    for tick in PLAN:
        for i, seq in tick:
            run = runs[i]
            event, data, replaced = storable_event(events[seq - 1])
            run.sanitized_events += replaced
            event, data, _cut = run._within_answer_limit(event, data)
            run.transcript.apply(event)
            log.append(run.chat_id, run.turn_id, seq, event, data)
    elapsed = time.perf_counter() - started
    assert len(log._pending) == TURNS * EVENTS
    assert all(r.transcript.completed for r in runs)
    if log._flusher is not None:
        log._flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await log._flusher
    return elapsed / (TURNS * EVENTS)


# --- 5. view+encode, 6. deliver, 7. ws-send --------------------------------------------------


async def view_encode_round(ticks: list[list[Any]]) -> float:
    from chats.live.event_log import _publish
    from chats.live.relay import get_relay

    assert not get_relay().subscribers  # no page open: the relay only looks them up
    started = time.perf_counter()
    for batch in ticks:
        await _publish(batch)
    return (time.perf_counter() - started) / (TURNS * EVENTS)


class Capture:
    """A page as the relay sees it, keeping each frame (to feed the later stages)."""

    def __init__(self, chat_id: int, frames: list[tuple[int, Any]]) -> None:
        self.chat_id, self.frames = chat_id, frames

    def deliver(self, frame: Any) -> None:
        self.frames.append((self.chat_id, frame))

    def missed(self) -> None:
        raise AssertionError("no frame is lost in memory")


async def capture_frames(
    ticks: list[list[Any]], received_at: float = 0.0
) -> list[list[tuple[int, Any]]]:
    """Each tick's (chat id, RelayFrame) as `_publish` makes them (not timed); `received_at`
    stamps them as the event log does, so that delivering them times the event delay."""
    from chats.live.event_log import _publish
    from chats.live.relay import get_relay

    relay = get_relay()
    frames: list[tuple[int, Any]] = []
    pages = [Capture(chat_id, frames) for chat_id in range(1, TURNS + 1)]
    for page in pages:
        await relay.join(page.chat_id, page)
    captured = []
    for batch in ticks:
        await _publish(batch, received_at)
        captured.append(list(frames))
        frames.clear()
    for page in pages:
        await relay.leave(page.chat_id, page)
    return captured


def open_page(chat_id: int, sent: list[str]) -> Any:
    """A `ChatConsumer` as `connect` leaves it, its ASGI `send` keeping the text it is given."""
    from django.conf import settings

    from chats.live.follow import FrameOutbox
    from chats.pages.consumer import ChatConsumer

    page = ChatConsumer.__new__(ChatConsumer)  # no scope, session or database: only the writer
    page.start_page_state()  # as `connect` starts it
    page.chat = object()
    page.joined_chat_id = chat_id
    page.outbox = FrameOutbox(chat_id=chat_id, max_queued=settings.WS_MAX_QUEUED_FRAMES)

    async def base_send(message: dict[str, Any]) -> None:
        sent.append(message["text"])

    page.base_send = base_send
    return page


async def deliver_round(
    captured: list[list[tuple[int, Any]]], clock: Callable[[], float] = time.perf_counter
) -> float:
    from chats.live.relay import get_relay

    relay = get_relay()
    sent: list[str] = []
    pages = [open_page(chat_id, sent) for chat_id in range(1, TURNS + 1)]
    turn_of_chat = {chat_id: frame.turn_id for chat_id, frame in captured[0]}
    for page in pages:
        page.cursors = {turn_of_chat[page.joined_chat_id]: 0}
        await relay.join(page.joined_chat_id, page.outbox)
        page.writer = asyncio.create_task(page._write_forever())
    await asyncio.sleep(0)  # the writers wait for their first frame
    started = clock()
    for frames in captured:
        await relay.publish(frames)
        await asyncio.sleep(0)  # every page's writer runs once, sending what it was queued
    elapsed = clock() - started
    for page in pages:
        page.writer.cancel()
        await relay.leave(page.joined_chat_id, page.outbox)
    await asyncio.gather(*(p.writer for p in pages), return_exceptions=True)
    assert len(sent) == sum(len(f) for f in captured), len(sent)
    assert all(p.cursors[turn_of_chat[p.joined_chat_id]] == EVENTS for p in pages)
    return elapsed / (TURNS * EVENTS)


def open_websockets(count: int) -> list[Any]:
    """Server-side websockets after the handshake, as uvicorn's websockets-sansio makes them."""
    import logging

    from websockets.client import ClientProtocol
    from websockets.server import ServerProtocol
    from websockets.uri import parse_uri

    servers = []
    for _ in range(count):
        client = ClientProtocol(parse_uri("ws://127.0.0.1/ws/chats/1/"))
        client.send_request(client.connect())
        server = ServerProtocol(max_size=2**20, logger=logging.getLogger("uvicorn.error"))
        server.receive_data(b"".join(client.data_to_send()))
        (request,) = server.events_received()
        server.send_response(server.accept(request))
        server.data_to_send()
        servers.append(server)
    return servers


def ws_send_round(
    captured: list[list[tuple[int, Any]]], clock: Callable[[], float] = time.perf_counter
) -> float:
    servers = dict(zip(range(1, TURNS + 1), open_websockets(TURNS), strict=True))
    written = 0
    started = clock()
    for frames in captured:
        for chat_id, frame in frames:
            conn = servers[chat_id]
            conn.send_text(frame.text.encode())
            written += len(b"".join(conn.data_to_send()))
    elapsed = clock() - started
    assert written > sum(len(f.text) for frames in captured for _, f in frames)
    return elapsed / (TURNS * EVENTS)


# --- 4. write, 8. turn start / finish / index (the database stages) --------------------------


def database_stages(rounds: int) -> dict[str, dict[str, float]]:
    """Median wall and CPU seconds: per event for the write, per turn for the rest.

    The 200 turns start in `rounds` groups, all 200 then stream (the write, its 100 ticks in
    `rounds` parts), finish in the same groups, and their chats are indexed, 200 at once, once
    a round (the documents deleted in between). One turn goes through it all first, untimed.
    """
    import django.apps
    from django.contrib.auth import get_user_model
    from django.db import connection

    from chats.agent.transcript import Transcript
    from chats.library.search import _index_chats
    from chats.live.event_log import write_batch
    from chats.models import Chat, ChatSearchDocument
    from chats.run.cards import turn_card_frame
    from chats.run.finishes import Finish, store_finishes
    from chats.run.rendering import turn_end
    from chats.services import TurnAsk, turn_start_many

    user_model = get_user_model()
    user_model.objects.bulk_create(
        user_model(username=f"bench{i}", password="!") for i in range(TURNS + 1)
    )
    users = list(user_model.objects.order_by("pk"))
    Chat.objects.bulk_create(Chat(owner=user) for user in users)
    chats = list(Chat.objects.order_by("pk"))
    events = parsed_events()
    figures: dict[str, list[tuple[float, float]]] = {}

    def timed(name: str, per: int, work: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        result = work()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        figures.setdefault(name, []).append((wall / per, cpu / per))
        return result

    def start(group: list[Any]) -> list[Any]:
        """As a burst of asks starts (chats/run/asks.py): one batch, then each card."""
        asks = [TurnAsk(chat=chat, question=QUESTION, research_effort="standard") for chat in group]
        turns = []
        for started in turn_start_many(asks):
            turn_card_frame("turn.started", started.turn, item=started.card_item)
            turns.append(started)
        return turns

    def finish(turns: list[Any]) -> None:
        """As runs that end together are rendered (chats/run/rendering.py) and stored
        (finishes.get_finish_batches): one batch."""
        ends = [
            Finish(turn_end(s.turn.pk, Transcript.from_events(events), "complete"), s.siblings)
            for s in turns  # the transcript the run applied
        ]
        for stored in store_finishes(ends):
            assert stored.turn is not None and stored.card is not None

    def stream(ticks: list[list[Any]]) -> None:
        for batch in ticks:
            write_batch(batch)

    # Warm-up: templates, queries and statements seen once.
    (warm,) = start(chats[:1])
    stream(pending_ticks([(warm.turn.chat_id, warm.turn.pk)], turns=1)[:5])
    finish([warm])
    _index_chats([warm.turn.chat_id], apps=django.apps.apps)
    chats = chats[1:]

    size = math.ceil(TURNS / rounds)
    groups = [chats[i : i + size] for i in range(0, TURNS, size)]
    turns = []
    for group in groups:
        turns += timed("turn start", len(group), lambda g=group: start(g))
    ticks = pending_ticks([(s.turn.chat_id, s.turn.pk) for s in turns])
    per = math.ceil(len(ticks) / rounds)
    for part in range(0, len(ticks), per):
        done = ticks[part : part + per]
        timed("write", sum(map(len, done)), lambda d=done: stream(d))
    for part in range(0, TURNS, size):
        group_turns = turns[part : part + size]
        timed("turn finish", len(group_turns), lambda g=group_turns: finish(g))
    ids = [chat.pk for chat in chats]
    for _ in range(rounds):
        ChatSearchDocument.objects.filter(chat_id__in=ids).delete()
        timed("search index", len(ids), lambda: _index_chats(ids, apps=django.apps.apps))
    result = {
        name: {
            "wall": statistics.median(w for w, _ in values),
            "cpu": statistics.median(c for _, c in values),
        }
        for name, values in figures.items()
    }
    result["vendor"] = {"name": connection.vendor}  # type: ignore[dict-item]
    return result


def postgres_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=0.5):
            pass
    except OSError:
        return False
    return True


def psql(sql: str) -> None:
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c", sql],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def postgres_stages(rounds: int, window: float) -> dict[str, Any] | str:
    """The database stages in a subprocess on a fresh PostgreSQL database; or why not."""
    if not postgres_available():
        return "PostgreSQL does not answer on 127.0.0.1:5432"
    name = f"bench_stages_{os.getpid()}"
    try:
        psql(f"CREATE DATABASE {name}")
    except (OSError, subprocess.CalledProcessError) as error:
        return f"CREATE DATABASE failed ({error})"
    try:
        env = {**os.environ, "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{name}"}
        done = subprocess.run(
            [PYTHON, __file__, "--db-only", "--rounds", str(rounds), "--window", str(window)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    lines = [line for line in done.stdout.splitlines() if line.startswith("STAGES")]
    if done.returncode or not lines:
        return f"the PostgreSQL run failed: {done.stderr.strip()[-500:]}"
    return json.loads(lines[-1].removeprefix("STAGES"))


# --- Report ----------------------------------------------------------------------------------

COVERS = {
    "read": "aiohttp, opened through httpx: socket, HTTP body, its bytes (paced)",
    "read: open": "per turn: AsyncClient, connect, POST, response headers (/150)",
    "parse": "aiter_events: lines, JSON, BigdataAdapter -> AgentEvent (with_retries layer)",
    "store-prep": "storable_event, answer limit, Transcript.apply, EventLog.append",
    "write": "write_batch: COPY (PostgreSQL) or multi-row INSERTs (SQLite) + commit per tick",
    "view+encode": "_publish: group by turn, event_view, turn_events, encode (compact_json)",
    "deliver": "LocalRelay.publish -> FrameOutbox.deliver, ChatConsumer._write_forever, send",
    "ws-send": "websockets ServerProtocol.send_text + data_to_send (uvicorn sansio)",
    "turn start": "turn_start_many, batches of 40 + turn_card_frame('turn.started') (/150)",
    "turn finish": "finishes.store_finishes, batches of 40, with the final cards (/150)",
    "search index": "_index_chats for 200 chats at once (/150)",
}


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.2f}"


def report(common: dict[str, float], db: dict[str, Any], label: str) -> float:
    """Print the table for one database; return its total in seconds per event."""
    per_event = dict(common)
    per_event["write"] = db["write"]["wall"]
    for name in ("turn start", "turn finish", "search index"):
        per_event[name] = db[name]["wall"] / EVENTS
    order = [
        *("read", "read: open", "parse", "store-prep", "write", "view+encode", "deliver"),
        *("ws-send", "turn start", "turn finish", "search index"),
    ]
    total = sum(per_event[name] for name in order)
    rows = [
        [name, us(per_event[name]), f"{per_event[name] / total:.1%}", COVERS[name]]
        for name in order
    ]
    rows.append(["**total**", f"**{us(total)}**", "100.0%", f"{label}, per relayed event"])
    print(f"\n### {label}\n")
    headers = ["stage", "µs per event", "share of total", "what it covers"]
    print(table(headers, rows, frozenset({0, 3}), mark_alignment=True))
    return total


def report_database(results: dict[str, dict[str, Any]]) -> None:
    print("\n### Database stages: wall and this process's CPU\n")
    rows = []
    for label, db in results.items():
        rows.append([f"write ({label})", us(db["write"]["wall"]), us(db["write"]["cpu"]), "event"])
        for name in ("turn start", "turn finish", "search index"):
            rows.append([f"{name} ({label})", us(db[name]["wall"]), us(db[name]["cpu"]), "turn"])
    print(
        table(["stage", "wall µs", "CPU µs", "per"], rows, frozenset({0, 3}), mark_alignment=True)
    )


def metrics_switch(on: bool) -> None:
    """METRICS_ENABLED, within one process: the hot path's metric objects, or no-op ones."""
    from chats import metrics
    from chats.live import event_log
    from chats.pages import consumer

    off = metrics.NoMetric()
    event_log.EVENTS_RELAYED = metrics.EVENTS_RELAYED if on else off
    event_log.EVENT_LOG_FLUSH = metrics.EVENT_LOG_FLUSH if on else off
    consumer.EVENT_DELAY = metrics.EVENT_DELAY if on else off
    consumer.OPEN_WEBSOCKETS = metrics.OPEN_WEBSOCKETS if on else off


def metrics_cost(rounds: int) -> None:
    """The stages the metrics touch (store-prep, view+encode, deliver), metrics off and on in
    turns, in one process; frames stamped with their events' receipt time, as the log does."""
    print("\n## Metrics' cost: store-prep + view+encode + deliver, off and on in turns\n")
    with asyncio.Runner(loop_factory=new_loop) as runner:
        events = parsed_events()
        ticks = pending_ticks([(i + 1, 1000 + i) for i in range(TURNS)])
        captured = runner.run(capture_frames(ticks, received_at=time.time()))
        costs: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(rounds):
            for on in (False, True):
                metrics_switch(on)
                costs[on].append(
                    runner.run(store_prep_round(events))
                    + runner.run(view_encode_round(ticks))
                    + runner.run(deliver_round(captured))
                )
        metrics_switch(True)
    off, on = statistics.median(costs[False]), statistics.median(costs[True])
    rows = [
        ["off", us(off), ", ".join(us(c) for c in costs[False])],
        ["on", us(on), ", ".join(us(c) for c in costs[True])],
    ]
    print(
        table(
            ["metrics", "median µs/event", "each round"],
            rows,
            frozenset({0, 2}),
            mark_alignment=True,
        )
    )
    print(
        f"\nOn / off: {on / off:.3f}x ({(on - off) * 1e6:+.2f} µs per relayed event over"
        f" {rounds} rounds each; the other stages do not touch the metrics)."
    )


def main() -> None:
    global READ_STREAMS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--metrics-cost", action="store_true", help="only the metrics on / off comparison"
    )
    parser.add_argument(
        "--window",
        type=float,
        help="seconds between ticks (default: the window the site's relay takes at this load)",
    )
    parser.add_argument(
        "--read-streams",
        type=int,
        default=READ_STREAMS,
        help="paced streams the read stage reads at once (default: the load's 200)",
    )
    parser.add_argument("--db-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.db_only:  # the PostgreSQL run: DATABASE_URL is set by the parent
        migrated_site(os.environ["DATABASE_URL"])
        use_window(args.window)
        print("STAGES" + json.dumps(database_stages(args.rounds)), flush=True)
        return

    READ_STREAMS = args.read_streams
    began = time.perf_counter()
    print(f"## Cost per relayed event, by stage (`{invocation()}`)\n")
    print(machine())
    with tempfile.TemporaryDirectory(prefix="researchsite-stages-") as directory:
        migrated_site(f"sqlite:///{directory}/stages.sqlite3")
        use_window(args.window or site_window())
        rounds = args.rounds
        if args.metrics_cost:
            metrics_cost(rounds)
            return
        common: dict[str, float] = {}
        with asyncio.Runner(loop_factory=new_loop) as runner:
            read = stage_read(runner, rounds)
            common["read"] = read["read"]
            common["read: open"] = read["open_per_turn"] / EVENTS
            common["parse"] = statistics.median(runner.run(parse_round()) for _ in range(rounds))
            events = parsed_events()
            common["store-prep"] = statistics.median(
                runner.run(store_prep_round(events)) for _ in range(rounds)
            )
            ticks = pending_ticks([(i + 1, 1000 + i) for i in range(TURNS)])
            common["view+encode"] = statistics.median(
                runner.run(view_encode_round(ticks)) for _ in range(rounds)
            )
            captured = runner.run(capture_frames(ticks))
            common["deliver"] = statistics.median(
                runner.run(deliver_round(captured)) for _ in range(rounds)
            )
        common["ws-send"] = median_round(rounds, lambda: ws_send_round(captured))
        databases: dict[str, dict[str, Any]] = {"SQLite": database_stages(rounds)}
    postgres = postgres_stages(rounds, WINDOW)
    if isinstance(postgres, str):
        print(f"\nPostgreSQL skipped: {postgres}")
    else:
        databases["PostgreSQL"] = postgres

    frames = sum(len(f) for f in captured)
    print(
        f"\nLoad: {TURNS} turns x {EVENTS} events, {len(PLAN)} ticks of {TICK_EVENTS} events"
        f" {WINDOW * 1e3:g} ms apart ({TURNS * EVENTS / frames:.2f} events per frame);"
        f" median of {rounds} rounds."
    )
    print(
        f"Read: {READ_STREAMS} streams of {READ_EVENTS} events paced at {READ_RATE:g} events/s"
        f" ({read['events_per_read']:.2f} events per read), process CPU per event once all"
        f" flow; one unpaced {UNPACED_EVENTS:,}-event stream costs"
        f" {us(read['unpaced'])} µs/event (many events per read). Opening a request:"
        f" {us(read['open_per_turn'])} µs per turn."
    )
    totals = {label: report(common, db, label) for label, db in databases.items()}
    report_database(databases)
    print("\nPer turn (stage 8):")
    for label, db in databases.items():
        parts = ", ".join(
            f"{name} {db[name]['wall'] * 1e3:.2f} ms"
            for name in ("turn start", "turn finish", "search index")
        )
        print(f"- {label}: {parts} (search index per chat, 200 at once)")
    print()
    for label, total in totals.items():
        word = "met" if total * 1e6 <= GOAL_US else "MISSED"
        print(f"GOAL {word:<7} per relayed event ({label}): {us(total)} µs (≤ {GOAL_US:g} µs)")
    print(f"(ran in {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
