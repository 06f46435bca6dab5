"""An agent built on llm-sdk (hoangvvo/llm-sdk): its stream → typed events, and the client.

The one place that reads llm-sdk's `PartialModelResponse` lines (docs/PROTOCOL.md, "llm-sdk
agents"): `{"delta": {"index": N, "part": {...}}}` and `{"usage": {...}}`, one per JSON line or SSE
`data:` line. Deltas merge per part index as llm-sdk's `StreamAccumulator` does: text is appended,
each `citation` appended to that part's list, and a text part's citations cite that part's whole
text.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from chats.agent import events
from chats.agent._http import Upstream, error_detail, redact, refused
from chats.agent.events import AgentEvent
from chats.agent.json_values import is_int
from chats.agent.providers.attempts import RetryingClient, posted_events, refusal
from chats.agent.request import AgentRequest
from chats.agent.sse import StreamMessage
from citations.references import Citation, Passage, SourceDocument
from citations.sources import bounded_key, content_key, http_url, one_line, url_host

logger = logging.getLogger(__name__)

LLM_SDK = Upstream(
    "the llm-sdk agent",
    brand="llm-sdk agent",
    variable="LLMSDK_AGENT_TOKEN",
    credential="token",
    bad_key_statuses=frozenset({401, 403}),
)


@dataclass
class _TextPart:
    runs: list[list[int]] = field(default_factory=list)  # [start, end) spans in the answer
    citations: list[dict[str, Any]] = field(default_factory=list)


class LlmSdkAdapter:
    """One llm-sdk response stream → answer chunks, citations and completion with usage.

    Text is shown as it arrives, so the answer is the text deltas in arrival order. Agents send
    a part's deltas together and parts in index order, and then this is exactly the
    StreamAccumulator's index-ordered text. If deltas of two text parts interleave anyway, each
    contiguous run of a part's text is cited (markers after each run), since text already shown
    cannot be moved. The stream has no end message: its clean end completes the answer.
    """

    def __init__(self, model: str = "") -> None:
        self.model = model
        self._parts: dict[int, _TextPart] = {}
        self._kinds: dict[int, str] = {}
        self._answer_length = 0
        self._last_text_index: int | None = None
        self._usage: dict[str, int] = {}
        self._failed = False

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        document, raw = message.document, message.text
        if "error" in document and "delta" not in document:
            self._failed = True
            return [events.ErrorEvent(error=_error_message(document["error"]), raw=raw)]
        if "delta" not in document and "usage" not in document:
            return None
        found: list[AgentEvent] = []
        delta = document.get("delta")
        if isinstance(delta, dict):
            found.extend(self._delta(delta, raw))
        usage = document.get("usage")
        if isinstance(usage, dict):
            for name, value in usage.items():  # summed, as the accumulator does
                if is_int(value):
                    self._usage[name] = self._usage.get(name, 0) + value
        return found

    def _delta(self, delta: dict[str, Any], raw: str) -> list[AgentEvent]:
        index, part = delta.get("index"), delta.get("part")
        if not isinstance(index, int) or isinstance(index, bool) or not isinstance(part, dict):
            return []
        kind = part.get("type")
        if self._kinds.setdefault(index, str(kind)) != kind:
            # llm-sdk refuses a delta whose type differs from its part's: skip it likewise.
            logger.debug("llm-sdk delta of type %r for a %r part", kind, self._kinds[index])
            return []
        text = part.get("text") if isinstance(part.get("text"), str) else ""
        if kind == "reasoning":
            return [events.ThinkingEvent(content=text, raw=raw)] if text else []
        if kind != "text":
            return []  # tool calls, images, audio: not part of the answer
        state = self._parts.setdefault(index, _TextPart())
        if isinstance(part.get("citation"), dict):
            state.citations.append(part["citation"])
        if not text:
            return []
        end = self._answer_length + len(text)
        continues = state.runs and state.runs[-1][1] == self._answer_length
        if self._last_text_index == index and continues:
            state.runs[-1][1] = end
        else:
            state.runs.append([self._answer_length, end])
        self._answer_length = end
        self._last_text_index = index
        return [events.AnswerEvent(content=text, raw=raw)]

    def close(self) -> list[AgentEvent]:
        found: list[AgentEvent] = []
        citations = [
            citation
            for index in sorted(self._parts)
            for citation in _part_citations(index, self._parts[index])
        ]
        if citations:
            found.append(events.GroundingEvent(citations=tuple(citations)))
        if not self._failed:
            consumption = ({"type": self.model or "llm-sdk", **self._usage},) if self._usage else ()
            found.append(events.CompleteEvent(consumption=consumption))
        return found


def _part_citations(index: int, part: _TextPart) -> list[Citation]:
    if not part.runs:  # a cited part with no text: its sources are cited, not placed
        return [
            citation_of(data, start=None, end=None, part_index=index) for data in part.citations
        ]
    return [
        citation_of(data, start=start, end=end, part_index=index)
        for data in part.citations
        for start, end in part.runs
    ]


def citation_of(data: dict[str, Any], *, start: int | None, end: int | None, part_index: int):
    """Return one llm-sdk `Citation` as ours: the part's text is the claim."""
    source = data.get("source")
    cited_text = data.get("cited_text")
    return Citation(
        start=start,
        end=end,
        source=source_document(data) if isinstance(source, str) and source.strip() else None,
        passages=(
            (Passage(text=cited_text),)
            if isinstance(cited_text, str) and cited_text.strip()
            else ()
        ),
        problem="" if isinstance(source, str) and source.strip() else "citation has no source",
        # start_index/end_index index the source document: kept as evidence, not placed.
        data={**data, "part_index": part_index},
        unplaced=start is None and end is None,
    )


