"""Time the OpenAI/xAI adapter reading an answer with many inline citation links.

    .venv/bin/python bench/adapter_links.py [--links N] [--repeat N]

An xAI Responses stream whose answer has N sentences, each closed by an inline link
`[[k]](url)` that one `url_citation` annotation spans (N links x N citations, 8,000 by
default), streamed in 40-character deltas with each annotation right after its text, then
repeated in `response.completed` as the API does. The baseline is the same stream at a tenth of
the size, scaled x10: reading must grow linearly, so the goal is within 2x of it. The adapter
runs on the event loop, so its time is a stall of every chat the process serves. Not a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine
from _site import best_of

from chats.agent.providers.responses import ResponsesAdapter
from chats.agent.sse import StreamMessage

DELTA_CHARS = 40
GOAL = 2.0


def stream_messages(links: int) -> list[StreamMessage]:
    """The stream's messages, decoded as `chats.agent.sse` hands them to the adapter."""
    text, annotations, messages = "", [], []

    def send(document: dict) -> None:
        messages.append(StreamMessage(event=document["type"], document=document, text=""))

    for n in range(1, links + 1):
        sentence = f"Fact {n} about the quarter moved the market by {n % 97}%."
        url = f"https://news.example/{n}"
        link = f"[[{n}]]({url})"
        piece = sentence + link + " "
        start = len(text) + len(sentence)
        annotation = {
            "type": "url_citation",
            "url": url,
            "title": str(n),
            "start_index": start,
            "end_index": start + len(link),
        }
        for i in range(0, len(piece), DELTA_CHARS):
            send(
                {
                    "type": "response.output_text.delta",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece[i : i + DELTA_CHARS],
                }
            )
        text += piece
        annotations.append(annotation)
        send(
            {
                "type": "response.output_text.annotation.added",
                "output_index": 0,
                "content_index": 0,
                "annotation": annotation,
            }
        )
    send({"type": "response.output_text.done", "output_index": 0, "content_index": 0})
    message = {
        "type": "message",
        "content": [{"type": "output_text", "text": text, "annotations": annotations}],
    }
    send({"type": "response.completed", "response": {"id": "resp_b", "output": [message]}})
    return messages


def read(messages: list[StreamMessage]) -> int:
    """Read the stream; return the citations it gave."""
    adapter = ResponsesAdapter("xai")
    citations = 0
    for message in messages:
        for event in adapter.feed(message) or ():
            citations += len(getattr(event, "citations", ()))
    for event in adapter.close():
        citations += len(getattr(event, "citations", ()))
    return citations


def best(messages: list[StreamMessage], repeat: int) -> tuple[float, int]:
    """The best seconds of CPU to read the stream, and the citations it gave."""
    return best_of(repeat, lambda: read(messages))[1], read(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    small, large = args.links // 10, args.links
    small_seconds, small_citations = best(stream_messages(small), args.repeat)
    large_seconds, large_citations = best(stream_messages(large), args.repeat)
    baseline = small_seconds * 10
    ratio = large_seconds / baseline
    print(f"{small:,} links x {small:,} citations: {small_seconds * 1000:.1f} ms CPU")
    print(f"{large:,} links x {large:,} citations: {large_seconds * 1000:.1f} ms CPU")
    print(f"citations read: {small_citations:,} and {large_citations:,}")
    verdict = "within" if ratio <= GOAL else "NOT within"
    print(
        f"ratio to the linear baseline ({small:,} scaled x10 = {baseline * 1000:.1f} ms):"
        f" {ratio:.2f}x, {verdict} {GOAL:g}x"
    )


if __name__ == "__main__":
    main()
