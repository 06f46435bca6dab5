"""Google Gemini with Google Search grounding: its stream → typed events, and the client.

The one place that reads Gemini's `GenerateContentResponse` JSON (docs/PROTOCOL.md,
"Gemini"). The answer is the concatenation of
candidate 0's text parts across chunks; `groundingMetadata` may come on any chunk and is merged;
segment offsets are UTF-8 **byte** offsets into the answer and become code-point offsets here.
The live client reads the body the official SDK receives, line by line, with the same reader
and adapter that `render_stream --provider gemini` uses, so both read alike; a chunk whose shape
the SDK refuses (a non-integer offset) costs that citation, not the turn.
"""

from __future__ import annotations

import asyncio
import bisect
import functools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pydantic

from chats.agent import events
from chats.agent._http import Upstream, host_of, http_transport, redact, refused, stream_timeout
from chats.agent.events import AgentEvent
from chats.agent.json_values import as_count, as_dict, as_list, is_count
from chats.agent.providers.attempts import (
    TRANSPORT_ERRORS,
    RetryingClient,
    refusal,
    transport_failure,
)
from chats.agent.request import AgentRequest, ConversationTurn
from chats.agent.sse import StreamMessage, StreamReader
from citations.references import Citation, Passage, SourceDocument, ToolCall
from citations.sources import bounded_key, content_key, http_url, one_line, url_host

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_MODEL = "gemini-2.5-flash"
API_VERSION = "v1beta"  # where Google documents Search grounding (the SDK defaults to v1)
WEB_SEARCH = "web_search"
GEMINI = Upstream(
    "Gemini",
    brand="Gemini",
    variable="GEMINI_API_KEY",
    bad_key_statuses=frozenset({401, 403}),
    not_found="the model (check GEMINI_MODEL)",
)

# finishReason values that end the answer normally; any other is a stop we tell the user about.
FINISHED = frozenset({"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"})
STOP_MESSAGES = {
    "SAFETY": "Gemini blocked this answer for safety reasons.",
    "RECITATION": "Gemini stopped this answer because it was reciting a source too closely.",
    "BLOCKLIST": "Gemini blocked this answer because it contained blocked terms.",
    "PROHIBITED_CONTENT": "Gemini blocked this answer as prohibited content.",
    "SPII": "Gemini blocked this answer because it contained sensitive personal information.",
    "IMAGE_SAFETY": "Gemini blocked this answer for safety reasons.",
    "LANGUAGE": "Gemini stopped this answer: the language is not supported.",
}
PROMPT_BLOCK_MESSAGES = {
    "SAFETY": "Gemini blocked this question for safety reasons.",
    "BLOCKLIST": "Gemini blocked this question because it contained blocked terms.",
    "PROHIBITED_CONTENT": "Gemini blocked this question as prohibited content.",
    "IMAGE_SAFETY": "Gemini blocked this question for safety reasons.",
}


