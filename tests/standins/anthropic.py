"""A stand-in for Anthropic's Messages API: `POST /v1/messages`, scripted per test.

It speaks the wire the official `anthropic` SDK reads (docs/PROTOCOL.md, "Anthropic (Messages
API)"): SSE with an `event:` line before each `data:` line, and `{"type": "error", "error": {"type",
"message"}}` both as a refused request's body and as a mid-stream `error` event. The scripting is
`demo_agent.scripted`.
"""

from __future__ import annotations

import json
from typing import Any

from demo_agent.scripted import ReceivedRequest, Reply, ScriptedAgent
from tests.standins.responses import endpoint_standin


def messages_standin() -> ScriptedAgent:
    return endpoint_standin("/v1/messages", refuse=invalid_messages)


def invalid_messages(request: ReceivedRequest) -> Reply | None:
    """Anthropic's 400 for the rules of `messages` a continued (paused) answer must keep: it
    starts with a user turn, each block has a type, every server tool use has its result in
    the same message, and a final assistant message does not end with whitespace."""
    messages = request.json.get("messages") if isinstance(request.json, dict) else None
    if not isinstance(messages, list) or not messages or messages[0].get("role") != "user":
        return _invalid("messages: the first message must use the user role")
    for number, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, str):
            continue
        if not isinstance(content, list) or not all(
            isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
        ):
            return _invalid(f"messages.{number}.content: each block needs a type")
        results = {b.get("tool_use_id") for b in content if b["type"].endswith("_tool_result")}
        for block in content:
            if block["type"] == "server_tool_use" and block.get("id") not in results:
                return _invalid(
                    f"messages.{number}: '{block.get('name')}' tool use with id"
                    f" '{block.get('id')}' was found without a corresponding"
                    f" '{block.get('name')}_tool_result' block"
                )
    last = messages[-1]
    if last.get("role") == "assistant":
        content = last.get("content")
        text = content if isinstance(content, str) else (content[-1].get("text") if content else "")
        if isinstance(text, str) and text != text.rstrip():
            return _invalid("final assistant content cannot end with trailing whitespace")
    return None


def _invalid(message: str) -> Reply:
    return anthropic_error(400, "invalid_request_error", message)


def sse(kind: str, **data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data}, ensure_ascii=False)}\n\n"


def message_start(message_id: str = "msg_1") -> str:
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }
    return sse("message_start", message=message)


def text_block(index: int, pieces: list[str], citations: list[dict[str, Any]] = ()) -> list[str]:  # type: ignore[assignment]
    block: dict[str, Any] = {"type": "text", "text": ""}
    if citations:
        block["citations"] = []
    lines = [sse("content_block_start", index=index, content_block=block)]
    for citation in citations:
        delta = {"type": "citations_delta", "citation": citation}
        lines.append(sse("content_block_delta", index=index, delta=delta))
    for piece in pieces:
        delta = {"type": "text_delta", "text": piece}
        lines.append(sse("content_block_delta", index=index, delta=delta))
    lines.append(sse("content_block_stop", index=index))
    return lines


def search_blocks(index: int, query: str, results: list[dict[str, Any]]) -> list[str]:
    """A `server_tool_use` (its input streamed as JSON) and its `web_search_tool_result`."""
    use = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    partial = json.dumps({"query": query})
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": results}
    return [
        sse("content_block_start", index=index, content_block=use),
        sse(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": partial[:7]},
        ),
        sse(
            "content_block_delta",
            index=index,
            delta={"type": "input_json_delta", "partial_json": partial[7:]},
        ),
        sse("content_block_stop", index=index),
        sse("content_block_start", index=index + 1, content_block=result),
        sse("content_block_stop", index=index + 1),
    ]


def message_end(stop_reason: str = "end_turn", output_tokens: int = 40) -> list[str]:
    return [
        sse(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        sse("message_stop"),
    ]


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Reply.json(status, body, headers)
