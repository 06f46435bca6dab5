"""The Research Agent's wire, written: SSE events in their envelope, JSON errors, ASGI plumbing.

Both the demo agent and the scripted stand-in (`demo_agent.scripted`) write through this module,
so what tests and benchmarks stream is byte for byte what the demo agent streams (docs/PROTOCOL.md).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from demo_agent.errors import HttpError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

MAX_BODY_BYTES = 1024 * 1024
HEARTBEAT = b": keep-alive\n\n"
SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # stop nginx-style proxies from buffering the stream
]


def sse_event(chat_id: str, message: dict[str, Any]) -> bytes:
    """Return one event: a `data:` line with the `{"chat_id", "message"}` envelope
    (docs/PROTOCOL.md, "Events")."""
    document = json.dumps({"chat_id": chat_id, "message": message}, ensure_ascii=False)
    return b"data: " + document.encode() + b"\n\n"


async def read_body(receive: Receive, limit: int = MAX_BODY_BYTES) -> bytes | None:
    """Return the whole request body, or None if the client disconnected first."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise HttpError(413, "Request body too large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def start_stream(send: Send, status: int = 200, headers: Headers | None = None) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": SSE_HEADERS + (headers or [])}
    )


async def send_chunk(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def end_stream(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def send_json(send: Send, status: int, payload: Any, headers: Headers | None = None) -> None:
    """Answer with a whole JSON document, as the API answers errors: `{"detail": ...}`."""
    body = json.dumps(payload).encode()
    response_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": response_headers})
    await send({"type": "http.response.body", "body": body})


async def refuse_websocket(receive: Receive, send: Send) -> None:
    await receive()  # websocket.connect
    await send({"type": "websocket.close", "code": 1008})


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def answered_if_not_http(scope: Scope, receive: Receive, send: Send) -> bool:
    """Answer a lifespan or websocket scope (an agent speaks HTTP only); True if it was one."""
    if scope["type"] == "lifespan":
        await lifespan(receive, send)
        return True
    if scope["type"] == "websocket":
        await refuse_websocket(receive, send)
        return True
    return False
