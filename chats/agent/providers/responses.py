"""OpenAI and xAI: the Responses API stream (`stream: true`) → typed events, and their clients.

The wire (docs/PROTOCOL.md, "OpenAI and xAI (Responses API)"): `event:` lines
naming `response.output_text.delta` (the answer), `response.output_text.annotation.added` and
`response.completed` (`url_citation` annotations, offsets in characters of the output text),
`response.failed` and `error`. Both providers write inline citation links into the text,
which the annotations span: xAI `[[N]](url)`, OpenAI's web search
` ([host](url))`. We remove those links and put a footnote marker where they stood, so the
answer reads as prose and our resolver numbers the footnotes. The provider's own numbers (its
`title: "1"`) are not trusted.

Text streams before the annotations that describe it, so the adapter recognises a citation
link by its shape as it streams, holding back only a tail that may still become one. A link
that no annotation ever names is still a citation of its URL: the text said so.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

import openai

from chats.agent import events
from chats.agent.events import AgentEvent
from chats.agent.json_values import as_dict, is_int
from chats.agent.providers.sdk import SdkStream
from chats.agent.sse import TypedMessagesAdapter
from citations.references import Citation, SourceDocument, ToolCall, web_source
from citations.sources import bounded_key, one_line

FLAVOURS = {"openai": "OpenAI", "xai": "xAI"}
# Annotations that cite a source: a web page, or a file of a file search or a container.
CITATION_TYPES = frozenset({"url_citation", "file_citation", "container_file_citation"})
MAX_LINK_CHARS = 2048  # past this, a `[` that never closed is plain text: stop holding it back


# --- Inline citation links -------------------------------------------------------------------


class _LinkShape:
    """One provider's inline citation link: its pattern, and a test for a tail that could
    still become one (so the adapter holds back no more than that tail).

    `before` and `after` are the pattern's atomic pieces around the URL, in order; the prefix
    pattern nests every piece so that it accepts any text the pieces could still complete.
    """

    def __init__(self, before: list[str], after: list[str], starts: str) -> None:
        url = ["h", "t", "t", "p", "s?", ":", "/", "/", r"[^\s()]+"]
        self.full = re.compile("".join(before) + r"(?P<url>https?://[^\s()]+)" + "".join(after))
        prefix = ""
        for token in reversed([*before, *url, *after]):
            prefix = f"(?:{token}{prefix})?"
        self.prefix = re.compile(prefix + r"\Z")
        # The characters a link (with what it removes) can begin with.
        self.starts = re.compile(f"[{re.escape(starts)}]")

    def candidate(self, text: str, start: int) -> int:
        """Return the first index at or after `start` where a link may begin, or -1."""
        found = self.starts.search(text, start)
        return found.start() if found else -1


# xAI: `[[N]](url)`. OpenAI web search: ` ([host](url))`; the space and the
# parentheses go with the link, so "held in May. ([x.org](u))" reads "held in May.[^1]".
LINK_SHAPES = {
    "xai": _LinkShape([r"\[", r"\[", r"\d{1,4}", r"\]", r"\]", r"\("], [r"\)"], "["),
    "openai": _LinkShape(
        [r"[ \t]*", r"\(", r"\[", r"[^\[\]()\n]{1,300}", r"\]", r"\("], [r"\)", r"\)"], " \t("
    ),
}


# --- The adapter -----------------------------------------------------------------------------


@dataclass
class _Link:
    """A removed inline citation link: where it was in the part's text and in the answer."""

    raw_start: int
    raw_end: int
    answer_at: int  # where its marker goes
    claim_start: int  # where the claim it supports starts in the answer
    url: str
    cited: bool = False


