"""`GET /api/v1/turns/{id}/events`: a turn's events as `text/event-stream`, as its page gets them.

The stream follows the turn's chat as a page's socket does (`chats/live/follow.py`): it joins the
relay, then reads the event log after its cursor (the `Last-Event-ID` header, else 0), so it
sees every event at least once, and seqs dedupe; a frame that does not follow on from the
cursor, or a follower fallen behind, is caught up from the log. Each of the turn's events is one
server-sent event: `id:` its seq, after which `Last-Event-ID` resumes, `event:` its type
(`ANSWER`, `ACTION`, ...), `data:` its JSON as the page gets it, cut from the text of the frame
that carried it (`protocol.event_stream_text`), one chunk written per frame; the log's events
are sent the same way. It ends after `event: turn.finished`, whose `data:` is the frame the page
gets (the finished turn's card); a finished turn replays its events and ends. `turn.notice`
frames (a retry's notice) pass without an id. A comment line every KEEPALIVE_SECONDS keeps
proxies from closing a quiet stream; the stream ends if its token stops being usable meanwhile.

A stream counts as one of its user's live connections (WS_MAX_SOCKETS_PER_USER, pages and
streams together, `chats.live.limits`). Its database work goes to the process's one database
thread, as a page's does (`chats.loop.database_thread`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja.errors import HttpError

from chats.api.models import ApiToken
from chats.api.selectors import api_token_is_usable
from chats.live.follow import CATCH_UP, FrameOutbox, Placement, log_chunks, place_events
from chats.live.limits import get_socket_leases, socket_close, socket_open
from chats.live.protocol import EventView, encode, event_stream_text, turn_events
from chats.live.relay import RelayFrame, get_relay
from chats.loop.database_thread import on_database_thread
from chats.models import Turn
from chats.run.cards import turn_card_frame
from chats.selectors import turn_events_after, turn_get, turn_get_readable

KEEPALIVE_SECONDS = 15.0
KEEPALIVE = "keepalive"  # an outbox item: time to say something on a quiet stream
DESCRIPTION = (
    "Server-sent events, one for each of the turn's events: `id:` its sequence number (from 1), "
    "`event:` its type (ANSWER, ACTION, PLANNING, ...), `data:` its JSON as the chat page "
    'receives it ({"seq": ..., "type": ..., "content"?, "status"?, "activity"?, ...}); then '
    "`event: turn.finished` (no id) with the finished turn's card, and the stream ends. "
    "`event: turn.notice` (no id): the agent is being retried. Send `Last-Event-ID` to resume "
    "after that event."
)


async def turn_event_stream(request: HttpRequest, token: ApiToken, turn_id: int) -> HttpResponse:
    after = _last_event_id(request.headers.get("Last-Event-ID"))
    slot = f"api-stream.{uuid.uuid4().hex}"
    turn = await on_database_thread(_open, user=token.owner, turn_id=turn_id, slot=slot)
    return _response(TurnEvents(turn, after, token.pk, slot))


async def asked_turn_stream(
    token: ApiToken, chat_id: int, ask: Callable[[], Awaitable[Turn]]
) -> HttpResponse:
    """The event stream of a turn `ask` is about to start in the chat, in the answer to the
    question: the chat is followed from before the ask, so every frame of the turn comes from
    the relay, as to the page that asked, and none has to be read back from the log."""
    slot = f"api-stream.{uuid.uuid4().hex}"
    await on_database_thread(_open_slot, user=token.owner, slot=slot)
    outbox = FrameOutbox(chat_id=chat_id, max_queued=settings.WS_MAX_QUEUED_FRAMES)
    relay = get_relay()
    await relay.join(chat_id, outbox)
    try:
        turn = await ask()
    except BaseException:
        await relay.leave(chat_id, outbox)
        await socket_close(slot)
        raise
    return _response(TurnEvents(turn, 0, token.pk, slot, following=outbox))


def _response(events: TurnEvents) -> HttpResponse:
    response = EventStreamResponse(events)
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
    return response


def _last_event_id(header: str | None) -> int:
    if header is None or header.strip() == "":
        return 0
    value = header.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise HttpError(400, "Last-Event-ID must be an event's sequence number.")
    return int(value)


def _open(*, user, turn_id: int, slot: str) -> Turn:
    """A turn the user may read (their own, or their team's: else 404), with a live connection
    counted for the stream (else 429)."""
    turn = turn_get_readable(user=user, turn_id=turn_id)
    _open_slot(user=user, slot=slot)
    return turn


def _open_slot(*, user, slot: str) -> None:
    """Count the stream as one of the user's live connections, else refuse it (429)."""
    if not socket_open(user_id=user.pk, channel_name=slot, limit=settings.WS_MAX_SOCKETS_PER_USER):
        raise HttpError(
            429,
            f"You have {settings.WS_MAX_SOCKETS_PER_USER} live connections open (chat pages and"
            " event streams). Close one, then try again.",
        )


async def _read_log(turn_id: int, after_seq: int, limit: int) -> list[EventView]:
    return await on_database_thread(
        turn_events_after, turn_id=turn_id, after_seq=after_seq, limit=limit
    )


def _finished_card(turn_id: int) -> RelayFrame | None:
    """The finished turn's `turn.finished` frame as the page gets it, or None while it streams."""
    turn = turn_get(turn_id=turn_id)
    if not turn.is_finished:
        return None
    return encode(turn_card_frame("turn.finished", turn))


class TurnEvents:
    """One stream, as the async iterator of its response's bytes: its cursor, its outbox on the
    relay, and what it writes next.

    A plain async iterator (`__anext__`), not an async generator: every frame passes through
    it, and a generator's own machinery cost more per frame than all the rest of the way from
    the relay to the socket (bench/api_stream.py). The server calls `aclose` when the response
    ends, however it ends (the client may have gone).
    """

    def __init__(
        self,
        turn: Turn,
        after: int,
        token_id: int,
        slot: str,
        *,
        following: FrameOutbox | None = None,
    ) -> None:
        """`following`: an outbox that has followed the chat since before the turn began (the
        stream of a question asked): the relay brings it all the turn's frames."""
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.cursor = after
        self.token_id = token_id
        self.slot = slot
        self.outbox = following or FrameOutbox(
            chat_id=turn.chat_id, max_queued=settings.WS_MAX_QUEUED_FRAMES
        )
        self.joined = following is not None
        self.pending: deque[bytes] = deque()  # written next, before anything else
        self.keepalive: asyncio.TimerHandle | None = None
        self.started = False
        self.ended = False  # nothing more to write once `pending` is empty
        self.closed = False

    def __aiter__(self) -> TurnEvents:
        return self

    async def __anext__(self) -> bytes:
        if self.pending:
            return self.pending.popleft()
        if not self.started:
            await self._start()
            if self.pending:
                return self.pending.popleft()
        while not self.ended:
            item = None  # the last frame let go: a quiet stream must not hold it while it waits
            item = await self.outbox.next()
            if item is CATCH_UP:  # frames may have been lost: the log has them
                chunks = await self._from_log(or_end=True)
            elif item is KEEPALIVE:
                if not await on_database_thread(api_token_is_usable, token_id=self.token_id):
                    break
                chunks = [b": keepalive\n\n"]
                self._keep_alive()
            elif item.turn_id != self.turn_id:
                continue  # another turn of the chat
            elif item.kind == "turn.events":
                placement = place_events(item, self.cursor)
                if placement is Placement.NEXT:  # the usual case, and the cheapest
                    self.cursor = item.last_seq
                    return event_stream_text(item).encode()
                if placement is Placement.SEEN:
                    continue
                chunks = await self._from_log()  # events were lost on the way
            elif item.kind == "turn.finished":
                chunks = await self._from_log()
                chunks.append(event_stream_text(item).encode())
                self.ended = True
            elif item.kind == "turn.notice":
                return event_stream_text(item).encode()
            else:
                continue  # turn.started, turn.checked: not this stream's
            if chunks:
                self.pending.extend(chunks[1:])
                return chunks[0]
        if self.pending:
            return self.pending.popleft()
        raise StopAsyncIteration

    async def _start(self) -> None:
        """Follow the chat, then read the log after the cursor (nothing falls between), and end
        at once if the turn has ended."""
        self.started = True
        # Held from the first read on: a response never read leaves a row whose lease lapses.
        get_socket_leases().hold(self.slot)
        self._keep_alive()
        if not self.joined:
            await get_relay().join(self.chat_id, self.outbox)
            self.joined = True
            self.pending.extend(await self._from_log(or_end=True))

    async def aclose(self) -> None:
        """Stop following the chat and release the live connection."""
        if self.closed or not (self.started or self.joined):
            return
        self.closed = True
        if self.keepalive is not None:
            self.keepalive.cancel()
        await get_relay().leave(self.chat_id, self.outbox)
        get_socket_leases().release(self.slot)
        await socket_close(self.slot)

    def _keep_alive(self) -> None:
        """Put a keep-alive in the outbox KEEPALIVE_SECONDS from now."""
        loop = asyncio.get_running_loop()
        self.keepalive = loop.call_later(KEEPALIVE_SECONDS, self.outbox.put, KEEPALIVE)

    async def _from_log(self, *, or_end: bool = False) -> list[bytes]:
        """The logged events after the cursor; with `or_end`, then `turn.finished` if the turn
        has ended (the stream's end: `ended`)."""
        chunks = await self._logged()
        if or_end:
            finished = await on_database_thread(_finished_card, turn_id=self.turn_id)
            if finished is not None:  # the log is complete: what it gained meanwhile, then the end
                chunks += await self._logged()
                chunks.append(event_stream_text(finished).encode())
                self.ended = True
        return chunks

    async def _logged(self) -> list[bytes]:
        """The log after the cursor, as server-sent events, a chunk per REPLAY_CHUNK events."""
        chunks = []
        async for views in log_chunks(_read_log, self.turn_id, self.cursor):
            fresh = [view for view in views if view["seq"] > self.cursor]
            if fresh:
                self.cursor = fresh[-1]["seq"]
                frame = encode(turn_events(self.turn_id, fresh))
                chunks.append(event_stream_text(frame).encode())
        return chunks


class EventStreamResponse(StreamingHttpResponse):
    """A `text/event-stream` response whose stream's bytes go to the server as they come:
    Django's per-chunk wrapping of an async iterator (two generators, one `make_bytes` per
    chunk) is skipped, as the chunks are bytes already."""

    def __init__(self, events: TurnEvents) -> None:
        super().__init__(events, content_type="text/event-stream")
        self._events = events

    def __aiter__(self) -> TurnEvents:
        return self._events
