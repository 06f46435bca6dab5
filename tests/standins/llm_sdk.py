"""A stand-in for an agent built on llm-sdk: it streams `PartialModelResponse` JSON lines.

Any POST path answers (the site is given the agent's whole URL); errors are JSON bodies
`{"error": {"message"}}`. `sse=True` replies write the same documents as SSE `data:` lines.
"""

from __future__ import annotations

import json
from typing import Any

from .scripted import Reply, ScriptedServer


class LlmSdkStandIn(ScriptedServer):
    stream_content_type = b"application/x-ndjson"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST"


def text(index: int, text: str, citation: dict[str, Any] | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": text}
    if citation is not None:
        part["citation"] = {"type": "citation", **citation}
    return {"delta": {"index": index, "part": part}}


def usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {"usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def stream(*documents: dict[str, Any], sse: bool = False, pause: float = 0.0) -> Reply:
    body: list[Any] = []
    for document in documents:
        line = json.dumps(document, ensure_ascii=False)
        body.append(f"data: {line}\n\n" if sse else f"{line}\n")
        if pause:
            body.append(("sleep", pause))
    return Reply(body=body)


def error(status: int, message: str, **headers: str) -> Reply:
    return Reply(status=status, body=[json.dumps({"error": {"message": message}})], headers=headers)
