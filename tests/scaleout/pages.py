"""A chat page as chat.js behaves, for the tests that restart server processes under it."""

from __future__ import annotations

import asyncio
import json

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

MAX_RECONNECTS = 5
RECONNECT_DELAY = 0.5  # chat.js's first delay


class Page:
    """A chat page as chat.js behaves: ask, follow the turn, and on a dropped socket reconnect
    (here: to whichever address `reconnect_to` names, as the proxy would) and sync cursors."""

    def __init__(self, chat_id: int, cookie: str) -> None:
        self.chat_id = chat_id
        self.cookie = cookie
        self.turn_id = 0
        self.cursor = 0
        self.seqs: list[int] = []
        self.answer = ""
        self.streaming = asyncio.Event()
        self.close_codes: list[int | None] = []
        self.finished: dict = {}
        self.refusals: list[str] = []  # reconnects refused (no worker took the socket)

    def _socket(self, host: str):
        return connect(
            f"ws://{host}/ws/chats/{self.chat_id}/",
            additional_headers={"Cookie": self.cookie},
            origin=f"http://{host}",
        )

    async def _follow(self, socket) -> bool:
        """Read frames until the turn finishes (True) or the socket closes (False)."""
        try:
            while True:
                frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=30))
                if frame["type"] == "turn.started":
                    self.turn_id = frame["turn_id"]
                elif frame["type"] == "turn.events" and frame["turn_id"] == self.turn_id:
                    for event in frame["events"]:
                        if event["seq"] <= self.cursor:
                            continue  # seen before the reconnect
                        self.seqs.append(event["seq"])
                        self.cursor = event["seq"]
                        self.answer += event.get("content", "") if event["type"] == "ANSWER" else ""
                    self.streaming.set()
                elif frame["type"] == "turn.finished" and frame["turn_id"] == self.turn_id:
                    self.finished = frame
                    return True
        except ConnectionClosed as closed:
            self.close_codes.append(closed.rcvd.code if closed.rcvd else None)
            return False

    async def ask_then_follow(self, first: str, *, reconnect_to: str = "") -> None:
        """Ask through `first`; after each dropped socket, reconnect (to `reconnect_to`, or to
        `first` again, as through a proxy) and sync, until the turn finishes."""
        async with self._socket(first) as socket:
            ask = {"type": "ask", "message": "Q", "research_effort": "lite"}
            await socket.send(json.dumps(ask))
            if await self._follow(socket):
                return
        for _ in range(MAX_RECONNECTS):
            try:
                async with self._socket(reconnect_to or first) as socket:
                    cursors = {str(self.turn_id): self.cursor}
                    sync = {"type": "sync", "cursors": cursors, "newest_turn_id": self.turn_id}
                    await socket.send(json.dumps(sync))
                    if await self._follow(socket):
                        return
            except (InvalidStatus, OSError) as refused:  # as chat.js: wait, then try again
                self.refusals.append(repr(refused))
                await asyncio.sleep(RECONNECT_DELAY)
        raise AssertionError(f"turn {self.turn_id} did not finish after {MAX_RECONNECTS} tries")
