"""Turn the lines of an SSE body into typed agent events.

The agent writes one JSON document per `data:` line and, per seed 002, may end each event with a
single newline rather than the blank line the SSE specification uses to dispatch. httpx-sse's
`aiter_sse` dispatches only on blank lines, so it would hold every event back until the stream
ends. We keep httpx-sse's spec-correct line splitting and field parsing (comments, `event:`,
`id:`, `retry:`, CRLF) and dispatch each `data:` line as soon as it is complete.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterable, Iterator

from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from .events import AgentEvent, event_from_envelope

logger = logging.getLogger(__name__)


class EventParser:
    """Parse SSE lines one at a time; count what it had to skip."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self.malformed_lines = 0

    def feed(self, line: str) -> AgentEvent | None:
        """Return the event a line completes, or None (heartbeat, comment, other field, junk)."""
        line = line.rstrip("\r\n")
        self._decoder.decode(line)
        if not line.startswith("data"):
            return None
        # Dispatch now: one data line is one JSON document.
        sse = self._decoder.decode("")
        if sse is None or not sse.data.strip():
            return None
        try:
            document = json.loads(sse.data)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            return self._skip(sse.data, "not JSON")
        event = event_from_envelope(document)
        if event is None:
            return self._skip(sse.data, "no message or delta with a type")
        return event

    def _skip(self, data: str, why: str) -> None:
        self.malformed_lines += 1
        logger.warning("Skipped a malformed stream line (%s): %.120r", why, data)
        return None


def iter_events(lines: Iterable[str], parser: EventParser | None = None) -> Iterator[AgentEvent]:
    """Yield the events of an SSE body given as lines (a saved capture, say)."""
    parser = parser or EventParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


async def aiter_events(
    text_chunks: AsyncIterator[str], parser: EventParser
) -> AsyncIterator[AgentEvent]:
    """Yield events as the chunks of an HTTP body arrive, however the chunks split the lines."""
    splitter = SSELineDecoder()
    async for chunk in text_chunks:
        for line in splitter.decode(chunk):
            event = parser.feed(line)
            if event is not None:
                yield event
    for line in splitter.flush():
        event = parser.feed(line)
        if event is not None:
            yield event


def parse_sse_text(text: str) -> tuple[list[AgentEvent], int]:
    """Return the events of a whole SSE body and the number of malformed lines skipped."""
    parser = EventParser()
    splitter = SSELineDecoder()
    lines = splitter.decode(text) + splitter.flush() if text else []
    events = list(iter_events(lines, parser))
    return events, parser.malformed_lines
