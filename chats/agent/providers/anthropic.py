"""Anthropic: the Messages API stream (`stream: true`) → typed events, and its client.

The wire (docs/PROTOCOL.md, "Anthropic (Messages API)"): `message_start`, then per content block
`content_block_start`, `content_block_delta` (`text_delta`, `citations_delta`, `input_json_delta`),
`content_block_stop`; then `message_delta` (stop reason, usage), `message_stop`; or `error`. A text
block that carries citations is the cited span (its whole text), so its citations are emitted when
the block stops, marker at its end. Citation offsets (`start_char_index`...) point into the source,
not the answer: they are kept as evidence, never as answer offsets.

A long server-side search may end a message with `stop_reason: "pause_turn"`. As Anthropic
documents (https://docs.anthropic.com/en/docs/build-with-claude/tool-use/web-search-tool),
the client sends the paused content back as the last assistant message and the answer goes on
in a new response, read by the same adapter, up to `MAX_PAUSES` times.
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import anthropic
from django.conf import settings

from chats.agent import events
from chats.agent.events import AgentEvent
from chats.agent.json_values import as_count, as_dict, is_int
from chats.agent.providers.sdk import SdkStream
from chats.agent.sse import TypedMessagesAdapter
from citations.references import Citation, Passage, SourceDocument, ToolCall, web_source
from citations.sources import bounded_key, date_from_value, one_line

DOCUMENT_LOCATIONS = frozenset(
    {"char_location", "page_location", "content_block_location", "search_result_location"}
)
CUT_SHORT = "Anthropic stopped the answer at its output token limit, so it is cut short."
REFUSED = "Claude declined to answer this request (a safety refusal)."
MAX_PAUSES = 5  # pause_turn continuations of one answer; past this the answer ends there
PAUSED_TOO_OFTEN = (
    f"Anthropic paused its web search more than {MAX_PAUSES} times, so the answer is cut short."
)
USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens")
ERROR_MESSAGES = {
    "overloaded_error": "Anthropic is overloaded right now; try again in a moment.",
    "rate_limit_error": "Anthropic is rate limiting requests; try again in a moment.",
    "api_error": "Anthropic had an internal error.",
    "authentication_error": "Anthropic did not accept the API key (check ANTHROPIC_API_KEY).",
    "permission_error": "The Anthropic API key is not allowed to make this request.",
}


@dataclass
class _Block:
    type: str
    start: int  # answer offset where a text block begins
    citations: list[dict[str, Any]] = field(default_factory=list)
    has_citations: bool = False
    tool_id: str = ""
    tool_name: str = ""
    input: Any = None
    input_json: list[str] = field(default_factory=list)
    wire: dict[str, Any] = field(default_factory=dict)  # the block as sent back on a pause
    # The deltas of its "text" or "thinking", joined into `wire` once, when the block stops.
    deltas: list[str] = field(default_factory=list)


class AnthropicAdapter(TypedMessagesAdapter):
    """One Messages API response."""

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._answer_length = 0
        self._queries: dict[str, str] = {}  # server_tool_use id → its search query
        self._message_id = ""
        self._model = ""
        self._usage: dict[str, Any] = {}
        self._stop_reason = ""
        self._content: list[dict[str, Any]] = []  # the answer's blocks so far, as on the wire
        self._message_blocks: dict[int, dict[str, Any]] = {}  # this message's, by index
        self._usage_before: dict[str, int] = {}  # the paused messages' token counts
        self.pauses = 0
        self.paused = False
        self.container_id = ""  # a container tool's, to reuse when continuing

    @property
    def paused_content(self) -> list[dict[str, Any]]:
        """The assistant content to send back to continue a paused answer (every block so far,
        as the API sent it: search results keep their encrypted content).

        The API refuses a final assistant message that ends with whitespace, so a last text
        block is sent without its trailing blanks (the answer shown keeps them).
        """
        content = copy.deepcopy(self._content)
        if content and content[-1].get("type") == "text":
            content[-1]["text"] = str(content[-1].get("text") or "").rstrip()
        return content

    def close(self) -> list[AgentEvent]:
        return []  # text is emitted as it arrives; a stream without message_stop was cut

    def _read(self, kind: str, document: dict[str, Any]) -> list[AgentEvent] | None:
        match kind:
            case "message_start":
                self.paused = False
                self._stop_reason = ""
                started = as_dict(document.get("message"))
                self._note_container(started.get("container"))
                self._message_id = str(started.get("id") or "")
                self._model = str(started.get("model") or "")
                self._usage.update(as_dict(started.get("usage")))
                return []
            case "content_block_start":
                index, block = document.get("index"), document.get("content_block")
                if not is_int(index) or not isinstance(block, dict):
                    return None
                return self._block_start(index, block)
            case "content_block_delta":
                index = document.get("index")
                block = self._blocks.get(index) if is_int(index) else None
                delta = document.get("delta")
                if block is None or not isinstance(delta, dict):
                    return None
                return self._block_delta(block, delta)
            case "content_block_stop":
                index = document.get("index")
                block = self._blocks.pop(index, None) if is_int(index) else None
                return self._block_stop(block) if block is not None else []
            case "message_delta":
                self._note_container(as_dict(document.get("delta")).get("container"))
                self._stop_reason = str(as_dict(document.get("delta")).get("stop_reason") or "")
                self._usage.update(as_dict(document.get("usage")))
                return []
            case "message_stop":
                if self._stop_reason == "pause_turn" and self.pauses < MAX_PAUSES:
                    return self._pause()
                return self._stop()
            case "error":
                self._finished = True
                error = as_dict(document.get("error"))
                detail = one_line(error.get("message"))
                message = ERROR_MESSAGES.get(error.get("type")) or (
                    f"Anthropic reported an error: {detail}"[:500]
                    if detail
                    else "Anthropic reported an error."
                )
                return [events.ErrorEvent(error=message)]
        return []  # ping and future types

    def _note_container(self, container: Any) -> None:
        if isinstance(as_dict(container).get("id"), str):
            self.container_id = as_dict(container)["id"]

    def _block_start(self, index: int, data: dict[str, Any]) -> list[AgentEvent]:
        kind = str(data.get("type") or "")
        block = _Block(type=kind, start=self._answer_length, wire=copy.deepcopy(data))
        self._blocks[index] = block
        self._message_blocks[index] = block.wire
        found: list[AgentEvent] = []
        if kind == "text":
            block.has_citations = isinstance(data.get("citations"), list)
            block.citations.extend(c for c in data.get("citations") or () if isinstance(c, dict))
            if isinstance(data.get("text"), str) and data["text"]:
                found.append(self._text(data["text"]))
        elif kind == "server_tool_use":
            block.tool_id = str(data.get("id") or "")
            block.tool_name = str(data.get("name") or "")
            block.input = data.get("input") or None
        elif kind == "web_search_tool_result":
            found.extend(self._search_result(data))
        return found

    def _block_delta(self, block: _Block, delta: dict[str, Any]) -> list[AgentEvent] | None:
        wire = block.wire
        match delta.get("type"):
            case "text_delta":
                text = delta.get("text")
                if not isinstance(text, str):
                    return None
                block.deltas.append(text)
                return [self._text(text)] if text else []
            case "citations_delta":
                citation = delta.get("citation")
                if not isinstance(citation, dict):
                    return None
                block.citations.append(citation)
                wire.setdefault("citations", []).append(citation)
            case "input_json_delta":
                if isinstance(delta.get("partial_json"), str):
                    block.input_json.append(delta["partial_json"])
            case "thinking_delta" if isinstance(delta.get("thinking"), str):
                block.deltas.append(delta["thinking"])
            case "signature_delta" if isinstance(delta.get("signature"), str):
                wire["signature"] = delta["signature"]
        return []

    def _block_stop(self, block: _Block) -> list[AgentEvent]:
        if block.deltas:
            key = "thinking" if block.type == "thinking" else "text"
            block.wire[key] = str(block.wire.get(key) or "") + "".join(block.deltas)
        if block.type == "text" and block.citations:
            end = self._answer_length
            return [
                events.GroundingEvent(
                    citations=tuple(_citation(c, block.start, end) for c in block.citations)
                )
            ]
        if block.type == "server_tool_use":
            arguments = block.input if isinstance(block.input, dict) else {}
            if block.input_json:
                try:
                    arguments = json.loads("".join(block.input_json))
                except ValueError:
                    arguments = {}
                block.wire["input"] = arguments
            query = one_line(as_dict(arguments).get("query"))
            if query:
                self._queries[block.tool_id] = query
            if block.tool_name and query:
                return [
                    events.ActionEvent(tool_name=block.tool_name, tool_arguments={"query": query})
                ]
        return []

    def _text(self, text: str) -> events.AnswerEvent:
        self._answer_length += len(text)
        return events.AnswerEvent(content=text)

    def _search_result(self, data: dict[str, Any]) -> list[AgentEvent]:
        tool_id = str(data.get("tool_use_id") or "")
        content = data.get("content")
        if isinstance(content, dict):  # web_search_tool_result_error
            error = f"Web search failed: {one_line(content.get('error_code')) or 'error'}"
            return [events.ToolErrorEvent(tool_name="web_search", error=error)]
        results = tuple(
            _web_source(r.get("url"), r.get("title"), _page_date(r.get("page_age")), r)
            for r in content or ()
            if isinstance(r, dict)
        )
        call = ToolCall(
            tool_id=tool_id,
            kind="web_search",
            title=self._queries.get(tool_id, ""),
            results=tuple(r for r in results if r is not None),
            data=data,
        )
        return [events.AuditEvent(tool_calls=(call,))]

    def _pause(self) -> list[AgentEvent]:
        """The message paused mid-search: keep its content and usage for the continuation."""
        self.pauses += 1
        self.paused = True
        self._content.extend(self._message_blocks[i] for i in sorted(self._message_blocks))
        self._message_blocks = {}
        for name in USAGE_COUNTS:
            self._usage_before[name] = self._usage_before.get(name, 0) + as_count(
                self._usage.get(name)
            )
        self._usage = {}
        return []

    def _stop(self) -> list[AgentEvent]:
        self._finished = True
        self.paused = False
        if self._stop_reason == "pause_turn":
            return [events.ErrorEvent(error=PAUSED_TOO_OFTEN)]
        if self._stop_reason == "refusal":
            return [events.ErrorEvent(error=REFUSED)]
        if self._stop_reason == "max_tokens":
            return [events.ErrorEvent(error=CUT_SHORT)]
        usage = {
            name: self._usage_before.get(name, 0) + as_count(self._usage.get(name))
            for name in USAGE_COUNTS
        }
        consumption = (
            (
                {
                    "type": self._model or "anthropic",
                    # Anthropic counts cache reads apart from input_tokens; every consumption
                    # entry counts them within (chats/usage/tokens.py).
                    "input_tokens": usage["input_tokens"] + usage["cache_read_input_tokens"],
                    "output_tokens": usage["output_tokens"],
                    "cached_tokens": usage["cache_read_input_tokens"],
                },
            )
            if self._usage or self._usage_before
            else ()
        )
        # No checkpoint: Anthropic keeps no conversation, so a follow-up sends the history.
        return [events.CompleteEvent(consumption=consumption)]


def _citation(data: dict[str, Any], start: int, end: int) -> Citation:
    """One `citations[]` entry of a text block: the block's span, and where it came from."""
    cited_text = data.get("cited_text")
    passages = (Passage(text=cited_text),) if isinstance(cited_text, str) and cited_text else ()
    kind = data.get("type") if isinstance(data.get("type"), str) else repr(data.get("type"))
    if kind == "web_search_result_location":
        source = _web_source(data.get("url"), data.get("title"), None, data)
    elif kind in DOCUMENT_LOCATIONS:
        source = _document_source(data)
    else:
        source = None
    problem = "" if source is not None else f"unreadable citation of type {kind!r}"
    return Citation(
        start=start, end=end, source=source, passages=passages, problem=problem, data=data
    )


