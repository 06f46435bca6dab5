"""A stand-in for the Responses API (OpenAI and xAI): `POST /v1/responses`, scripted per test.

It speaks the wire the official `openai` SDK reads (docs/PROTOCOL.md, "OpenAI and xAI (Responses
API)"): SSE with an `event:` line before each `data:` line, every event carrying `type` and
`sequence_number`, and each provider's error JSON on a refused request. The scripting itself (queued
replies, recorded requests, sleeps, stalls, drops, capture replay) is `demo_agent.scripted`.
"""

from __future__ import annotations

import json
from typing import Any

from demo_agent.scripted import ReceivedRequest, Reply, ScriptedAgent, Step


def endpoint_standin(path: str, refuse: Any = None) -> ScriptedAgent:
    """A stand-in answering only `POST path`, with 404 elsewhere as the real APIs do (the
    Messages API's stand-in is one too); `refuse` answers a request the real API rejects."""
    not_found = {"error": {"message": "Not found", "type": "not_found"}}
    return ScriptedAgent(
        _no_reply,
        answers=lambda method, requested: method == "POST" and requested == path,
        not_found=Reply.json(404, not_found),
        content_type="text/event-stream",
        refuse=refuse,
    )


def _no_reply(request: ReceivedRequest) -> Reply:
    return Reply.json(500, {"error": {"message": "no scripted reply", "type": "server_error"}})


def responses_standin() -> ScriptedAgent:
    return endpoint_standin("/v1/responses")


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


def stream(*lines: Step) -> Reply:
    return Reply(body=list(lines))


def openai_error(status: int, message: str, *, kind: str = "invalid_request_error", **headers):
    """OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return Reply.json(status, body, headers)


def xai_error(status: int, message: str, *, code: str = "Client specified an invalid argument"):
    """xAI's error body: `{"code", "error"}`."""
    return Reply.json(status, {"code": code, "error": message})
