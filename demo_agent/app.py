"""The demo agent as a plain ASGI application speaking the Research Agent's wire protocol.

POST a research request (any path) and get `text/event-stream`: one `data: <json>` line per event,
each in the `{"chat_id", "message"}` envelope (seed 002), with `: keep-alive` comments between.
Request errors are answered before any event, as JSON `{"detail": ...}` (PROTOCOL.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .conversation import Conversation, Conversations
from .errors import HttpError
from .request import parse_request
from .tokens import TokenSigner
from .turn import Finished, Heartbeat, Pause, ResearchTurn, load_library

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY_BYTES = 1024 * 1024
HEARTBEAT = b": keep-alive\n\n"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # stop nginx-style proxies from buffering the stream
]


class DemoAgentApp:
    """An ASGI app that answers research questions from the bundled demo corpus."""

    def __init__(self, secret: str, pace: float = 1.0, chat_ttl_seconds: float = 3600.0) -> None:
        self.pace = max(0.0, float(pace))
        self._conversations = Conversations(TokenSigner(secret), chat_ttl_seconds=chat_ttl_seconds)
        self._library = load_library()
        self.active_turns = 0  # streams being generated now; tests watch it fall on disconnect

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["method"] != "POST":
            await _send_json(send, 405, {"detail": "Method Not Allowed"}, [(b"allow", b"POST")])
            return
        try:
            body = await _read_body(receive)
            if body is None:
                return  # the client left before sending its question
            request = parse_request(body)
            conversation = self._conversations.resolve(request)
        except HttpError as error:
            await _send_json(send, error.status, {"detail": error.detail})
            return
        turn = ResearchTurn(
            message=request.message,
            research_effort=request.research_effort,
            history=conversation.history,
            library=self._library,
        )
        await self._stream(turn, conversation, receive, send)

    async def _stream(
        self, turn: ResearchTurn, conversation: Conversation, receive: Receive, send: Send
    ) -> None:
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, disconnected))
        self.active_turns += 1
        started = False
        try:
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            started = True
            for step in turn.steps():
                if disconnected.is_set():
                    return
                if isinstance(step, Pause):
                    await self._sleep(step.seconds, disconnected)
                    continue
                if isinstance(step, Heartbeat):
                    chunk = HEARTBEAT
                elif isinstance(step, Finished):
                    checkpoint_id = self._conversations.checkpoint(conversation, step.turn)
                    complete = {
                        "type": "COMPLETE",
                        "checkpoint_id": checkpoint_id,
                        "consumption": step.consumption,
                    }
                    chunk = _event(conversation.chat_id, complete)
                else:
                    chunk = _event(conversation.chat_id, step)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            return  # servers that raise when writing to a closed connection (uvicorn drops it)
        except Exception:
            logger.exception("The demo agent failed while answering")
            if started and not disconnected.is_set():
                error = {"type": "ERROR", "error": "The demo agent failed: internal error"}
                with contextlib.suppress(OSError):
                    await send(
                        {"type": "http.response.body", "body": _event(conversation.chat_id, error)}
                    )
        finally:
            watcher.cancel()
            self.active_turns -= 1

    async def _sleep(self, seconds: float, disconnected: asyncio.Event) -> None:
        """Sleep at the configured pace, waking at once if the client disconnects."""
        delay = seconds * self.pace
        if delay <= 0:
            await asyncio.sleep(0)  # no sleeping, but let the disconnect watcher run
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(disconnected.wait(), delay)


def _event(chat_id: str, message: dict[str, Any]) -> bytes:
    document = json.dumps({"chat_id": chat_id, "message": message}, ensure_ascii=False)
    return b"data: " + document.encode() + b"\n\n"


async def _read_body(receive: Receive) -> bytes | None:
    """Return the whole request body, or None if the client disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HttpError(413, "Request body too large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _watch_disconnect(receive: Receive, disconnected: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    disconnected.set()


async def _send_json(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    response_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
