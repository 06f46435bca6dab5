"""A stand-in for the Research Agent API: a real ASGI app, scripted per test.

Each POST takes the next scripted `Reply` (status, headers, body steps) and records the
request, so tests can check exact payloads and drive every failure the real API can produce.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Drop(Exception):
    """Raised inside the app to cut the connection mid-body."""


@dataclass
class Reply:
    status: int = 200
    body: list[Any] = field(default_factory=list)  # str lines, ("sleep", s), "drop", "stall"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def error(cls, status: int, detail: Any, **headers: str) -> Reply:
        return cls(status=status, body=[json.dumps({"detail": detail})], headers=headers)

    @classmethod
    def events(
        cls, *messages: dict[str, Any], chat_id: str = "chat-up-1", pause: float = 0.0
    ) -> Reply:
        body: list[Any] = []
        for message in messages:
            body.append(f"data: {json.dumps({'chat_id': chat_id, 'message': message})}\n")
            if pause:
                body.append(("sleep", pause))
        return cls(body=body)

    @classmethod
    def capture(cls, path: Path) -> Reply:
        return cls(body=path.read_text().splitlines(keepends=True))


def answer_stream(
    text: str, *, checkpoint: str = "ckpt-1", pieces: int = 4
) -> list[dict[str, Any]]:
    """A minimal complete run answering `text` in a few ANSWER chunks."""
    size = max(1, len(text) // pieces)
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    return [
        {
            "type": "PLANNING",
            "plan": {"title": "Plan", "steps": [{"description": "Look", "status": "IN_PROGRESS"}]},
        },
        {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "q"}},
        *({"type": "ANSWER", "message_id": "a", "content": c} for c in chunks),
        {"type": "COMPLETE", "checkpoint_id": checkpoint, "consumption": []},
    ]


class ScriptedUpstream:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []  # {"json": ..., "headers": {...}}

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def payloads(self) -> list[dict[str, Any]]:
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
        self.requests.append({"json": parsed, "headers": headers})
        reply = self.replies.popleft() if self.replies else Reply.error(500, "no scripted reply")
        is_sse = reply.status < 400
        content_type = b"text/event-stream" if is_sse else b"application/json"
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
                await send({"type": "http.response.body", "body": step.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b""})
