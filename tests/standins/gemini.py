"""A stand-in for the Gemini API's streaming endpoint, spoken exactly as Google serves it.

`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` answers an SSE body of
`GenerateContentResponse` JSON documents (`data: {...}` then a blank line, CRLF as Google sends);
errors are Google's JSON error shape `{"error": {"code", "message", "status"}}`. The scripting
itself (queued replies, recorded requests, sleeps, stalls, drops) is `demo_agent.scripted`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from demo_agent.scripted import ReceivedRequest, Reply, ScriptedAgent, Sleep, Step
from tests.servers import serve_asgi

STREAM_PATH = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):streamGenerateContent$")
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@contextmanager
def serving_as_gemini(settings, app: ScriptedAgent) -> Iterator[ScriptedAgent]:
    """Serve `app` on a loopback port and point the site's Gemini settings at it."""
    with serve_asgi(app) as url:
        settings.GEMINI_API_KEY = "gemini-test-key-not-secret"
        settings.GEMINI_BASE_URL = url
        yield app


class GeminiStandIn(ScriptedAgent):
    def __init__(self) -> None:
        super().__init__(
            _no_reply,
            answers=_is_stream_request,
            not_found=Reply.json(404, {"error": "no such route"}),
            content_type="text/event-stream",
        )

    @property
    def models(self) -> list[str]:
        return [m["model"] for r in self.requests if (m := STREAM_PATH.match(r.path))]


def _is_stream_request(method: str, path: str) -> bool:
    return method == "POST" and STREAM_PATH.match(path) is not None


def _no_reply(request: ReceivedRequest) -> Reply:
    return Reply.json(500, {"error": "no scripted reply"})


def sse(*documents: dict[str, Any]) -> list[str]:
    """The body lines of a stream carrying these documents."""
    return [f"data: {json.dumps(d, ensure_ascii=False)}\r\n\r\n" for d in documents]


def chunk(text: str, **candidate: Any) -> dict[str, Any]:
    """One streamed `GenerateContentResponse` with a piece of the answer."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, **candidate}],
        "modelVersion": "gemini-2.5-flash",
    }


def stream(*documents: dict[str, Any], pause: float = 0.0) -> Reply:
    body: list[Step] = []
    for line in sse(*documents):
        body.append(line)
        if pause:
            body.append(Sleep(pause))
    return Reply(body=body)


def error(code: int, message: str, **headers: str) -> Reply:
    """Google's error body for an HTTP status."""
    status = STATUS_NAMES.get(code, "UNKNOWN")
    document = {"error": {"code": code, "message": message, "status": status}}
    return Reply.json(code, document, headers)


def grounded_answer(
    sentences: list[str], sources: list[tuple[str, str]], *, pieces: int = 3
) -> list[dict[str, Any]]:
    """A whole grounded answer: sentence i cites source i % len(sources), in UTF-8 bytes."""
    answer = "".join(sentences)
    size = max(1, len(answer) // pieces)
    documents = [chunk(answer[i : i + size]) for i in range(0, len(answer), size)]
    supports, position = [], 0
    for i, sentence in enumerate(sentences):
        start, end = position, position + len(sentence.encode())
        position = end
        segment: dict[str, Any] = {"endIndex": end, "text": sentence}
        if start:
            segment["startIndex"] = start
        supports.append({"segment": segment, "groundingChunkIndices": [i % len(sources)]})
    documents[-1]["candidates"][0].update(
        finishReason="STOP",
        groundingMetadata={
            "webSearchQueries": ["test query"],
            "groundingChunks": [{"web": {"uri": u, "title": t}} for u, t in sources],
            "groundingSupports": supports,
        },
    )
    documents[-1]["usageMetadata"] = {
        "promptTokenCount": 12,
        "candidatesTokenCount": 30,
        "totalTokenCount": 42,
    }
    return documents
