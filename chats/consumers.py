"""The chat page's websocket: ask, stop, and follow a chat's turns live or from a cursor.

The consumer stays thin: it validates frames (`frames.py`), calls services and the run registry,
and forwards the chat group's frames. Per connection it remembers the last seq sent for each
turn, so live frames and log replays interleave with no gap and no duplicate.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from .event_log import chat_group
from .frames import Ask, FrameError, Stop, Sync, parse_client_frame
from .models import Turn
from .runner import get_registry, publish_turn_started, request_stop, turn_frame
from .selectors import chat_find_for_user, turn_events_after
from .services import TurnStartError, turn_start

logger = logging.getLogger(__name__)

# Close codes the page understands (4000-4999 are the application's own).
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
REPLAY_CHUNK = 1000


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        self.chat = None
        self.cursors: dict[int, int] = {}
        self.announced: set[int] = set()  # turns this page has been sent a card for
        user = self.scope.get("user")
        chat_id = self.scope["url_route"]["kwargs"]["chat_id"]
        # Accept first so the page receives the close code; a refused handshake carries none.
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.chat = await database_sync_to_async(chat_find_for_user)(user=user, chat_id=chat_id)
        if self.chat is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.group = chat_group(self.chat.pk)
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.chat is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.chat is None:
            return
        try:
            if text_data is None:
                raise FrameError("Frames must be JSON text.")
            if len(text_data.encode()) > settings.WEBSOCKET_MAX_FRAME_BYTES:
                raise FrameError(
                    f"Frames are limited to {settings.WEBSOCKET_MAX_FRAME_BYTES} bytes."
                )
            try:
                data = json.loads(text_data)
            except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
                raise FrameError("Frames must be JSON.") from error
            frame = parse_client_frame(data)
            if isinstance(frame, Ask):
                await self.handle_ask(frame)
            elif isinstance(frame, Stop):
                await self.handle_stop(frame)
            elif isinstance(frame, Sync):
                await self.handle_sync(frame)
        except FrameError as error:
            await self.send_json({"type": "error", "code": "bad_frame", "message": str(error)})

    async def handle_ask(self, frame: Ask) -> None:
        try:
            turn, request = await database_sync_to_async(turn_start)(
                chat=self.chat,
                question=frame.message,
                research_effort=frame.research_effort,
                parent_turn_id=frame.parent_turn_id,
                restart=frame.restart,
            )
        except TurnStartError as error:
            raise FrameError(str(error)) from error
        self.cursors[turn.pk] = 0
        await publish_turn_started(turn)
        await get_registry().start(turn, request)

    async def handle_stop(self, frame: Stop) -> None:
        if not await self._owns_turn(frame.turn_id):
            raise FrameError("That turn is not in this chat.")
        await request_stop(frame.turn_id)

    async def handle_sync(self, frame: Sync) -> None:
        """Send what the page missed: events after its cursors, then any turns it never saw."""
        turns = await database_sync_to_async(_turns_to_sync)(self.chat.pk, frame)
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

    async def _send_events(self, turn_id: int, events: list[dict[str, Any]]) -> None:
        cursor = self.cursors[turn_id]
        fresh = [e for e in events if e["seq"] > cursor]
        if fresh:
            self.cursors[turn_id] = fresh[-1]["seq"]
            await self.send_json({"type": "turn.events", "turn_id": turn_id, "events": fresh})

    async def _owns_turn(self, turn_id: int) -> bool:
        return await Turn.objects.filter(pk=turn_id, chat_id=self.chat.pk).aexists()

    # --- Frames from the chat group ---------------------------------------------------------

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


def _turns_to_sync(chat_id: int, frame: Sync) -> list[Turn]:
    known = Turn.objects.filter(chat_id=chat_id, pk__in=list(frame.cursors))
    newer = Turn.objects.filter(chat_id=chat_id, pk__gt=frame.newest_turn_id)
    return list((known | newer).distinct().order_by("pk"))
