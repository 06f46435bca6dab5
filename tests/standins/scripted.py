"""A scripted HTTP server core for provider stand-ins: replies queued per test, requests recorded.

Each request takes the next queued `Reply` (status, headers, body steps) and is recorded with
its path, query, headers and JSON body, so tests can assert exactly what the official SDK or our
client sent.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import Any


class Drop(Exception):
    """Raised inside the app to cut the connection mid-body."""


@dataclass
class Reply:
    """One scripted response: status, headers, and body steps (str or bytes lines,
    ("sleep", seconds), "stall" to hang, "drop" to cut the connection)."""

    status: int = 200
    body: list[Any] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


class ScriptedServer:
    """An ASGI app; `accepts(method, path)` says which requests it answers (404 otherwise)."""

    stream_content_type = b"text/event-stream"

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def accepts(self, method: str, path: str) -> bool:
        return True

    def missing_reply(self) -> Reply:
        return Reply(status=500, body=[json.dumps({"error": "no scripted reply"})])

    @property
    def payloads(self) -> list[Any]:
        return [r["json"] for r in self.requests]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        self.requests.append(
            {
                "method": scope["method"],
                "path": scope["path"],
                "query": scope["query_string"].decode(),
                "headers": headers,
                "json": parsed,
            }
        )
        if not self.accepts(scope["method"], scope["path"]):
            reply = Reply(status=404, body=[json.dumps({"error": "no such route"})])
        else:
            reply = self.replies.popleft() if self.replies else self.missing_reply()
        content_type = self.stream_content_type if reply.status < 400 else b"application/json"
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(b"content-type", content_type)]
                + [(k.encode(), v.encode()) for k, v in reply.headers.items()],
            }
        )
        for step in reply.body:
            if step == "drop":
                raise Drop("scripted drop")
            if step == "stall":
                await asyncio.sleep(3600)
            elif isinstance(step, tuple) and step[0] == "sleep":
                await asyncio.sleep(step[1])
            else:
                data = step if isinstance(step, bytes) else step.encode()
                await send({"type": "http.response.body", "body": data, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