class GeminiAdapter:
    """One streamed `generateContent` response → answer chunks, searches, citations, completion.

    Citations, the search audit and completion are emitted at `close()`: grounding metadata may
    come on any chunk and its byte offsets can only be read against the whole answer. A stream
    that ends without a finishReason was cut, so it gets no CompleteEvent (the turn ends
    interrupted, with what arrived and its citations).
    """

    def __init__(self) -> None:
        self._answer: list[str] = []
        self._queries: list[str] = []
        self._sources: list[dict[str, Any]] = []  # every groundingChunk, in arrival order
        self._supports: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
        self._usage: dict[str, Any] = {}
        self._model_version = ""
        self._finish_reason = ""
        self._failed = False

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        document, raw = message.document, message.text
        if isinstance(document.get("error"), dict):  # an error sent mid-stream
            self._failed = True
            return [events.ErrorEvent(error=_error_event_message(document["error"]), raw=raw)]
        if not any(k in document for k in ("candidates", "promptFeedback", "usageMetadata")):
            return None
        found: list[AgentEvent] = []
        if isinstance(document.get("usageMetadata"), dict):
            self._usage = document["usageMetadata"]  # cumulative: the last one is the total
        if isinstance(document.get("modelVersion"), str):
            self._model_version = document["modelVersion"]
        candidate = _first_candidate(document.get("candidates"))
        text = _answer_text(candidate)
        if text:
            self._answer.append(text)
            found.append(events.AnswerEvent(content=text, raw=raw))
        metadata = candidate.get("groundingMetadata")
        if isinstance(metadata, dict):
            found.extend(self._merge_metadata(metadata, raw))
        reason = candidate.get("finishReason")
        if isinstance(reason, str) and reason:
            self._finish_reason = reason
            if reason not in FINISHED and not self._failed:
                self._failed = True
                message_text = STOP_MESSAGES.get(reason, f"Gemini stopped this answer ({reason}).")
                found.append(events.ErrorEvent(error=message_text, raw=raw))
        feedback = document.get("promptFeedback")
        block = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if isinstance(block, str) and block and not self._failed:
            self._failed = True
            found.append(
                events.ErrorEvent(
                    error=PROMPT_BLOCK_MESSAGES.get(
                        block, f"Gemini refused this question ({block})."
                    ),
                    raw=raw,
                )
            )
        return found

    def close(self) -> list[AgentEvent]:
        found: list[AgentEvent] = []
        if self._queries:
            found.append(
                events.AuditEvent(
                    tool_calls=tuple(
                        ToolCall(
                            tool_id=f"{WEB_SEARCH}-{n}",
                            kind=WEB_SEARCH,
                            title=one_line(query),
                            data={"query": query},
                        )
                        for n, query in enumerate(self._queries, start=1)
                    )
                )
            )
        citations = self._citations()
        if citations:
            found.append(events.GroundingEvent(citations=tuple(citations)))
        if self._finish_reason and not self._failed:
            found.append(events.CompleteEvent(consumption=self._consumption()))
        return found

    # --- grounding ------------------------------------------------------------------------

    def _merge_metadata(self, metadata: dict[str, Any], raw: str) -> list[AgentEvent]:
        """Take a chunk's queries, sources and supports; announce new searches at once.

        A chunk's supports index that chunk's own `groundingChunks` when it sends some, else
        every chunk received so far (metadata split across chunks).
        """
        found: list[AgentEvent] = []
        for query in as_list(metadata.get("webSearchQueries")):
            if isinstance(query, str) and query.strip() and query not in self._queries:
                self._queries.append(query)
                found.append(
                    events.ActionEvent(
                        tool_name=WEB_SEARCH, tool_arguments={"query": query}, raw=raw
                    )
                )
        chunks = [as_dict(c) for c in as_list(metadata.get("groundingChunks"))]
        self._sources.extend(chunks)
        indexable = chunks or list(self._sources)
        for support in as_list(metadata.get("groundingSupports")):
            if isinstance(support, dict):
                self._supports.append((support, indexable))
        return found

    def _citations(self) -> list[Citation]:
        answer = "".join(self._answer)
        offsets = _CodePointOffsets(answer)
        citations: list[Citation] = []
        seen: set[tuple[Any, ...]] = set()
        for support, chunks in self._supports:
            for citation in _support_citations(support, chunks, offsets):
                key = (
                    citation.start,
                    citation.end,
                    citation.source.key if citation.source else citation.problem,
                )
                if key not in seen:  # the same support repeated on a later chunk
                    seen.add(key)
                    citations.append(citation)
        return citations

    def _consumption(self) -> tuple[dict[str, Any], ...]:
        if not self._usage:
            return ()
        usage = self._usage
        tier: dict[str, Any] = {
            "type": self._model_version or "gemini",
            "input_tokens": as_count(usage.get("promptTokenCount")),
            "output_tokens": as_count(usage.get("candidatesTokenCount")),
            "cached_tokens": as_count(usage.get("cachedContentTokenCount")),
        }
        if "thoughtsTokenCount" in usage:
            tier["reasoning_tokens"] = as_count(usage.get("thoughtsTokenCount"))
        return (tier,)


class _CodePointOffsets:
    """Convert UTF-8 byte offsets into the answer to code-point offsets.

    An offset inside a multibyte character (Gemini should never send one) snaps forward to the
    next character boundary, so a span never splits a character and a marker never lands
    inside one. An offset past the end stays past the end, for the resolver to refuse.
    """

    def __init__(self, answer: str) -> None:
        self._starts: list[int] = []  # byte offset where each code point starts
        position = 0
        for char in answer:
            self._starts.append(position)
            position += len(char.encode("utf-8", "surrogatepass"))
        self._length = position
        self._chars = len(answer)

    def __call__(self, byte_offset: int) -> int:
        if byte_offset > self._length:
            return self._chars + (byte_offset - self._length)
        return bisect.bisect_left(self._starts, byte_offset)


