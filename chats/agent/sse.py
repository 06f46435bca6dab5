"""Turn the lines of a streaming body into typed agent events, through a provider's adapter.

Every provider here writes one JSON document per `data:` line, and the Research Agent may end
each event with a single newline rather than the blank line the SSE specification dispatches on
(docs/PROTOCOL.md, "Events"), so a message is dispatched as soon as its `data:` line is complete; an
`event:` line before it names it (OpenAI, xAI and Anthropic send one). Lines are split as the
specification says (CRLF, CR or LF) and capped in length, so one endless line cannot exhaust memory.
httpx-sse's public API dispatches only on blank lines and cannot cap a line, hence this reader.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import replace
from typing import Any, AnyStr, NamedTuple, Protocol

import orjson

from chats.agent.events import AgentEvent, SkippedEvent

logger = logging.getLogger(__name__)

# AGENT_MAX_LINE_BYTES's default. A Research Agent answer sends all its references in one
# GROUNDING line: 10,000 references measured 4.06 MB in the agent's documented shape, and
# 7.34 MB with a 250-character passage each (tests/grounding_bodies.py). 16 MiB leaves twice
# that. Lines are capped in characters, which a UTF-8 line never has more of than bytes.
DEFAULT_MAX_LINE_CHARS = 16 * 1024 * 1024
SKIPPED_HEAD_CHARS = 400  # what is kept of a skipped line, to say what it was

# What a skipped line was, by the message type near its start (the Research Agent's and the
# other providers' names), said as the subject of "... was over AGENT_MAX_LINE_BYTES".
_MESSAGE_TYPE = re.compile(r'"type"\s*:\s*"([A-Za-z_.]{1,60})"')
_WHAT_WAS_LOST = {
    "GROUNDING": ("The agent's sources", True),
    "AUDIT": ("The agent's tool calls", True),
    "ANSWER": ("Part of the answer", False),
    "CHART": ("A chart", False),
    "STRUCTURED_OUTPUT": ("The structured output", False),
    "PLANNING": ("The agent's research plan", False),
    "response.completed": ("The end of the answer, with its sources,", False),
    "response.output_text.annotation.added": ("A citation", False),
    "response.output_text.delta": ("Part of the answer", False),
    "content_block_delta": ("Part of the answer", False),
}

# orjson reads an integer past 64 bits as a float, so text with 19 digits in a row (the first
# such integers have 19) goes to `json`. Found by mapping every digit to "0" and anything else
# to " " in C: a third of what a regular expression's search costs.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_NUMBER = b"0" * 19


def json_document(text: str | bytes) -> Any:
    """Parse one JSON document as the standard library does, ~4x faster for an event's line.

    orjson reads what nearly every line is; what it refuses or could read differently (NaN,
    1e999, lone surrogates, integers past 64 bits) goes to `json`, which keeps them for
    `chats.run.storable` to judge. Bytes are read as UTF-8, what is not UTF-8 as U+FFFD (as
    the text of a body decoded with errors="replace"). Raises ValueError (or RecursionError)
    for text that is not JSON.
    """
    raw = text if type(text) is bytes else text.encode("utf-8", "surrogatepass")
    if _LONG_NUMBER not in raw.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(_text(text))


# A tuple: one is built per line, in a third of a frozen dataclass's time.
class StreamMessage(NamedTuple):
    """One `data:` line, decoded: the `event:` name before it (or ""), its JSON object and its
    text. Every provider's message is an object: the reader skips any other JSON."""

    event: str
    document: dict[str, Any]
    text: str

    @property
    def kind(self) -> str | None:
        """The message's type: its JSON `type`, else its `event:` name; None for neither."""
        kind = self.document.get("type") or self.event
        return kind if isinstance(kind, str) and kind else None


class StreamAdapter(Protocol):
    """A provider's wire format → typed events. One instance reads one response."""

    def feed(self, message: StreamMessage) -> Iterable[AgentEvent] | None:
        """Return the events this message completes; None when it is not this format at all."""

    def close(self) -> Iterable[AgentEvent]:
        """Return what the end of the stream completes (held-back text, merged citations)."""