def source_document(citation: dict[str, Any]) -> SourceDocument:
    """The cited document: `source` (a URL or an identifier) is its key, `title` its name."""
    source = citation["source"].strip()
    url = http_url(source)
    title = one_line(citation.get("title"))
    return SourceDocument(
        key=(bounded_key("url", source) if url else bounded_key("source", source))
        or content_key(source),
        type="WEB" if url else "DOCUMENT",
        name=title or url_host(url) or one_line(source) or "Source",
        headline=title,
        url=url,
        data={key: citation.get(key) for key in ("source", "title") if key in citation},
    )


def _error_message(error: Any) -> str:
    detail = error.get("message") if isinstance(error, dict) else error
    detail = redact(str(detail or ""))
    return (
        f"The llm-sdk agent reported an error: {detail}"
        if detail
        else ("The llm-sdk agent reported an error.")
    )


# --- the client -----------------------------------------------------------------------------


def request_body(request: AgentRequest, model: str = "") -> dict[str, Any]:
    """llm-sdk's `LanguageModelInput` shape: the branch's history, then the new question.

    Each earlier turn is a user message and an assistant message of one text part; `model` is
    sent only when LLMSDK_AGENT_MODEL names one.
    """
    messages: list[dict[str, Any]] = []
    for turn in request.history:
        messages.append(_message("user", turn.question))
        if turn.answer:
            messages.append(_message("assistant", turn.answer))
    messages.append(_message("user", request.message))
    body: dict[str, Any] = {"messages": messages}
    if model:
        body["model"] = model
    return body


def _message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


class LlmSdkClient(RetryingClient):
    """POST the conversation to an llm-sdk agent and read its JSON-lines (or SSE) stream."""

    def _attempt(self) -> AsyncIterator[AgentEvent]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/x-ndjson, text/event-stream",
        }
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return posted_events(
            self.config.url,
            request_body(self.request, self.config.model),
            headers,
            self._reader(LlmSdkAdapter(self.config.model), json_lines=True),
            refuse=self._http_error,
            agent="the llm-sdk agent",
            timeouts=self.config,
        )

    def _http_error(self, response: httpx.Response) -> Exception:
        detail = redact(error_detail(response), self.config.api_key)
        return refusal(refused(LLM_SDK, response.status_code, detail), response.headers)