@dataclass
class _Part:
    """One output_text content part: its raw text and how it maps onto the answer.

    `kept` and `links` are disjoint runs of the raw text in order, so a raw offset is found by
    bisection: reading stays linear in links x citations.
    """

    pending: str = ""  # the text not decided yet: what may still become a link
    done: int = 0  # the raw offset where `pending` starts; everything before is decided
    kept: list[tuple[int, int, int]] = field(default_factory=list)  # raw start, end, answer start
    kept_ends: list[int] = field(default_factory=list)  # each kept run's raw end
    links: list[_Link] = field(default_factory=list)
    link_ends: list[int] = field(default_factory=list)  # each link's raw end

    def link_over(self, start: int, end: int) -> _Link | None:
        """Return the first removed link the raw span [start, end) overlaps, if any."""
        index = bisect.bisect_right(self.link_ends, start)
        if index < len(self.links) and self.links[index].raw_start < end:
            return self.links[index]
        return None

    def answer_offset(self, raw_index: int, answer_length: int) -> int | None:
        """Return the answer offset of a raw index (a removed link maps to its marker)."""
        link = self.link_over(raw_index, raw_index + 1)
        if link is not None and link.raw_start < raw_index:  # strictly inside the link
            return link.answer_at
        index = bisect.bisect_left(self.kept_ends, raw_index)
        if index < len(self.kept) and self.kept[index][0] <= raw_index:
            raw_start, _, answer_start = self.kept[index]
            return answer_start + raw_index - raw_start
        index = bisect.bisect_left(self.link_ends, raw_index)
        for link in self.links[max(index - 1, 0) : index + 1]:
            if raw_index in (link.raw_start, link.raw_end):
                return link.answer_at
        return answer_length if raw_index == self.done else None