class TypedMessagesAdapter:
    """A `StreamAdapter` for a wire whose every message names its type (`StreamMessage.kind`) up
    to the one that ends the response: OpenAI's and xAI's Responses API, Anthropic's Messages
    API. A message without a type is not of this stream, nothing after the end is read, and each
    event keeps the wire line it came from. A subclass reads one message in `_read` and sets
    `_finished` at the end."""

    _finished = False

    @property
    def finished(self) -> bool:
        """True once the response completed or failed: a stream that ends before was cut."""
        return self._finished

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        kind = message.kind
        if kind is None:
            return None
        if self._finished:
            return []
        events = self._read(kind, message.document)
        if events is None:
            return None
        return [replace(event, raw=message.text) for event in events]

    def _read(self, kind: str, document: dict[str, Any]) -> list[AgentEvent] | None:
        """Return the events of one message, or None when it is not a message of this stream."""
        raise NotImplementedError


def skipped_notice(head: str, size_bytes: int) -> str:
    """Say what a line skipped for its length was, from its start, and which setting bounds it:
    "The agent's sources (1.4 MB) were over AGENT_MAX_LINE_BYTES and are not shown."."""
    kinds = _MESSAGE_TYPE.findall(head)
    what, plural = next(
        (_WHAT_WAS_LOST[k] for k in kinds if k in _WHAT_WAS_LOST),
        ("An event of the agent's stream", False),
    )
    if what == "An event of the agent's stream" and '"candidates"' in head:
        what = "Part of the answer, with its sources,"  # a Gemini chunk
    verbs = ("were", "are") if plural else ("was", "is")
    return (
        f"{what} ({_size_text(size_bytes)}) {verbs[0]} over AGENT_MAX_LINE_BYTES"
        f" and {verbs[1]} not shown."
    )


def _size_text(size_bytes: int) -> str:
    if size_bytes >= 1_000_000:
        return f"{size_bytes / 1_000_000:.1f} MB"
    if size_bytes >= 1000:
        return f"{size_bytes / 1000:.0f} KB"
    return f"{size_bytes:,} bytes"