def _support_citations(
    support: dict[str, Any], chunks: list[dict[str, Any]], offsets: _CodePointOffsets
) -> list[Citation]:
    """One Citation per index in `groundingChunkIndices`, all citing the support's segment."""
    segment = as_dict(support.get("segment"))
    part = segment.get("partIndex", 0)
    start_byte = segment.get("startIndex", 0)  # omitted when 0 (proto3 JSON)
    end_byte = segment.get("endIndex")
    problem = ""
    if not is_count(start_byte) or not is_count(end_byte):
        problem = "segment offsets are not integers"
    elif part not in (0, None):
        # Streamed answers are one text part; a later part is not something we can place.
        problem = f"segment is in part {part}; only part 0 is the answer"
    start = offsets(start_byte) if not problem else None
    end = offsets(end_byte) if not problem else None
    indices = support.get("groundingChunkIndices")
    scores = support.get("confidenceScores")
    scores = as_list(scores)
    citations = []
    for position, index in enumerate(as_list(indices)):
        score = scores[position] if position < len(scores) else None
        is_number = isinstance(score, int | float) and not isinstance(score, bool)
        relevance = score if is_number else None
        valid_index = is_count(index) and index < len(chunks)
        source = grounding_source(chunks[index]) if valid_index else None
        # A file-search or retrieval chunk carries the source's own text: that is the passage.
        # A web chunk has none: the segment's text is the answer's own words, and a claim checked
        # against itself always "passes"; the site reads the page instead (citations.pages).
        own_text = _retrieved_text(chunks[index]) if valid_index else ""
        passages = (
            (Passage(text=own_text, relevance=relevance),)
            if isinstance(own_text, str) and own_text.strip()
            else ()
        )
        citations.append(
            Citation(
                start=start,
                end=end,
                source=source,
                passages=passages,
                problem=problem or ("" if valid_index else f"no grounding chunk {index!r}"),
                data={
                    "segment": segment,
                    "grounding_chunk_index": index,
                    "confidence": relevance,
                    "byte_start": start_byte,
                    "byte_end": end_byte,
                },
            )
        )
    return citations


def grounding_source(chunk: dict[str, Any]) -> SourceDocument:
    """Return a `groundingChunks[]` entry (`web` or `retrievedContext`) as a source."""
    web = chunk.get("web") if isinstance(chunk.get("web"), dict) else None
    detail = web or as_dict(chunk.get("retrievedContext"))
    raw_url = detail.get("uri") if isinstance(detail.get("uri"), str) else ""
    url = http_url(raw_url)
    title = one_line(detail.get("title"))
    # A retrieved document without a title is named by its file's name, not "Source".
    document = "" if web is not None else _file_name(raw_url or detail.get("documentName"))
    return SourceDocument(
        key=bounded_key("url", raw_url) or bounded_key("title", title) or content_key(chunk),
        type="WEB" if web is not None else "DOCUMENT",
        name=title or document or url_host(url) or one_line(detail.get("domain")) or "Source",
        headline=title if web is None else "",
        url=url,
        data=chunk,
    )


def _retrieved_text(chunk: dict[str, Any]) -> str:
    """The text of a `retrievedContext` chunk (file search, RAG), or ""."""
    detail = chunk.get("retrievedContext")
    if not isinstance(detail, dict):
        return ""
    rag = as_dict(detail.get("ragChunk"))
    for text in (detail.get("text"), rag.get("text")):
        if isinstance(text, str) and text.strip():
            return text
    return ""


def _file_name(value: Any) -> str:
    """The last segment of a document's URI or resource name ("gs://b/q3.pdf" → "q3.pdf")."""
    if not isinstance(value, str):
        return ""
    return one_line(value.rstrip("/").rsplit("/", 1)[-1])


def _first_candidate(candidates: Any) -> dict[str, Any]:
    """Candidate 0: the one whose `index` is 0 (omitted when 0)."""
    for candidate in as_list(candidates):
        if isinstance(candidate, dict) and candidate.get("index", 0) == 0:
            return candidate
    return {}


def _answer_text(candidate: dict[str, Any]) -> str:
    """The chunk's text parts, skipping the model's thoughts (not part of the answer)."""
    content = candidate.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return "".join(
        part["text"]
        for part in as_list(parts)
        if isinstance(part, dict) and isinstance(part.get("text"), str) and not part.get("thought")
    )


def _error_event_message(error: dict[str, Any]) -> str:
    detail = redact(str(error.get("message") or error.get("status") or ""))
    return f"Gemini reported an error: {detail}" if detail else "Gemini reported an error."


# --- the client -----------------------------------------------------------------------------


def request_contents(request: AgentRequest) -> list[dict[str, Any]]:
    """The branch's history as alternating user/model contents, then the new question.

    Gemini keeps no conversation on its side, so every follow-up resends the branch.
    """
    contents: list[dict[str, Any]] = []
    for turn in request.history:
        contents.extend(_turn_contents(turn))
    contents.append({"role": "user", "parts": [{"text": request.message}]})
    return contents


def _turn_contents(turn: ConversationTurn) -> list[dict[str, Any]]:
    contents = [{"role": "user", "parts": [{"text": turn.question}]}]
    if turn.answer:
        contents.append({"role": "model", "parts": [{"text": turn.answer}]})
    return contents


