"""The chat page's websocket: ask, stop, and follow a chat's turns live or from a cursor.

The consumer stays thin: frames are decoded and built by `chats/live/protocol.py`, limits live in
`chats/live/limits.py` and `services.turn_start_many`, and the chat's frames come from
`chats/live/relay/`, already encoded, and are forwarded as they are.

Everything the page is sent about its turns goes through one queue, the outbox
(`chats/live/follow.py`, which API event streams follow a chat with too), written by one task,
in order: live frames, replies to `sync`, and catch-ups from the event log. Per connection it
remembers the last seq sent for each turn, so a frame that does not follow on from it (a gap:
something was lost on the way) is not sent; the page is caught up from the log instead, which
holds every event before it is relayed. A page that reads slower than its turns stream has its
queued event frames dropped, never silently: the same catch-up sends what they carried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from chats.errors import ErrorCode, FrameError
from chats.live import protocol
from chats.live.follow import CATCH_UP, FrameOutbox, Placement, log_chunks, place_events
from chats.live.limits import FrameRate, get_socket_leases, socket_close, sockets_open
from chats.live.protocol import Ask, CardKind, EventView, Rerun, Stop, Sync
from chats.live.relay import RelayFrame, get_relay
from chats.loop.batches import DatabaseBatches, one_each
from chats.loop.per_loop import PerLoop
from chats.metrics import EVENT_DELAY, OPEN_WEBSOCKETS
from chats.models import Chat
from chats.run.asks import SessionCheck, ask_start
from chats.run.cards import turn_card_frames
from chats.run.registry import request_stop
from chats.run.rerun import rerun_ask
from chats.selectors import (
    chat_is_readable,
    chat_turns_to_sync,
    turn_events_after,
    turn_in_chat,
)
from chats.services import TurnAsk

logger = logging.getLogger(__name__)

# Close codes (4000-4999 are the application's own); each follows an error frame saying why.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY = 4429
READ_ONLY = (
    "This chat is shared with you to read: “Continue in my chats” asks in a chat of your own."
)
ACCESS_ENDED = "This chat is no longer shared with you."


@dataclass(frozen=True)
class PageOpen:
    user: Any  # signed in
    chat_id: int
    channel_name: str


def _open_pages(opens: list[PageOpen]) -> list[Chat | ErrorCode]:
    """The chat each page opens (the user's own, or their team's to read), with its socket
    counted, or why it may not (NOT_FOUND, or TOO_MANY_SOCKETS at the user's limit), in order.
    Database thread: pages opening together (a restart's reconnects, a team's morning) are
    checked and counted in a few queries, not a few each."""
    readable = Chat.objects.readable_pairs((page.user.pk, page.chat_id) for page in opens)
    chats = one_each(readable.get((page.user.pk, page.chat_id)) for page in opens)
    counted = [
        (page.user.pk, page.channel_name)
        for page, chat in zip(opens, chats, strict=True)
        if chat is not None
    ]
    admitted = iter(sockets_open(counted, limit=settings.WS_MAX_SOCKETS_PER_USER))
    outcomes: list[Chat | ErrorCode] = []
    for chat in chats:
        if chat is None:
            outcomes.append(ErrorCode.NOT_FOUND)
        else:
            outcomes.append(chat if next(admitted) else ErrorCode.TOO_MANY_SOCKETS)
    return outcomes


_page_opens = PerLoop(lambda: DatabaseBatches(_open_pages, name="page opens"))


async def _read_log(turn_id: int, after_seq: int, limit: int) -> list[EventView]:
    return await database_sync_to_async(turn_events_after)(
        turn_id=turn_id, after_seq=after_seq, limit=limit
    )


def _refusal(code: ErrorCode) -> tuple[str, int]:
    """What a page that may not open is told (`_open_pages`' refusals), and its close code."""
    if code is ErrorCode.TOO_MANY_SOCKETS:
        limit = settings.WS_MAX_SOCKETS_PER_USER
        return (
            f"You have {limit} chat pages open already. Close one, then reload this page.",
            CLOSE_TOO_MANY,
        )
    return "This chat is not available.", CLOSE_NOT_FOUND


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its trip to the database thread before every message.

        That trip closes stale database connections; every query here already runs through
        `database_sync_to_async`, which does so before and after each call. Skipping it spares
        each frame from a page (an ask, a sync, a stop) a wait behind whatever the database
        thread is doing, such as a burst of answers being stored. A test fails if channels'
        own dispatch changes, so that this copy is looked at again.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    def start_page_state(self) -> None:
        """What a page holds before it is opened: no chat yet, nothing sent, an empty outbox."""
        self.chat = None
        self.can_write = False
        self.groups_joined: list[str] = []
        self.counted = False
        self.cursors: dict[int, int] = {}
        self.announced: set[int] = set()  # turns this page has been sent a card for
        self.newest_turn_id = 0  # the newest turn the page is known to show
        self.frame_rate = FrameRate(settings.WS_MAX_FRAMES_PER_SECOND)
        self.outbox: FrameOutbox | None = None  # once the chat is open
        self.writer: asyncio.Task | None = None
        self.relay = None
        self.gauged = False

    async def connect(self) -> None:
        self.start_page_state()
        user = self.scope.get("user")
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        # Accept first so the page receives the reason and the close code; a refused
        # handshake carries neither.
        await self.accept()
        OPEN_WEBSOCKETS.inc()
        self.gauged = True
        if user is None or not user.is_authenticated:
            await self.refuse(
                ErrorCode.UNAUTHENTICATED,
                "Your session has ended. Reload the page to log in again.",
                CLOSE_UNAUTHENTICATED,
            )
            return
        chat = await _page_opens().submit(PageOpen(user, chat_id, self.channel_name))
        if not isinstance(chat, Chat):
            await self.refuse(chat, *_refusal(chat))
            return
        self.counted = True
        get_socket_leases().hold(self.channel_name)
        self.chat = chat
        self.can_write = chat.owner_id == user.pk  # a team's reader follows it, read-only
        self.groups_joined = [protocol.user_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        # A reader's access changed between the check and joining the group (a share withdrawn,
        # a team left) was told to a group the page was not in yet: look again.
        if not self.can_write:
            await self.access_changed({})
            if self.chat is None:
                return
        self.outbox = FrameOutbox(chat_id=chat.pk, max_queued=settings.WS_MAX_QUEUED_FRAMES)
        self.writer = asyncio.create_task(self._write_forever(), name=f"page-{self.channel_name}")
        self.joined_chat_id = chat.pk
        self.relay = get_relay()
        await self.relay.join(chat.pk, self.outbox)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "gauged", False):
            OPEN_WEBSOCKETS.dec()
            self.gauged = False
        if self.relay is not None:
            await self.relay.leave(self.joined_chat_id, self.outbox)
        if self.writer is not None:
            self.writer.cancel()
            await asyncio.gather(self.writer, return_exceptions=True)
        if self.counted:
            get_socket_leases().release(self.channel_name)
            await socket_close(self.channel_name)
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def refuse(self, code: ErrorCode, message: str, close_code: int) -> None:
        """Say why, then close; frames that still arrive are ignored."""
        self.chat = None
        await self.send_json(protocol.error(code, message))
        await self.close(code=close_code)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.chat is None:
            return
        if not self.frame_rate.allow():
            if self.frame_rate.exhausted:
                await self.refuse(
                    ErrorCode.RATE_LIMITED,
                    "Too many messages, for too long: the connection was closed.",
                    CLOSE_TOO_MANY,
                )
            else:
                dropped = "Too many messages at once: one was dropped."
                await self.send_json(protocol.error(ErrorCode.RATE_LIMITED, dropped))
            return
        try:
            frame = protocol.decode_client_frame(text_data, bytes_data)
            if isinstance(frame, Ask):
                await self.handle_ask(frame)
            elif isinstance(frame, Rerun):
                await self.handle_rerun(frame)
            elif isinstance(frame, Stop):
                await self.handle_stop(frame)
            elif isinstance(frame, Sync):
                self.newest_turn_id = max(self.newest_turn_id, frame.newest_turn_id)
                self.outbox.put(frame)  # answered in order with the live frames
        except FrameError as refused:
            await self.send_json(protocol.error(refused.code, str(refused)))
        except Exception:  # one bad frame must not take the page's socket down with it
            logger.exception("Handling a frame failed")
            failed = "Something went wrong on our side. Try again."
            await self.send_json(protocol.error(ErrorCode.SERVER_ERROR, failed))

    def _require_owner(self) -> None:
        if not self.can_write:
            raise FrameError(READ_ONLY, ErrorCode.READ_ONLY)

    async def handle_ask(self, frame: Ask) -> None:
        self._require_owner()
        ask = TurnAsk(
            chat=self.chat,
            question=frame.message,
            research_effort=frame.research_effort,
            parent_turn_id=frame.parent_turn_id,
            restart=frame.restart,
            options=frame.options,
        )
        await self._start(ask)

    async def handle_rerun(self, frame: Rerun) -> None:
        """Ask a finished turn's question again, as it was asked (chats/run/rerun.py)."""
        self._require_owner()
        # Refusals raise RequestRefused, which the frame loop answers as an error frame.
        ask = await database_sync_to_async(rerun_ask)(chat=self.chat, turn_id=frame.turn_id)
        await self._start(ask)

    async def _start(self, ask: TurnAsk) -> None:
        # The logout closes the socket through the user's group; the session check also holds
        # when that message is lost or the socket is mid-close.
        session_is_alive = SessionCheck(self.scope.get("session"))
        started = await ask_start(ask, session_is_alive)  # refusals: RequestRefused
        if started is None:  # the asker's session has ended
            await self.session_end({})
            return
        # Announced and running. Its turn.started frame, already in this page's outbox, sets the
        # page's cursor for it; so does this, should the card have failed to render.
        self.cursors.setdefault(started.turn.turn.pk, 0)

    async def handle_stop(self, frame: Stop) -> None:
        self._require_owner()
        owned = await database_sync_to_async(turn_in_chat)(
            turn_id=frame.turn_id, chat_id=self.chat.pk
        )
        if not owned:
            raise FrameError("That turn is not in this chat.")
        await request_stop(frame.turn_id)

    async def handle_sync(self, frame: Sync) -> None:
        """Send what the page missed: events after its cursors, then any turns it never saw."""
        turns = await database_sync_to_async(chat_turns_to_sync)(
            chat_id=self.chat.pk, known=list(frame.cursors), newer_than=frame.newest_turn_id
        )
        for turn in turns:
            kinds: tuple[CardKind, ...] = ()
            if turn.pk not in frame.cursors and turn.pk not in self.announced:
                self.announced.add(turn.pk)
                kinds += ("turn.started",)
            if turn.is_finished:
                self.cursors.pop(turn.pk, None)
                kinds += ("turn.finished",)
            if kinds:  # one render of the card serves both frames
                for card in await database_sync_to_async(turn_card_frames)(turn, kinds):
                    await self.send_json(card)
            if turn.is_finished:
                continue
            after = frame.cursors.get(turn.pk, 0)
            self.cursors[turn.pk] = max(self.cursors.get(turn.pk, 0), after)
            await self._replay(turn.pk)

    async def _replay(self, turn_id: int) -> None:
        async for events in log_chunks(_read_log, turn_id, self.cursors[turn_id]):
            await self._send_events(turn_id, events)

    async def _send_events(self, turn_id: int, events: list[EventView]) -> None:
        cursor = self.cursors[turn_id]
        fresh = [e for e in events if e["seq"] > cursor]
        if fresh:
            self.cursors[turn_id] = fresh[-1]["seq"]
            await self.send_json(protocol.turn_events(turn_id, fresh))

    async def catch_up(self) -> None:
        """Re-read the log for every turn this page follows, as a `sync` of its own cursors."""
        known = self.announced | set(self.cursors)
        newest = max(self.newest_turn_id, max(known, default=0))
        if not self.cursors and not newest:
            return  # the page follows nothing yet: its first sync reads the log anyway
        await self.handle_sync(Sync(cursors=dict(self.cursors), newest_turn_id=newest))

    # --- The outbox (chats/live/follow.py): the one writer of the page's turns ------------

    async def _write_forever(self) -> None:
        while True:
            item = await self.outbox.next()
            try:
                await self._write(item)
            except FrameError as refused:
                await self.send_json(protocol.error(refused.code, str(refused)))
            except Exception:  # the socket may be gone: its disconnect ends this task
                logger.warning(
                    "Writing to a page of chat %s failed", self.joined_chat_id, exc_info=True
                )
                failed = "Something went wrong on our side. Reload the page to catch up."
                with contextlib.suppress(Exception):
                    await self.send_json(protocol.error(ErrorCode.SERVER_ERROR, failed))
            # Let the written frame go now, not when the next one comes: a page left open
            # after its answer would hold the final card's frame (the whole answer) meanwhile.
            del item

    async def _write(self, item: RelayFrame | Sync | str) -> None:
        if self.chat is None:
            return  # refused: the socket is closing
        if item == CATCH_UP:
            await self.catch_up()
        elif isinstance(item, Sync):
            await self.handle_sync(item)
        elif item.kind == "turn.events":
            cursor = self.cursors.get(item.turn_id)
            if cursor is None:
                return  # a turn the page has not synced yet
            placement = place_events(item, cursor)
            if placement is Placement.NEXT:
                self.cursors[item.turn_id] = item.last_seq
                await self.send(text_data=item.text)
                if item.received_at:
                    EVENT_DELAY.observe(time.time() - item.received_at)
            elif placement is Placement.GAP:  # the log holds what was lost, and this frame too
                await self._replay(item.turn_id)
        elif item.kind == "turn.started":
            if item.turn_id in self.announced:
                return
            self.announced.add(item.turn_id)
            self.cursors.setdefault(item.turn_id, 0)
            await self.send(text_data=item.text)
        else:  # turn.notice, turn.finished, turn.checked
            if item.kind == "turn.finished":
                self.cursors.pop(item.turn_id, None)
            await self.send(text_data=item.text)

    # --- Messages from the user's group -------------------------------------------------

    async def access_changed(self, message: dict[str, Any]) -> None:
        """A team or a share the user read chats through is gone: close if this chat was one."""
        if self.chat is None or self.can_write:
            return
        readable = await database_sync_to_async(chat_is_readable)(
            user_id=self.scope["user"].pk, chat_id=self.chat.pk
        )
        if not readable:
            await self.refuse(ErrorCode.NOT_FOUND, ACCESS_ENDED, CLOSE_NOT_FOUND)

    async def session_end(self, message: dict[str, Any]) -> None:
        await self.refuse(
            ErrorCode.LOGGED_OUT,
            "You have logged out. Log in again to keep asking.",
            CLOSE_UNAUTHENTICATED,
        )