class LineSplitter:
    """Split chunks into lines on CRLF, CR or LF; a line over the cap is dropped whole.

    Chunks are all bytes (a body as it arrives: the cap counts bytes, and each line is decoded
    once, by the parser) or all text (the cap counts characters, which a UTF-8 line never has
    more of than bytes). A line break is never inside a UTF-8 character, so splitting bytes
    never cuts one. Each dropped line is recorded in `skipped` as (its first characters, its
    size in bytes).
    """

    def __init__(self, max_line_chars: int = DEFAULT_MAX_LINE_CHARS) -> None:
        self.max_line_chars = max_line_chars
        self.oversized_lines = 0
        self.skipped: list[tuple[str, int]] = []
        self._skipped_head = ""
        self._skipped_bytes = 0
        self._buffer: list[Any] = []
        self._buffered = 0
        self._skipping = False  # inside a line that is already over the cap
        self._pending_cr = False

    def decode(self, chunk: AnyStr) -> list[AnyStr]:
        lf, cr = (b"\n", b"\r") if type(chunk) is bytes else ("\n", "\r")
        if (
            chunk.endswith(lf)
            and not (self._buffer or self._skipping or self._pending_cr)
            and len(chunk) <= self.max_line_chars
            and cr not in chunk
        ):  # whole lines, as a paced agent sends them: "data: {...}\n\n"
            lines = chunk.split(lf)
            lines.pop()  # the "" after the last LF
            return lines
        if self._pending_cr and chunk.startswith(lf):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        if cr in chunk:
            return self._decode_any_line_ends(chunk, lf, cr)
        # LF only, as every agent sends: one split in C rather than a search per line.
        *complete, unfinished = chunk.split(lf)
        lines: list[AnyStr] = []
        for piece in complete:
            if self._buffer or self._skipping or len(piece) > self.max_line_chars:
                self._take(piece)
                lines.extend(self._end_line(piece[:0]))
            else:
                lines.append(piece)  # a whole line in this chunk, within the cap
        self._take(unfinished)
        return lines

    def _decode_any_line_ends(self, chunk: AnyStr, lf: AnyStr, cr: AnyStr) -> list[AnyStr]:
        lines: list[AnyStr] = []
        start = 0
        length = len(chunk)
        while start < length:
            at_cr, at_lf = chunk.find(cr, start), chunk.find(lf, start)
            end = min(i for i in (at_cr, at_lf, length) if i != -1)
            self._take(chunk[start:end])
            if end == length:
                break
            lines.extend(self._end_line(chunk[:0]))
            if chunk[end : end + 1] == cr:
                if end + 1 == length:
                    self._pending_cr = True
                elif chunk[end + 1 : end + 2] == lf:
                    end += 1
            start = end + 1
        return lines

    def flush(self) -> list[Any]:
        if not (self._buffer or self._skipping):
            return []
        return self._end_line(self._buffer[0][:0] if self._buffer else "")

    def _take(self, piece: AnyStr) -> None:
        if self._skipping:
            self._skipped_bytes += _utf8_size(piece)
            return
        if not piece:
            return
        if self._buffered + len(piece) > self.max_line_chars:
            head = _text(piece[:0].join(self._buffer)[:SKIPPED_HEAD_CHARS])
            self._skipped_head = head + _text(piece[: SKIPPED_HEAD_CHARS - len(head)])
            self._skipped_bytes = sum(map(_utf8_size, self._buffer)) + _utf8_size(piece)
            self._buffer, self._buffered, self._skipping = [], 0, True
            return
        self._buffer.append(piece)
        self._buffered += len(piece)

    def _end_line(self, empty: AnyStr) -> list[AnyStr]:
        if self._skipping:
            self._skipping = False
            self.oversized_lines += 1
            self.skipped.append((self._skipped_head, self._skipped_bytes))
            return []
        line = empty.join(self._buffer)
        self._buffer, self._buffered = [], 0
        return [line]


def _utf8_size(piece: str | bytes) -> int:
    if type(piece) is bytes:
        return len(piece)
    return len(piece.encode("utf-8", "surrogatepass"))


def _text(piece: str | bytes) -> str:
    """A line (or its start) as text: bytes are UTF-8, and what is not becomes U+FFFD."""
    return piece.decode("utf-8", "replace") if type(piece) is bytes else piece


class EventParser:
    """Read SSE lines one at a time into one adapter's events; count what had to be skipped."""

    def __init__(self, adapter: StreamAdapter) -> None:
        self.adapter = adapter
        self.unreadable_lines = 0
        self._event_name = ""

    def feed(self, line: str | bytes) -> list[AgentEvent]:
        """Return the events a line completes (none for heartbeats, comments and other fields).

        A line of bytes is UTF-8 (what is not becomes U+FFFD): its JSON is read as it is."""
        if not line:  # the blank line after each event
            self._event_name = ""
            return []
        if type(line) is bytes:
            if line.startswith(b"data: {"):  # nearly every line: one JSON object
                return self.feed_document(line[6:], event=self._event_name)
            line = line.decode("utf-8", "replace")
        elif line.startswith("data: {"):
            return self.feed_document(line[6:], event=self._event_name)
        line = line.rstrip("\r\n")
        if not line or line.startswith(":"):
            if not line:
                self._event_name = ""
            return []
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event_name = value
            return []
        if name != "data":
            return []  # id, retry and unknown fields: nothing to dispatch
        if not value.strip():
            return []
        return self.feed_document(value, event=self._event_name)

    def feed_document(self, text: str | bytes, *, event: str = "") -> list[AgentEvent]:
        """Return the events of one JSON document (a `data:` value, or one JSON line); bytes
        are UTF-8, decoded once, what is not UTF-8 as U+FFFD."""
        try:
            document = json_document(text)
        except (ValueError, RecursionError):  # RecursionError: nested too deep to parse
            return self._skip(_text(text), "not JSON")
        if not isinstance(document, dict):
            return self._skip(_text(text), "not a JSON object")
        if type(text) is bytes:
            text = text.decode("utf-8", "replace")
        return self.feed_message(StreamMessage(event, document, text))

    def feed_message(self, message: StreamMessage) -> list[AgentEvent]:
        """Return the events of one decoded message (an SDK decodes its stream itself)."""
        events = self.adapter.feed(message)
        if events is None:
            return self._skip(message.text, "not a message of this stream")
        return events if type(events) is list else list(events)

    def close(self) -> list[AgentEvent]:
        return list(self.adapter.close())

    def _skip(self, text: str, why: str) -> list[AgentEvent]:
        self.unreadable_lines += 1
        # Debug only: the run logs one line per turn with the count (10 MB of junk is 100k lines).
        logger.debug("Skipped a malformed stream line (%s): %.120r", why, text)
        return []