class GeminiClient(RetryingClient):
    """One streamed, search-grounded answer from Gemini through the official google-genai SDK.

    The SDK is given our own httpx client, so that connect and idle timeouts, TLS and errors are
    the same as the Bigdata client's; its own retries are off, since we retry only before the
    first event.
    """

    async def _attempt(self) -> AsyncIterator[AgentEvent]:
        genai, errors, types = await asyncio.to_thread(load_sdk)

        timeout = stream_timeout(connect=self.config.connect_timeout, idle=self.config.idle_timeout)
        reader = self._reader(GeminiAdapter())
        transport = _WireTap(http_transport(), timeout, reader)
        async with httpx.AsyncClient(timeout=timeout, transport=transport) as http:
            client = genai.Client(
                api_key=self.config.api_key,
                http_options=types.HttpOptions(
                    base_url=self.config.url or DEFAULT_BASE_URL,
                    api_version=API_VERSION,
                    httpx_async_client=http,
                ),
            )
            config = types.GenerateContentConfig(
                tools=[types.Tool(google_search=types.GoogleSearch())],
                # No function tools are declared; this also silences the SDK's per-call notice.
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            )
            started = False
            try:
                stream = await client.aio.models.generate_content_stream(
                    model=self.config.model or DEFAULT_MODEL,
                    contents=request_contents(self.request),
                    config=config,
                )
                try:
                    async for _response in stream:  # the SDK reads what the tap reads first
                        for event in transport.take():
                            started = True
                            yield event
                except pydantic.ValidationError as error:
                    # The SDK refused one chunk's shape (a non-integer offset, say): our
                    # adapter reads it as it does a saved body, so only what is wrong is lost.
                    logger.warning(
                        "Gemini sent a chunk the SDK could not read (%d errors)",
                        error.error_count(),
                    )
                    await transport.drain()
            except errors.APIError as error:
                raise self._api_error(error, started) from None
            except TRANSPORT_ERRORS as error:
                host = host_of(self.config.url or DEFAULT_BASE_URL)
                raise transport_failure(error, started, "Gemini", host, self.config) from None
            for event in [*transport.take(), *reader.close()]:
                yield event

    def _api_error(self, error: Any, started: bool) -> Exception:
        """Map the SDK's APIError (Google's error JSON) to the user's message."""
        status = int(error.code or 0)
        detail = redact(str(error.message or error.status or ""), self.config.api_key)
        body = redact(json.dumps(error.details, default=str), self.config.api_key)
        bad_key = status == 400 and ("API_KEY_INVALID" in body or "API key not valid" in body)
        headers = getattr(getattr(error, "response", None), "headers", None)
        return refusal(refused(GEMINI, status, detail, bad_key=bad_key), headers, started=started)


@functools.cache
def load_sdk() -> tuple[Any, Any, Any]:
    """Import google-genai once: 2-3 s of CPU. Runs call it in a thread, which still leaves the
    loop ~1.5 s behind on first use (the import holds the GIL), so a process serving Gemini
    should call it at startup."""
    from google import genai
    from google.genai import errors, types

    return genai, errors, types


class _FixedTimeouts(httpx.AsyncBaseTransport):
    """Apply our timeouts to every request: the SDK passes `timeout=None` (none at all) per call,
    which would let a silent stream hang forever instead of ending as stalled."""

    def __init__(self, inner: httpx.AsyncBaseTransport, timeout: httpx.Timeout) -> None:
        self._inner = inner
        self._timeout = timeout.as_dict()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.extensions["timeout"] = self._timeout
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WireTap(_FixedTimeouts):
    """Our timeouts, and a copy of the answer's body read by our own reader as the SDK reads it.

    The stream is asked for unencoded (`identity`): the tap sees the bytes as sent.
    """

    def __init__(
        self, inner: httpx.AsyncBaseTransport, timeout: httpx.Timeout, reader: StreamReader
    ) -> None:
        super().__init__(inner, timeout)
        self._reader = reader
        self._events: list[AgentEvent] = []
        self._body: _TeeStream | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await super().handle_async_request(request)
        if response.status_code == 200 and isinstance(response.stream, httpx.AsyncByteStream):
            self._body = _TeeStream(response.stream, self._take)
            response.stream = self._body
        return response

    def _take(self, chunk: bytes) -> None:
        self._events.extend(self._reader.feed(chunk))

    def take(self) -> list[AgentEvent]:
        """The events read since the last call."""
        taken, self._events = self._events, []
        return taken

    async def drain(self) -> None:
        """Read the rest of the body ourselves (the SDK stopped reading it)."""
        if self._body is not None:
            await self._body.drain()


class _TeeStream(httpx.AsyncByteStream):
    """A response body that hands each chunk to `take` as it passes on."""

    def __init__(self, inner: httpx.AsyncByteStream, take: Any) -> None:
        self._inner = inner
        self._chunks = inner.__aiter__()
        self._take = take

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            self._take(chunk)
            yield chunk

    async def drain(self) -> None:
        async for chunk in self._chunks:
            self._take(chunk)

    async def aclose(self) -> None:
        await self._inner.aclose()