class ResponsesAdapter(TypedMessagesAdapter):
    """The Responses API stream of OpenAI (`flavour="openai"`) or xAI (`flavour="xai"`)."""

    def __init__(self, flavour: str = "openai") -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown Responses flavour {flavour!r}")
        self.flavour = flavour
        self.provider = FLAVOURS[flavour]
        self._shape = LINK_SHAPES[flavour]
        self._parts: dict[tuple[int, int], _Part] = {}
        self._answer_length = 0
        # The answer since the last marker or line break, where the next claim may start.
        self._tail: list[str] = []
        self._tail_start = 0
        self._claim_points: list[tuple[int, int]] = []  # (marker offset, claim start)
        self._annotations_seen: set[tuple[Any, ...]] = set()
        self._waiting: list[tuple[tuple[int, int], dict[str, Any]]] = []
        self._searches_announced: set[str] = set()

    def _read(self, kind: str, document: dict[str, Any]) -> list[AgentEvent] | None:
        match kind:
            case "response.output_text.delta":
                delta = document.get("delta")
                if not isinstance(delta, str):
                    return None
                part = self._part(document)
                part.pending += delta
                return self._advance(part, final=False)
            case "response.output_text.done":
                return self._advance(self._part(document), final=True)
            case "response.output_text.annotation.added":
                annotation = document.get("annotation")
                if not isinstance(annotation, dict):
                    return None
                return self._annotate(_part_key(document), annotation)
            case "response.output_item.added" | "response.output_item.done":
                return self._output_item(document.get("item"), kind)
            case "response.refusal.done":
                refusal = one_line(document.get("refusal"))
                return self._fail(f"{self.provider} declined to answer: {refusal}"[:500])
            case "response.completed":
                return self._complete(as_dict(document.get("response")))
            case "response.incomplete":
                response = as_dict(document.get("response"))
                reason = as_dict(response.get("incomplete_details")).get("reason")
                return self._finish_with_error(response, _incomplete_message(self.provider, reason))
            case "response.failed":
                response = as_dict(document.get("response"))
                error = as_dict(response.get("error"))
                return self._finish_with_error(response, self._error_message(error))
            case "error":
                return self._fail(self._error_message(document))
        return []  # response.created, content_part.added, reasoning...: nothing to show

    def close(self) -> list[AgentEvent]:
        """A stream that ends without `response.completed` was cut: show what was final."""
        if self._finished:
            return []
        found: list[AgentEvent] = []
        for part in self._parts.values():
            found.extend(self._advance(part, final=True))
        return found

    # --- text and links ---

    def _part(self, document: dict[str, Any]) -> _Part:
        return self._parts.setdefault(_part_key(document), _Part())

    def _advance(self, part: _Part, *, final: bool) -> list[AgentEvent]:
        """Decide as much of the part's text as can be decided; emit the kept text."""
        text, base, index, pieces = part.pending, part.done, 0, []
        while index < len(text):
            start = self._shape.candidate(text, index)
            if start == -1:
                pieces.append(self._keep(part, text, base, index, len(text)))
                index = len(text)
                break
            match = self._shape.full.match(text, start)
            if match:
                if start > index:
                    pieces.append(self._keep(part, text, base, index, start))
                self._remove(part, base + start, base + match.end(), match["url"])
                index = match.end()
                continue
            if (
                not final
                and len(text) - start <= MAX_LINK_CHARS
                and self._shape.prefix.match(text, start)
            ):
                if start > index:
                    pieces.append(self._keep(part, text, base, index, start))
                index = start
                break  # hold back: it may still become a link
            pieces.append(self._keep(part, text, base, index, start + 1))
            index = start + 1
        part.pending, part.done = text[index:], base + index
        content = "".join(pieces)
        found: list[AgentEvent] = [events.AnswerEvent(content=content)] if content else []
        found.extend(self._annotate_waiting())
        return found

    def _keep(self, part: _Part, text: str, base: int, start: int, end: int) -> str:
        """Emit `text[start:end]` (raw offsets `base + start`...) as answer text."""
        piece = text[start:end]
        start, end = base + start, base + end
        if part.kept and part.kept[-1][1] == start:  # extend the previous run
            raw_start, _, answer_start = part.kept[-1]
            part.kept[-1] = (raw_start, end, answer_start)
            part.kept_ends[-1] = end
        else:
            part.kept.append((start, end, self._answer_length))
            part.kept_ends.append(end)
        line_break = piece.rfind("\n")
        if line_break == -1:
            self._tail.append(piece)
        else:
            self._tail = [piece[line_break + 1 :]]
            self._tail_start = self._answer_length + line_break + 1
        self._answer_length += len(piece)
        return piece

    def _remove(self, part: _Part, start: int, end: int, url: str) -> None:
        at = self._answer_length
        part.links.append(_Link(start, end, at, self._claim_start(at), url))
        part.link_ends.append(end)

    def _claim_start(self, at: int) -> int:
        """Where the claim a marker at `at` (the answer's end) supports starts: after the
        previous marker, or at the start of its paragraph, past whitespace. Adjacent markers
        share one claim."""
        if self._claim_points and self._claim_points[-1][0] == at:
            return self._claim_points[-1][1]
        floor = self._tail_start  # after the last line break or marker, whichever is later
        tail = "".join(self._tail)
        start = floor + len(tail) - len(tail.lstrip())
        self._tail, self._tail_start = [], at
        if start == at and self._claim_points and self._claim_points[-1][0] >= floor - 1:
            start = self._claim_points[-1][1]  # only whitespace since the last marker
        self._claim_points.append((at, start))
        return start

    # --- annotations ---

    def _annotate(self, key: tuple[int, int], annotation: dict[str, Any]) -> list[AgentEvent]:
        if annotation.get("type") not in CITATION_TYPES:
            return []
        names = ("type", "start_index", "end_index", "url", "file_id", "index")
        identity = (key, *(_hashable(annotation.get(name)) for name in names))
        if identity in self._annotations_seen:
            return []  # streamed first, repeated in response.completed
        self._annotations_seen.add(identity)
        self._waiting.append((key, annotation))
        return self._annotate_waiting()

    def _annotate_waiting(self, *, final: bool = False) -> list[AgentEvent]:
        """Cite every waiting annotation whose text has been decided (all of them at the end)."""
        citations, still_waiting = [], []
        for key, annotation in self._waiting:
            part = self._parts.get(key)
            end = annotation.get("end_index")
            decided = part is not None and is_int(end) and end <= part.done
            if not (decided or final):
                still_waiting.append((key, annotation))
                continue
            citations.append(self._citation(part, annotation))
        self._waiting = still_waiting
        return [events.GroundingEvent(citations=tuple(citations))] if citations else []

    def _citation(self, part: _Part | None, annotation: dict[str, Any]) -> Citation:
        start, end = annotation.get("start_index"), annotation.get("end_index")
        if annotation.get("type") == "url_citation":
            source = self._source(annotation.get("url"), annotation.get("title"))
        else:
            source = _file_source(annotation)
        if start is None and end is None:
            # No span (xAI with inline citations off; a file search's `file_citation`, which
            # names one point): the source is still cited.
            return Citation(start=None, end=None, source=source, data=annotation, unplaced=True)
        if not (is_int(start) and is_int(end)):
            problem = f"offsets {start!r}-{end!r} are not integers"[:200]
            return Citation(start=None, end=None, source=source, problem=problem, data=annotation)
        if part is not None:
            link = part.link_over(start, end)
            if link is not None:  # it spans an inline link: the marker goes where it stood
                link.cited = True
                return Citation(
                    start=link.claim_start, end=link.answer_at, source=source, data=annotation
                )
            # Any other span is the claim itself.
            answer_start = part.answer_offset(start, self._answer_length)
            answer_end = part.answer_offset(end, self._answer_length)
            if answer_start is not None and answer_end is not None:
                return Citation(start=answer_start, end=answer_end, source=source, data=annotation)
        return Citation(
            start=start,
            end=end,
            source=source,
            problem=f"span {start}-{end} is outside its output text",
            data=annotation,
        )

    def _source(self, url: Any, title: Any) -> SourceDocument | None:
        # xAI's title is its citation number ("1"), not the page's title.
        headline = one_line(title) if self.flavour == "openai" else ""
        data = {"url": url, "title": title} if title is not None else {"url": url}
        return web_source(url, headline, data=data)

    def _uncited_links(self) -> list[Citation]:
        """Links no annotation named: the text's own citation of their URL."""
        return [
            Citation(
                start=link.claim_start,
                end=link.answer_at,
                source=source,
                data={"inline_link": link.url},
            )
            for part in self._parts.values()
            for link in part.links
            if not link.cited and (source := self._source(link.url, None)) is not None
        ]

    # --- tools, completion, failure ---

    def _output_item(self, item: Any, kind: str) -> list[AgentEvent]:
        """A server-side search call (`web_search_call`, xAI's `x_search_call`...)."""
        if not isinstance(item, dict) or not str(item.get("type", "")).endswith("search_call"):
            return []
        tool_name = str(item["type"]).removesuffix("_call")
        action = as_dict(item.get("action"))
        query = one_line(action.get("query")) or _query_from_arguments(item.get("arguments"))
        item_id = str(item.get("id") or "")
        found: list[AgentEvent] = []
        if query and item_id not in self._searches_announced:
            self._searches_announced.add(item_id)
            found.append(events.ActionEvent(tool_name=tool_name, tool_arguments={"query": query}))
        sources = action.get("sources")
        if kind == "response.output_item.done" and isinstance(sources, list) and sources:
            results = tuple(
                s
                for entry in sources
                if isinstance(entry, dict)
                and (s := self._source(entry.get("url"), entry.get("title"))) is not None
            )
            call = ToolCall(
                tool_id=item_id, kind=tool_name, title=query, results=results, data=item
            )
            found.append(events.AuditEvent(tool_calls=(call,)))
        return found

    def _complete(self, response: dict[str, Any]) -> list[AgentEvent]:
        found = self._wrap_up(response)
        usage = as_dict(response.get("usage"))
        consumption = ()
        if usage:
            details = as_dict(usage.get("input_tokens_details"))
            consumption = (
                {
                    "type": str(response.get("model") or self.flavour),
                    "input_tokens": usage.get("input_tokens", 0),
                    "output_tokens": usage.get("output_tokens", 0),
                    "cached_tokens": details.get("cached_tokens", 0),
                },
            )
        checkpoint_id = str(response.get("id") or "")
        found.append(events.CompleteEvent(checkpoint_id=checkpoint_id, consumption=consumption))
        return found

    def _wrap_up(self, response: dict[str, Any]) -> list[AgentEvent]:
        """End of the response: decide held-back text, cite the final annotations and links."""
        self._finished = True
        found: list[AgentEvent] = []
        for part in self._parts.values():
            found.extend(self._advance(part, final=True))
        for output_index, item in enumerate(response.get("output") or ()):
            if isinstance(item, dict) and item.get("type") == "message":
                for content_index, content in enumerate(item.get("content") or ()):
                    for annotation in as_dict(content).get("annotations") or ():
                        if isinstance(annotation, dict):
                            found.extend(self._annotate((output_index, content_index), annotation))
        found.extend(self._annotate_waiting(final=True))
        if uncited := self._uncited_links():
            found.append(events.GroundingEvent(citations=tuple(uncited)))
        consulted = response.get("citations")  # xAI: every URL the agent looked at
        if isinstance(consulted, list) and consulted:
            results = tuple(s for url in consulted if (s := self._source(url, None)) is not None)
            call = ToolCall(
                tool_id="citations", kind="search", title="Sources consulted", results=results
            )
            found.append(events.AuditEvent(tool_calls=(call,)))
        return found

    def _finish_with_error(self, response: dict[str, Any], message: str) -> list[AgentEvent]:
        found = self._wrap_up(response)
        found.append(events.ErrorEvent(error=message))
        return found

    def _fail(self, message: str) -> list[AgentEvent]:
        found = self.close()
        self._finished = True
        found.append(events.ErrorEvent(error=message))
        return found

    def _error_message(self, error: dict[str, Any]) -> str:
        """Read OpenAI's flat `{code, message}`, a nested `{"error": {...}}`, or xAI's
        `{"error": "..."}`."""
        nested = error.get("error")
        if isinstance(nested, dict):
            error = nested
        detail = (
            one_line(error.get("message"))
            or one_line(nested if isinstance(nested, str) else None)
            or one_line(error.get("code"))
        )
        if not detail:
            return f"{self.provider} reported an error."
        return f"{self.provider} reported an error: {detail}"[:500]


