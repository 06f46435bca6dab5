"""`GET /api/v1/turns/{id}/events`: a turn's events as `text/event-stream`, as its page gets them.

The stream follows the turn's chat as a page's socket does (`chats/live/follow.py`): it joins the
relay, then reads the event log after its cursor (the `Last-Event-ID` header, else 0), so it
sees every event at least once, and seqs dedupe; frames that do not follow on from the cursor,
or a follower fallen behind, are caught up from the log. Each event is one SSE event: `id:` its
seq, `event:` its type (ANSWER, ACTION, ...), `data:` the JSON the page is sent for it, cut from
the frame's already encoded text (`protocol.encoded_events`). It ends after `turn.finished`,
whose `data:` is the frame the page gets (the finished turn's card); a finished turn replays
its events and ends. `turn.notice` frames (a retry's notice) pass as they are, without an id.
A comment line every KEEPALIVE_SECONDS keeps proxies from closing a quiet stream; the stream ends
if its token stops being usable meanwhile.

A stream counts as one of its user's live connections (WS_MAX_SOCKETS_PER_USER, pages and
streams together, `chats.live.limits`). Its database work goes to the process's one database
thread, as a page's does, not to a thread of the request's own that would keep a connection
open for as long as the turn streams.
"""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja.errors import HttpError

from chats.api.models import ApiToken
from chats.api.selectors import api_token_is_usable
from chats.live.compact_json import compact_json
from chats.live.follow import CATCH_UP, FrameOutbox, Placement, log_chunks, place_events
from chats.live.limits import get_socket_leases, socket_close, socket_open
from chats.live.protocol import EventView, encoded_events
from chats.live.relay import RelayFrame, get_relay
from chats.models import Turn
from chats.run.cards import turn_card_frame
from chats.selectors import turn_events_after, turn_get_for_user

KEEPALIVE_SECONDS = 15.0
KEEPALIVE = "keepalive"  # an outbox item: time to say something on a quiet stream
DESCRIPTION = (
    "Server-sent events: for each event of the turn `id:` its sequence number, `event:` its type "
    "(ANSWER, ACTION, PLANNING, ...), `data:` its JSON as the chat page receives it; then "
    "`event: turn.finished` with the finished turn's card, and the stream ends. Send "
    "`Last-Event-ID` to resume after that event."
)

T = TypeVar("T")


async def on_database_thread(function: Callable[..., T], **kwargs: Any) -> T:
    """Run `function` on the process's one database thread (where the pages' consumers and the
    ask batches run theirs), rather than on a thread of this request's own."""
    call = database_sync_to_async(function)(**kwargs)
    return await asyncio.create_task(call, context=contextvars.Context())


async def turn_event_stream(request: HttpRequest, token: ApiToken, turn_id: int) -> HttpResponse:
    after = _last_event_id(request.headers.get("Last-Event-ID"))
    # The authentication's connection, on this request's own thread: not kept while streaming.
    await database_sync_to_async(connections.close_all)()
    slot = f"api-stream.{uuid.uuid4().hex}"
    turn = await on_database_thread(_open, user=token.owner, turn_id=turn_id, slot=slot)
    response = StreamingHttpResponse(
        TurnEvents(turn, after, token.pk, slot).frames(), content_type="text/event-stream"
    )
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
    """The user's turn (else 404), with a live connection counted for the stream (else 429)."""
    turn = turn_get_for_user(user=user, turn_id=turn_id)
    if not socket_open(user_id=user.pk, channel_name=slot, limit=settings.WS_MAX_SOCKETS_PER_USER):
        raise HttpError(
            429,
            f"You have {settings.WS_MAX_SOCKETS_PER_USER} live connections open (chat pages and"
            " event streams). Close one, then try again.",
        )
    return turn


async def _read_log(turn_id: int, after_seq: int, limit: int) -> list[EventView]:
    return await on_database_thread(
        turn_events_after, turn_id=turn_id, after_seq=after_seq, limit=limit
    )


