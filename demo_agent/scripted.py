"""A scripted HTTP stand-in, for tests and benchmarks: it streams what it is told.

It stands in for the Research Agent, and (given a route, a content type and error bodies by the
thin modules in `tests/standins/`) for every other provider. Each request is recorded (method,
path, query, headers, JSON body); a request the stand-in `answers` plays a `Reply` (the next one
queued, or else what `respond(request)` returns), any other gets `not_found`. A reply is a status
with headers, then steps: wire lines (an event written by `demo_agent.wire`, or any raw text),
`Sleep`, `Stall` and `Drop`, paced at `rate` steps per second if asked. Serve it with uvicorn on
127.0.0.1, in a thread (the tests' `serve_asgi`) or in a process of its own (`bench/_site.py`);
it never runs inside the site.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import demo_agent.wire as wire
from demo_agent.wire import Receive, Scope, Send

DEFAULT_CHAT_ID = "chat-up-1"


@dataclass(frozen=True)
class Sleep:
    """Send nothing for `seconds`, then go on."""

    seconds: float


@dataclass(frozen=True)
class Stall:
    """Send nothing more and keep the connection open until the client leaves."""


@dataclass(frozen=True)
class Drop:
    """Cut the connection mid-body, as a crashed agent or a reset socket would."""


Step = str | bytes | Sleep | Stall | Drop


class ScriptedDrop(Exception):
    """Raised inside the app: uvicorn then closes the connection without ending the body."""


@dataclass
class Reply:
    status: int = 200
    body: Iterable[Step] = ()  # consumed lazily, so a generator can stamp each step as it is sent
    headers: dict[str, str] = field(default_factory=dict)
    rate: float = 0.0  # steps per second on an absolute schedule; 0 sends as fast as it can

    @classmethod
    def json(cls, status: int, document: Any, headers: dict[str, str] | None = None) -> Reply:
        """A JSON body in one piece, as every API sends a refused request's error."""
        headers = {"Content-Type": "application/json", **(headers or {})}
        return cls(status=status, body=[json.dumps(document)], headers=headers)

    @classmethod
    def error(
        cls,
        status: int,
        detail: Any,
        *,
        retry_after: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """The Research Agent's error answer: a JSON `{"detail": ...}` before any event."""
        headers = dict(headers or {})
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        return cls.json(status, {"detail": detail}, headers)

    @classmethod
    def events(
        cls,
        *messages: dict[str, Any],
        chat_id: str = DEFAULT_CHAT_ID,
        pause: float = 0.0,
        rate: float = 0.0,
    ) -> Reply:
        """Stream `messages` in the envelope, with `pause` seconds after each one."""
        body: list[Step] = []
        for message in messages:
            body.append(wire.sse_event(chat_id, message))
            if pause:
                body.append(Sleep(pause))
        return cls(body=body, rate=rate)

    @classmethod
    def capture(cls, path: Path) -> Reply:
        """Replay a capture's lines exactly as they were recorded."""
        return cls(body=path.read_bytes().splitlines(keepends=True))


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


def cited_answer_stream(
    claims: Sequence[tuple[str, str]], *, checkpoint: str = "ckpt-1", published: str = "2026-04-15"
) -> list[dict[str, Any]]:
    """A complete run whose answer is the claims' sentences, each cited to its source by name
    (a BIGDATA document whose passage is the sentence itself, so every figure is found)."""
    answer, references = "", []
    for sentence, source_name in claims:
        start = len(answer) + (1 if answer else 0)
        answer = f"{answer} {sentence}" if answer else sentence
        doc_id = "doc-" + "-".join(source_name.lower().split())
        source = {
            "type": "BIGDATA",
            "id": doc_id,
            "hd": f"{source_name} report",
            "src_name": source_name,
            "ts": f"{published}T10:00:00Z",
            "url": f"https://news.example/{doc_id}",
            "chunks": [{"cnum": 0, "text": sentence, "relevance": 0.9}],
        }
        references.append(
            {"start": start, "end": len(answer), "tool_name": "search", "audit_id": "a",
             "source": source}
        )  # fmt: skip
    return [
        {"type": "ANSWER", "message_id": "a", "content": answer},
        {"type": "GROUNDING", "references": references},
        {"type": "COMPLETE", "checkpoint_id": checkpoint, "consumption": []},
    ]


@dataclass(frozen=True)
class ReceivedRequest:
    path: str
    json: Any  # None when the body was not JSON
    headers: dict[str, str]  # names lower-cased
    method: str = "POST"
    query: str = ""  # the raw query string, without "?"


def _no_reply(request: ReceivedRequest) -> Reply:
    return Reply.error(500, "no scripted reply")


def _answers_all(method: str, path: str) -> bool:
    return True


class ScriptedAgent:
    """An ASGI app answering each request it `answers` with the next queued `Reply` (else
    `respond(request)`), and any other with `not_found`.

    `content_type=None` sends the Research Agent's SSE headers unless a reply names its own type;
    a provider's stand-in names its stream's type instead, sent on a success (below 400) while
    an error without a type of its own is sent as JSON, as the real APIs do. `refuse(request)`
    returns the error a real API would answer a request it rejects, or None, before any reply.
    """

    def __init__(
        self,
        respond: Callable[[ReceivedRequest], Reply] = _no_reply,
        *,
        answers: Callable[[str, str], bool] = _answers_all,
        not_found: Reply | None = None,
        content_type: str | None = None,
        refuse: Callable[[ReceivedRequest], Reply | None] | None = None,
    ) -> None:
        self.respond = respond
        self.refuse = refuse
        self.answers = answers
        self.not_found = not_found or Reply.json(404, {"detail": "Not Found"})
        self.content_type = content_type
        self.replies: deque[Reply] = deque()
        self.requests: list[ReceivedRequest] = []
        self.url = ""  # set by whoever serves it, for the tests' convenience

    def queue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    @property
    def payloads(self) -> list[Any]:
        return [request.json for request in self.requests]

    @property
    def paths(self) -> list[str]:
        """Each request as "METHOD /path", answered or not."""
        return [f"{request.method} {request.path}" for request in self.requests]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await wire.answered_if_not_http(scope, receive, send):
            return
        body = await wire.read_body(receive, limit=64 * 1024 * 1024)
        if body is None:
            return
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        request = ReceivedRequest(
            path=scope["path"],
            json=parsed,
            headers=headers,
            method=scope["method"],
            query=scope["query_string"].decode("latin-1"),
        )
        self.requests.append(request)
        if not self.answers(request.method, request.path):
            reply = self.not_found
        elif self.refuse is not None and (refused := self.refuse(request)) is not None:
            reply = refused
        else:
            reply = self.replies.popleft() if self.replies else self.respond(request)
        await _play(reply, self._headers(reply), receive, send)

    def _headers(self, reply: Reply) -> list[tuple[bytes, bytes]]:
        extra = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()
        ]
        if any(name == b"content-type" for name, _ in extra):
            return extra
        if self.content_type is None:
            return wire.SSE_HEADERS + extra  # an event stream unless the reply says otherwise
        kind = self.content_type if reply.status < 400 else "application/json"
        return [(b"content-type", kind.encode("latin-1")), *extra]


async def _play(
    reply: Reply, headers: list[tuple[bytes, bytes]], receive: Receive, send: Send
) -> None:
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    loop = asyncio.get_running_loop()
    started = loop.time()
    steps = iter(reply.body)
    index = 0
    while True:
        if reply.rate:
            # An absolute schedule, so one late tick does not slow the rest of the stream down;
            # the next step is taken only after the wait, so a generator can stamp it on time.
            delay = started + index / reply.rate - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        step = next(steps, None)
        if step is None:
            break
        index += 1
        if isinstance(step, Sleep):
            if await client_left_within(receive, step.seconds):
                return  # nobody to send the rest to (a server shutting down need not wait)
        elif isinstance(step, Stall):
            await client_left_within(receive, None)
            return
        elif isinstance(step, Drop):
            raise ScriptedDrop("scripted drop")
        else:
            await wire.send_chunk(send, step.encode() if isinstance(step, str) else step)
    await wire.end_stream(send)


async def client_left_within(receive: Receive, seconds: float | None) -> bool:
    """Wait until the client disconnects, for at most `seconds` (None: however long it takes);
    return whether it did."""
    try:
        async with asyncio.timeout(seconds):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return False
    return True
