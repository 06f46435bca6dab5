"""A stand-in for an agent built on llm-sdk: it streams `PartialModelResponse` JSON lines.

Any POST path answers (the site is given the agent's whole URL); errors are JSON bodies
`{"error": {"message"}}`. `sse=True` replies write the same documents as SSE `data:` lines.
The scripting itself is `demo_agent.scripted`.
"""

from __future__ import annotations

import json
from typing import Any

from demo_agent.scripted import ReceivedRequest, Reply, ScriptedAgent, Sleep, Step


class LlmSdkStandIn(ScriptedAgent):
    def __init__(self) -> None:
        super().__init__(
            _no_reply,
            answers=lambda method, path: method == "POST",
            not_found=Reply.json(404, {"error": "no such route"}),
            content_type="application/x-ndjson",
        )


def _no_reply(request: ReceivedRequest) -> Reply:
    return Reply.json(500, {"error": "no scripted reply"})


def text(index: int, text: str, citation: dict[str, Any] | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": text}
    if citation is not None:
        part["citation"] = {"type": "citation", **citation}
    return {"delta": {"index": index, "part": part}}


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def stream(*documents: dict[str, Any], sse: bool = False, pause: float = 0.0) -> Reply:
    body: list[Step] = []
    for document in documents:
        line = json.dumps(document, ensure_ascii=False)
        body.append(f"data: {line}\n\n" if sse else f"{line}\n")
        if pause:
            body.append(Sleep(pause))
    return Reply(body=body)


def error(status: int, message: str, **headers: str) -> Reply:
    return Reply.json(status, {"error": {"message": message}}, headers)
