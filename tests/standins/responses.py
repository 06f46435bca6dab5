"""A stand-in for the Responses API (OpenAI and xAI): `POST /v1/responses`, scripted per test.

It speaks the wire the official `openai` SDK reads (notes/PROTOCOL.md): SSE with an `event:`
line before each `data:` line, every event carrying `type` and `sequence_number`, and each
provider's error JSON on a refused request. Requests (path, JSON, headers) are recorded.
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
    """One scripted response: status, headers, and body steps (text, ("sleep", s), "drop")."""

    status: int = 200
    body: list[Any] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def capture(cls, path: Path) -> Reply:
        return cls(body=path.read_text().splitlines(keepends=True))


class ScriptedEndpoint:
    """A real ASGI app answering `POST path` with the next queued Reply (404 elsewhere, as the
    real APIs do), recording each request's path, JSON and headers."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []  # {"json": ..., "headers": {...}}
        self.paths: list[str] = []

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def payloads(self) -> list[Any]:
        return [r["json"] for r in self.requests]

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        self.paths.append(f"{scope['method']} {scope['path']}")
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] != "POST" or scope["path"] != self.path:
            not_found = json.dumps({"error": {"message": "Not found", "type": "not_found"}})
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": not_found.encode()})
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        self.requests.append({"json": parsed, "headers": headers})
        reply = self.replies.popleft() if self.replies else _no_reply()
        content_type = b"text/event-stream" if reply.status < 400 else b"application/json"
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
            if isinstance(step, tuple) and step[0] == "sleep":
                await asyncio.sleep(step[1])
            else:
                await send({"type": "http.response.body", "body": step.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b""})


def _no_reply() -> Reply:
    body = {"error": {"message": "no scripted reply", "type": "server_error"}}
    return Reply(status=500, body=[json.dumps(body)])


def responses_standin() -> ScriptedEndpoint:
    return ScriptedEndpoint("/v1/responses")


def sse(kind: str, sequence: int, **data: Any) -> str:
    document = {"type": kind, "sequence_number": sequence, **data}
    return f"event: {kind}\ndata: {json.dumps(document, ensure_ascii=False)}\n\n"


def answer_events(
    deltas: list[str],
    annotations: list[dict[str, Any]] = (),  # type: ignore[assignment]
    *,
    response_id: str = "resp_1",
    streamed: bool = True,
    citations: list[str] | None = None,
    query: str | None = None,
    complete: bool = True,
) -> list[str]:
    """A whole response: optional search call, text deltas, annotations, completion.

    `streamed=False` sends the annotations only in `response.completed`.
    """
    events: list[tuple[str, dict[str, Any]]] = []
    response = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
    events.append(("response.created", {"response": response}))
    output: list[dict[str, Any]] = []
    if query is not None:
        call = {"id": "ws_1", "type": "web_search_call", "status": "completed"}
        call_done = {**call, "action": {"type": "search", "query": query}}
        events.append(("response.output_item.added", {"output_index": 0, "item": call}))
        events.append(("response.output_item.done", {"output_index": 0, "item": call_done}))
        output.append(call_done)
    at = {"item_id": "msg_1", "output_index": len(output), "content_index": 0}
    events.append(
        (
            "response.output_item.added",
            {"output_index": len(output), "item": {"id": "msg_1", "type": "message"}},
        )
    )
    for delta in deltas:
        events.append(("response.output_text.delta", {**at, "delta": delta, "logprobs": []}))
    if streamed:
        for index, annotation in enumerate(annotations):
            events.append(
                (
                    "response.output_text.annotation.added",
                    {**at, "annotation_index": index, "annotation": annotation},
                )
            )
    text = "".join(deltas)
    events.append(("response.output_text.done", {**at, "text": text, "logprobs": []}))
    content = {"type": "output_text", "text": text, "annotations": list(annotations)}
    output.append({"id": "msg_1", "type": "message", "role": "assistant", "content": [content]})
    final: dict[str, Any] = {
        **response,
        "status": "completed",
        "model": "model-x",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 20, "total_tokens": 30},
    }
    if citations is not None:
        final["citations"] = citations
    if complete:
        events.append(("response.completed", {"response": final}))
    return [sse(kind, number, **data) for number, (kind, data) in enumerate(events)]


def stream(*lines: Any) -> Reply:
    return Reply(body=list(lines))


def openai_error(status: int, message: str, *, kind: str = "invalid_request_error", **headers):
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply(status=status, body=[json.dumps(body)], headers=headers)


def xai_error(status: int, message: str, *, code: str = "Client specified an invalid argument"):
    """xAI's error body: `{"code", "error"}`."""
    return Reply(status=status, body=[json.dumps({"code": code, "error": message})])