def _finished_card(turn_id: int) -> str | None:
    """The finished turn's `turn.finished` frame as the page gets it, or None while it streams."""
    turn = Turn.objects.select_related("chat").get(pk=turn_id)
    if not turn.is_finished:
        return None
    return compact_json(turn_card_frame("turn.finished", turn))


class TurnEvents:
    """One stream: its cursor, its outbox on the relay, and the bytes it writes."""

    def __init__(self, turn: Turn, after: int, token_id: int, slot: str) -> None:
        self.turn_id = turn.pk
        self.chat_id = turn.chat_id
        self.cursor = after
        self.token_id = token_id
        self.slot = slot
        self.outbox = FrameOutbox(chat_id=turn.chat_id, max_queued=settings.WS_MAX_QUEUED_FRAMES)

    async def frames(self) -> AsyncIterator[bytes]:
        relay = get_relay()
        loop = asyncio.get_running_loop()
        # Held from the first read on: a response never read leaves a row whose lease lapses.
        get_socket_leases().hold(self.slot)
        keepalive = loop.call_later(KEEPALIVE_SECONDS, self._keepalive)
        try:
            await relay.join(self.chat_id, self.outbox)  # then read the log: nothing falls between
            async for chunk in self._catch_up():
                yield chunk
            finished = await on_database_thread(_finished_card, turn_id=self.turn_id)
            if finished is not None:
                async for chunk in self._end(finished):
                    yield chunk
                return
            while True:
                item = await self.outbox.next()
                if item is KEEPALIVE:
                    if not await on_database_thread(api_token_is_usable, token_id=self.token_id):
                        return
                    yield b": keepalive\n\n"
                    keepalive = loop.call_later(KEEPALIVE_SECONDS, self._keepalive)
                    continue
                if item is CATCH_UP:
                    async for chunk in self._catch_up():
                        yield chunk
                    finished = await on_database_thread(_finished_card, turn_id=self.turn_id)
                    if finished is not None:
                        async for chunk in self._end(finished):
                            yield chunk
                        return
                    continue
                frame: RelayFrame = item
                if frame.turn_id != self.turn_id:
                    continue  # another turn of the chat
                if frame.kind == "turn.events":
                    placement = place_events(frame, self.cursor)
                    if placement is Placement.NEXT:
                        yield self._sse(encoded_events(frame))
                    elif placement is Placement.GAP:  # the log holds what was lost
                        async for chunk in self._catch_up():
                            yield chunk
                elif frame.kind == "turn.notice":
                    yield f"event: turn.notice\ndata: {frame.text}\n\n".encode()
                elif frame.kind == "turn.finished":
                    async for chunk in self._end(frame.text):
                        yield chunk
                    return
        finally:
            keepalive.cancel()
            await relay.leave(self.chat_id, self.outbox)
            get_socket_leases().release(self.slot)
            await on_database_thread(socket_close, channel_name=self.slot)

    def _keepalive(self) -> None:
        self.outbox.put(KEEPALIVE)

    def _sse(self, events: list) -> bytes:
        """The events after the cursor as SSE events, in one piece; the cursor moves past them."""
        lines = []
        for event in events:
            if event.seq > self.cursor:
                lines.append(f"id: {event.seq}\nevent: {event.type}\ndata: {event.text}\n\n")
                self.cursor = event.seq
        return "".join(lines).encode()

    async def _catch_up(self) -> AsyncIterator[bytes]:
        """The logged events after the cursor."""
        async for views in log_chunks(_read_log, self.turn_id, self.cursor):
            chunk = self._sse([_LoggedEvent(view) for view in views])
            if chunk:
                yield chunk

    async def _end(self, finished: str) -> AsyncIterator[bytes]:
        """Whatever the log holds past the cursor, then `turn.finished`."""
        async for chunk in self._catch_up():
            yield chunk
        yield f"event: turn.finished\ndata: {finished}\n\n".encode()


class _LoggedEvent:
    """An event read back from the log, spelled as `encoded_events` gives a relayed one."""

    __slots__ = ("seq", "text", "type")

    def __init__(self, view: EventView) -> None:
        self.seq = view["seq"]
        self.type = view["type"]
        self.text = compact_json(view)
