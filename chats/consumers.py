"""The chat page's websocket: ask, stop, and follow a chat's turns live or from a cursor.

The consumer stays thin: frames are decoded and built by `protocol.py`, limits live in
`sockets.py` and `services.turn_start`, and group frames are forwarded as they come. Per
connection it remembers the last seq sent for each turn, so live frames and log replays
interleave with no gap and no duplicate.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from . import protocol
from .protocol import Ask, ErrorCode, EventView, FrameError, Stop, Sync
from .runner import get_registry, publish_turn_started, request_stop, turn_frame
from .selectors import chat_find_for_user, chat_turns_to_sync, turn_events_after, turn_in_chat
from .services import TurnStartError, turn_start
from .sockets import FrameRate, get_socket_leases, socket_close, socket_open

logger = logging.getLogger(__name__)

# Close codes (4000-4999 are the application's own); each follows an error frame saying why.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_TOO_MANY = 4429
REPLAY_CHUNK = 1000


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.chat = None
        self.groups_joined: list[str] = []
        self.counted = False
        self.cursors: dict[int, int] = {}
        self.announced: set[int] = set()  # turns this page has been sent a card for
        self.frame_rate = FrameRate(settings.WS_MAX_FRAMES_PER_SECOND)
        user = self.scope.get("user")
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        # Accept first so the page receives the reason and the close code; a refused
        # handshake carries neither.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.refuse(
                ErrorCode.UNAUTHENTICATED,
                "Your session has ended. Reload the page to log in again.",
                CLOSE_UNAUTHENTICATED,
            )
            return
        chat = await database_sync_to_async(chat_find_for_user)(user=user, chat_id=chat_id)
        if chat is None:
            await self.refuse(ErrorCode.NOT_FOUND, "This chat is not available.", CLOSE_NOT_FOUND)
            return
        limit = settings.WS_MAX_SOCKETS_PER_USER
        if not await database_sync_to_async(socket_open)(
            user_id=user.pk, channel_name=self.channel_name, limit=limit
        ):
            await self.refuse(
                ErrorCode.TOO_MANY_SOCKETS,
                f"You have {limit} chat pages open already. Close one, then reload this page.",
                CLOSE_TOO_MANY,
            )
            return
        self.counted = True
        get_socket_leases().hold(self.channel_name)
        self.chat = chat
        self.groups_joined = [protocol.chat_group(chat.pk), protocol.user_group(user.pk)]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.counted:
            get_socket_leases().release(self.channel_name)
            await database_sync_to_async(socket_close)(channel_name=self.channel_name)
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
            elif isinstance(frame, Stop):
                await self.handle_stop(frame)
            elif isinstance(frame, Sync):
                await self.handle_sync(frame)
        except FrameError as refused:
            await self.send_json(protocol.error(refused.code, str(refused)))
        except Exception:  # one bad frame must not take the page's socket down with it
            logger.exception("Handling a frame failed")
            failed = "Something went wrong on our side. Try again."
            await self.send_json(protocol.error(ErrorCode.SERVER_ERROR, failed))

    async def handle_ask(self, frame: Ask) -> None:
        if not await self._session_is_alive():
            await self.session_end({})
            return
        try:
            turn, request = await database_sync_to_async(turn_start)(
                chat=self.chat,
                question=frame.message,
                research_effort=frame.research_effort,
                parent_turn_id=frame.parent_turn_id,
                restart=frame.restart,
                options=frame.options,
            )
        except TurnStartError as refused:
            raise FrameError(str(refused), refused.code) from refused
        self.cursors[turn.pk] = 0
        await publish_turn_started(turn)
        await get_registry().start(turn, request)

    async def handle_stop(self, frame: Stop) -> None:
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
            if turn.pk not in frame.cursors and turn.pk not in self.announced:
                self.announced.add(turn.pk)
                await self.send_json(await turn_frame("turn.started", turn))
            if turn.is_finished:
                await self.send_json(await turn_frame("turn.finished", turn))
                continue
            after = frame.cursors.get(turn.pk, 0)
            self.cursors[turn.pk] = max(self.cursors.get(turn.pk, 0), after)
            await self._replay(turn.pk)

    async def _replay(self, turn_id: int) -> None:
        while True:
            events = await database_sync_to_async(turn_events_after)(
                turn_id=turn_id, after_seq=self.cursors[turn_id], limit=REPLAY_CHUNK
            )
            if not events:
                return
            await self._send_events(turn_id, events)
            if len(events) < REPLAY_CHUNK:
                return

    async def _send_events(self, turn_id: int, events: list[EventView]) -> None:
        cursor = self.cursors[turn_id]
        fresh = [e for e in events if e["seq"] > cursor]
        if fresh:
            self.cursors[turn_id] = fresh[-1]["seq"]
            await self.send_json(protocol.turn_events(turn_id, fresh))

    async def _session_is_alive(self) -> bool:
        """Return False once the session this socket opened with has ended (a logout).

        The logout closes the socket through the user's group; this check also holds when that
        message is lost or the socket is mid-close. A scope without a session (tests that set
        the user directly) has nothing to check.
        """
        session = self.scope.get("session")
        if session is None:
            return True
        key = session.session_key
        return bool(key) and await database_sync_to_async(session.exists)(key)

    # --- Messages from the chat's and the user's groups -----------------------------------

    async def turn_started(self, message: dict[str, Any]) -> None:
        if message["turn_id"] in self.announced:
            return
        self.announced.add(message["turn_id"])
        self.cursors.setdefault(message["turn_id"], 0)
        await self.send_json(message)

    async def turn_events(self, message: dict[str, Any]) -> None:
        # A turn the page has not synced yet is replayed from the log when it does.
        if message["turn_id"] in self.cursors:
            await self._send_events(message["turn_id"], message["events"])

    async def turn_notice(self, message: dict[str, Any]) -> None:
        await self.send_json(message)

    async def turn_finished(self, message: dict[str, Any]) -> None:
        await self.send_json(message)

    async def session_end(self, message: dict[str, Any]) -> None:
        await self.refuse(
            ErrorCode.LOGGED_OUT,
            "You have logged out. Log in again to keep asking.",
            CLOSE_UNAUTHENTICATED,
        )