def _web_source(
    url: Any, title: Any, published_on: date | None, data: Any
) -> SourceDocument | None:
    kept = {k: v for k, v in data.items() if k not in {"encrypted_index", "encrypted_content"}}
    return web_source(url, one_line(title), published_on=published_on, data=kept)


def _document_source(data: dict[str, Any]) -> SourceDocument | None:
    """A document the request supplied: no URL, named by its title and index."""
    title = one_line(data.get("document_title")) or one_line(data.get("title"))
    index = data.get("document_index")
    if not is_int(index):
        index = data.get("search_result_index")
    index = index if is_int(index) else ""
    key = bounded_key("document", f"{index}:{title}")
    if key is None:
        return None
    return SourceDocument(
        key=key,
        type="DOCUMENT",
        name=title or (f"Document {index + 1}" if isinstance(index, int) else "Document"),
        headline=title,
        data=data,
    )


def _page_date(value: Any) -> date | None:
    """`page_age` is ISO ("2025-04-30") or written out ("April 30, 2025")."""
    if found := date_from_value(value):
        return found
    if isinstance(value, str):
        for pattern in ("%B %d, %Y", "%b %d, %Y", "%d %B %Y"):
            try:
                return datetime.strptime(value.strip(), pattern).date()
            except ValueError:
                continue
    return None