def _file_source(annotation: dict[str, Any]) -> SourceDocument | None:
    """The file a `file_citation` or `container_file_citation` names, by its file name."""
    file_id, filename = annotation.get("file_id"), one_line(annotation.get("filename"))
    key = bounded_key("file", file_id) or bounded_key("file", filename)
    if key is None:
        return None
    name = filename or one_line(file_id) or "File"
    return SourceDocument(key=key, type="DOCUMENT", name=name, headline=filename, data=annotation)


def _incomplete_message(provider: str, reason: Any) -> str:
    if reason == "content_filter":
        return f"{provider} stopped the answer: its safety filter blocked it."
    if reason == "max_output_tokens":
        return f"{provider} stopped the answer at its output token limit, so it is cut short."
    return f"{provider} did not finish the answer ({one_line(reason) or 'incomplete'})."


def _part_key(document: dict[str, Any]) -> tuple[int, int]:
    output_index, content_index = document.get("output_index"), document.get("content_index")
    return (
        output_index if is_int(output_index) else 0,
        content_index if is_int(content_index) else 0,
    )


def _query_from_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return ""
    return one_line(as_dict(arguments).get("query"))


def _hashable(value: Any) -> Any:
    """A value as a set member: a malformed list or object becomes its text."""
    return value if isinstance(value, str | int | float | None) else repr(value)