class StreamReader:
    """Lines in, events out: a LineSplitter in front of an EventParser."""

    def __init__(
        self,
        adapter: StreamAdapter,
        *,
        max_line_chars: int = DEFAULT_MAX_LINE_CHARS,
        json_lines: bool = False,
    ) -> None:
        self.parser = EventParser(adapter)
        self.splitter = LineSplitter(max_line_chars)
        self.json_lines = json_lines  # llm-sdk agents may send bare JSON lines instead of SSE

    @property
    def malformed_lines(self) -> int:
        return self.parser.unreadable_lines + self.splitter.oversized_lines

    def feed(self, chunk: str | bytes) -> list[AgentEvent]:
        """The events a chunk of the body completes: bytes as they arrive (decoded line by
        line), or text. One reader takes one kind."""
        events = self._lines(self.splitter.decode(chunk))
        return events + self._skipped() if self.splitter.skipped else events

    feed_text = feed

    def close(self) -> list[AgentEvent]:
        events = self._lines(self.splitter.flush())
        return events + self._skipped() + self.parser.close()

    def _skipped(self) -> list[AgentEvent]:
        """A notice for each line dropped for its length: nothing is lost in silence."""
        skipped, self.splitter.skipped = self.splitter.skipped, []
        return [SkippedEvent(notice=skipped_notice(head, size)) for head, size in skipped]

    def _lines(self, lines: list[Any]) -> list[AgentEvent]:
        if not self.json_lines:
            if len(lines) == 1:  # a paced stream: one line a read
                return self.parser.feed(lines[0])
            return [event for line in lines for event in self.parser.feed(line)]
        events: list[AgentEvent] = []
        for line in lines:
            stripped = _text(line).strip()
            if stripped.startswith(("{", "[")):
                events.extend(self.parser.feed_document(stripped))
            else:
                events.extend(self.parser.feed(line))
        return events


async def aiter_events(
    chunks: AsyncIterator[str] | AsyncIterator[bytes], reader: StreamReader
) -> AsyncIterator[AgentEvent]:
    """Yield events as the chunks of an HTTP body arrive (bytes, or text), however the chunks
    split the lines."""
    feed = reader.feed
    async for chunk in chunks:
        for event in feed(chunk):
            yield event
    for event in reader.close():
        yield event


def iter_events(text: str, reader: StreamReader) -> Iterator[AgentEvent]:
    """Yield the events of a whole body (a saved capture, say)."""
    yield from reader.feed_text(text)
    yield from reader.close()


def parse_sse_text(
    text: str, adapter: StreamAdapter, *, json_lines: bool = False
) -> tuple[list[AgentEvent], int]:
    """Return the events of a whole body and the number of malformed lines skipped."""
    reader = StreamReader(adapter, json_lines=json_lines)
    events = list(iter_events(text, reader))
    return events, reader.malformed_lines