# --- Client ----------------------------------------------------------------------------------


class AnthropicClient(SdkStream):
    """Anthropic's Messages API with its web search tool, through the `anthropic` SDK.

    Anthropic keeps no conversation, so a follow-up or a branch sends the branch's history.
    """

    provider = "Anthropic"
    key_variable = "ANTHROPIC_API_KEY"
    vendor = anthropic
    client_class = anthropic.AsyncAnthropic

    def __init__(self, *args: Any, max_tokens: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if max_tokens is None:
            max_tokens = getattr(settings, "ANTHROPIC_MAX_TOKENS", 4096)
        self.max_tokens = max_tokens
        self._answer_adapter = AnthropicAdapter()

    def _adapter(self) -> AnthropicAdapter:
        # One adapter per attempt; the continuations of a paused answer feed the same one.
        self._answer_adapter = AnthropicAdapter()
        return self._answer_adapter

    async def _open(self, client: anthropic.AsyncAnthropic) -> Any:
        messages: list[dict[str, Any]] = [
            message
            for turn in self.request.history
            for message in (
                {"role": "user", "content": turn.question},
                {"role": "assistant", "content": turn.answer},
            )
        ]
        messages.append({"role": "user", "content": self.request.message})
        adapter = self._answer_adapter

        async def request(assistant: list[dict[str, Any]] | None) -> Any:
            sent = (
                [*messages, {"role": "assistant", "content": assistant}] if assistant else messages
            )
            # A container tool's work is in its container: the continuation reuses it.
            options = {"container": adapter.container_id} if adapter.container_id else {}
            return await client.messages.create(
                model=self.config.model,
                max_tokens=self.max_tokens,
                messages=sent,
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
                stream=True,
                **options,
            )

        return _Continuing(await request(None), adapter, request)


# Opens one response of the SDK's event stream, given the paused content to continue from.
OpenResponse = Callable[[list[dict[str, Any]] | None], Awaitable[Any]]


class _Continuing:
    """The SDK's event stream of one answer, across its `pause_turn` continuations.

    When a response ends paused (the adapter, fed each event first, says so), the paused
    content is sent back as the last assistant message and the next response's events follow
    on; the adapter stops pausing after `MAX_PAUSES`.
    """

    def __init__(self, first: Any, adapter: AnthropicAdapter, request: OpenResponse) -> None:
        self._stream = first
        self._adapter = adapter
        self._request = request

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._events()

    async def _events(self) -> AsyncIterator[Any]:
        while True:
            async for item in self._stream:
                yield item
            if not self._adapter.paused:
                return
            await self._stream.close()
            self._stream = await self._request(self._adapter.paused_content)

    async def close(self) -> None:
        await self._stream.close()