# --- Clients ---------------------------------------------------------------------------------


class OpenAIClient(SdkStream):
    """OpenAI's Responses API with its web search tool, through the `openai` SDK."""

    provider = "OpenAI"
    key_variable = "OPENAI_API_KEY"
    vendor = openai
    client_class = openai.AsyncOpenAI
    flavour = "openai"

    def _adapter(self) -> ResponsesAdapter:
        return ResponsesAdapter(self.flavour)

    def _tools(self) -> list[dict[str, Any]]:
        size = "low" if self.request.research_effort == "lite" else "medium"
        return [{"type": "web_search", "search_context_size": size}]

    async def _open(self, client: openai.AsyncOpenAI) -> Any:
        request = self.request
        options: dict[str, Any] = {}
        if request.previous_response_id:
            # The provider keeps the conversation: send only the new question.
            options["previous_response_id"] = request.previous_response_id
            items: list[dict[str, Any]] = []
        else:
            items = [
                item
                for turn in request.history
                for item in (
                    {"role": "user", "content": turn.question},
                    {"role": "assistant", "content": turn.answer},
                )
            ]
        items.append({"role": "user", "content": request.message})
        return await client.responses.create(
            model=self.config.model,
            input=items,
            tools=self._tools(),
            stream=True,
            **options,
        )


class XaiClient(OpenAIClient):
    """xAI's Responses API with web and X search, through the `openai` SDK at XAI_BASE_URL.

    Not xai-sdk: that speaks gRPC, whose body is neither the SSE our adapter and
    `render_stream` read nor something an HTTP stand-in can serve; xAI's OpenAI-compatible
    Responses endpoint is the wire its captures show.
    """

    provider = "xAI"
    key_variable = "XAI_API_KEY"
    flavour = "xai"

    def _tools(self) -> list[dict[str, Any]]:
        return [{"type": "web_search"}, {"type": "x_search"}]
