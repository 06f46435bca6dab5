"""The Bigdata Research Agent: its envelopes, messages and GROUNDING shapes → typed events, and
its client (one POST, one long SSE response).

The one place that reads the Research Agent's JSON (docs/PROTOCOL.md, "Research
Agent": "Request", "Events" and "GROUNDING"). Unknown types become
`UnknownEvent`, kept and stored, never fatal: the API may add types.

HTTP errors only happen before the first event, so that is the only time the client retries
(429, 5xx, connection failures), honouring Retry-After. Once events have flowed a failure ends
the run: replaying a research request would bill and answer twice. That policy is
`providers.attempts`, which every provider's client shares.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from chats.agent import events
from chats.agent._http import AgentError, Upstream, error_detail, redact, refused
from chats.agent.events import AgentEvent
from chats.agent.json_values import as_dict, as_int, as_list, is_int, objects
from chats.agent.providers.attempts import RetryingClient, posted_events, refusal
from chats.agent.request import AgentRequest
from chats.agent.sse import StreamAdapter, StreamMessage
from citations.references import Citation, Passage, SourceDocument, ToolCall
from citations.sources import (
    bounded_key,
    content_key,
    date_from_value,
    http_url,
    one_line,
    url_host,
)

SOURCE_TYPES = frozenset({"BIGDATA", "EXTERNAL"})


def event_from_envelope(envelope: Any, raw: str | None = None) -> AgentEvent | None:
    """Return the typed event inside either envelope, or None when the document is malformed.

    `{"chat_id", "message": {...}}` for the Research Agent, `{"request_id", "execution_id",
    "delta": {...}}` for Workflows.
    """
    if not isinstance(envelope, dict):
        return None
    message = envelope.get("message")
    if not isinstance(message, dict):
        message = envelope.get("delta")
    if not isinstance(message, dict):
        return None
    chat_id = envelope.get("chat_id")
    return event_from_message(message, chat_id if isinstance(chat_id, str) else None, raw)


def event_from_message(
    message: dict[str, Any], chat_id: str | None = None, raw: str | None = None
) -> AgentEvent | None:
    """Return the typed event for one message, or None when it has no string `type`.

    Our event schema borrows the Research Agent's message shape for every type but AUDIT and
    GROUNDING, so those two are read here and the rest by `events.event_from_fields`.
    """
    kind = message.get("type")
    if not isinstance(kind, str) or not kind:
        return None
    if kind == "AUDIT":
        traces = objects(message.get("audit_traces"))
        return events.AuditEvent(
            tool_calls=tuple(tool_call(t) for t in traces), chat_id=chat_id, raw=raw
        )
    if kind == "GROUNDING":
        references = as_list(message.get("references"))
        return events.GroundingEvent(
            citations=tuple(citation(r) for r in references), chat_id=chat_id, raw=raw
        )
    if kind == events.SKIPPED:  # our reader's own type: an agent cannot send it
        payload = {k: v for k, v in message.items() if k != "type"}
        return events.UnknownEvent(type=kind, payload=payload, chat_id=chat_id, raw=raw)
    # The envelope's conversation id, not any the message carries (UnknownEvent drops it).
    return events.event_from_fields(message, chat_id=chat_id, raw=raw)


# --- GROUNDING references -------------------------------------------------------------------


def citation(data: Any) -> Citation:
    """Return one GROUNDING reference as a Citation; the span is judged later, by the core.

    Two shapes are in use: `{start, end, source, tool_name, audit_id}` and the older
    `{start, end, source, tag: {tool_call_id, ref_id}, action_audits_id}` (docs/PROTOCOL.md).
    """
    if not isinstance(data, dict):
        return Citation(start=None, end=None, source=None, problem="not an object", data=data)
    tag = as_dict(data.get("tag"))
    raw_source = data.get("source")
    problem = ""
    if raw_source is not None and not isinstance(raw_source, dict):
        problem = "source is neither an object nor null"
    source = source_document(raw_source) if isinstance(raw_source, dict) else None
    return Citation(
        start=as_int(data.get("start")),
        end=as_int(data.get("end")),
        source=source,
        tool_name=_first_text(data.get("tool_name"), data.get("toolName"), tag.get("tool_name")),
        audit_ids=_audit_ids(data, tag),
        passages=_passages(raw_source) if isinstance(raw_source, dict) else (),
        problem=problem,
        data=data,
    )


def _audit_ids(data: dict[str, Any], tag: dict[str, Any]) -> tuple[str, ...]:
    """The tool-call ids a reference names: `audit_id`, camelCase `auditId`, then the older
    shape's `action_audits_id` (sometimes a list) and `tag.tool_call_id`."""
    ids: list[str] = []
    for candidate in (
        data.get("audit_id"),
        data.get("auditId"),
        data.get("action_audits_id"),
        tag.get("tool_call_id"),
    ):
        for value in candidate if isinstance(candidate, list) else (candidate,):
            text = _first_text(value)
            if text and text not in ids:
                ids.append(text)
    return tuple(ids)


def _passages(source: dict[str, Any]) -> tuple[Passage, ...]:
    """The text a source contributed: BIGDATA `chunks[].text`, EXTERNAL `text`."""
    passages = [Passage.from_data(c) for c in objects(source.get("chunks"))]
    if isinstance(source.get("text"), str) and source["text"].strip():
        passages.append(Passage.from_data({"text": source["text"], **_relevance(source)}))
    return tuple(p for p in passages if p is not None and p.text.strip())


def _relevance(source: dict[str, Any]) -> dict[str, Any]:
    return {"relevance": source["relevance"]} if "relevance" in source else {}


# --- sources --------------------------------------------------------------------------------


def source_document(source: dict[str, Any]) -> SourceDocument:
    """Return a GROUNDING `source` object's key, display fields and safe link.

    BIGDATA carries `src_name`, `ts`, `url` (not always); EXTERNAL nests its display name, link
    and sometimes a date in `action`.
    """
    source_type = _type(source)
    action = as_dict(source.get("action"))
    url = http_url(_raw_url(source, source_type, action))
    headline = one_line(source.get("hd"))
    return SourceDocument(
        key=source_key(source),
        type=source_type,
        name=_name(source, source_type, action) or headline or url_host(url) or "Source",
        headline=headline,
        url=url,
        published_on=_published_on(source, source_type, action),
        data=source,
    )


def source_key(source: dict[str, Any]) -> str:
    """Return the deduplication key: id, else URL, else headline, else a hash of the object.

    Never the audit_id (one tool call returns many sources). The kind prefix keeps an
    id from colliding with an unrelated headline that happens to spell the same text.
    """
    return (
        bounded_key("id", source.get("id"))
        or bounded_key("url", _raw_url(source, _type(source), as_dict(source.get("action"))))
        or bounded_key("hd", source.get("hd"))
        or content_key(source)
    )


def _type(source: dict[str, Any]) -> str:
    return source["type"] if source.get("type") in SOURCE_TYPES else "OTHER"


def _raw_url(source: dict[str, Any], source_type: str, action: dict[str, Any]) -> str:
    if source_type == "EXTERNAL":
        candidates = (action.get("url"), source.get("url"))
    elif source_type == "BIGDATA":
        candidates = (source.get("url"),)
    else:
        candidates = (source.get("url"), action.get("url"))
    return next((c.strip() for c in candidates if isinstance(c, str) and c.strip()), "")


def _name(source: dict[str, Any], source_type: str, action: dict[str, Any]) -> str:
    if source_type == "EXTERNAL":
        candidates = (action.get("name"),)
    elif source_type == "BIGDATA":
        candidates = (source.get("src_name"),)
    else:
        candidates = (source.get("src_name"), action.get("name"), source.get("name"))
    return next((n for c in candidates if (n := one_line(c))), "")


def _published_on(source: dict[str, Any], source_type: str, action: dict[str, Any]):
    candidates = [source.get("ts")]
    if source_type != "BIGDATA":
        candidates[:0] = [action.get("date"), action.get("ts"), action.get("published_at")]
    return next((d for c in candidates if (d := date_from_value(c)) is not None), None)


# --- AUDIT traces ---------------------------------------------------------------------------


def tool_call(trace: dict[str, Any]) -> ToolCall:
    """Return one `audit_traces[]` entry (snake_case or camelCase) as a ToolCall."""
    query = trace.get("query")
    query_text = query.get("text") if isinstance(query, dict) else query
    return ToolCall(
        tool_id=_first_text(trace.get("tool_id"), trace.get("toolId")),
        kind=_first_text(trace.get("audit_type"), trace.get("auditType")),
        # MarkdownAuditV1 has a title; SearchAuditV1 has query.text.
        title=one_line(_first_text(trace.get("title"), query_text)),
        results=tuple(_search_results(trace)),
        data=trace,
    )


def _search_results(trace: dict[str, Any]) -> list[SourceDocument]:
    """The documents a search returned (`results[*].values[*]`), cited or not."""
    return [
        source_document(value)
        for result in objects(trace.get("results"))
        for value in objects(result.get("values"))
    ]


def _first_text(*values: Any) -> str:
    for value in values:
        if isinstance(value, str) and value:
            return value
        if is_int(value):
            return str(value)
    return ""


class BigdataAdapter:
    """The Research Agent's stream: one envelope per `data:` line, nothing held back."""

    def feed(self, message: StreamMessage) -> list[AgentEvent] | None:
        event = event_from_envelope(message.document, raw=message.text)
        return None if event is None else [event]

    def close(self) -> list[AgentEvent]:
        return []


# --- the client -----------------------------------------------------------------------------


RESEARCH_AGENT = Upstream("the research agent", brand="Bigdata", variable="BIGDATA_API_KEY")


# The fields of the request body, in the order they are sent (docs/PROTOCOL.md, "Request").
BODY_FIELDS = (
    "message",
    "research_effort",
    "chat_id",
    "from_checkpoint_id",
    "persistence_mode",
    "model_name",
    "expected_output",
    "structured_output_schema",
    "tools_configs",
)


def request_body(request: AgentRequest) -> dict[str, Any]:
    """The request body: the fields of `BODY_FIELDS` that are set. Not `asdict`, which
    deep-copies every value (the schema, the tools) only for them to be encoded."""
    values = ((name, getattr(request, name)) for name in BODY_FIELDS)
    return {name: value for name, value in values if value is not None}


def entitled_options(request: AgentRequest) -> list[tuple[str, tuple[str, ...]]]:
    """The options a request uses that a key may lack, with words a 403 may name them by (a
    workflow's only option of these is its model)."""
    tools = request.tools_configs or {}
    model = request.workflow.model_name if request.workflow is not None else request.model_name
    used = [
        ("the pro model", ("pro", "model"), model == "pro"),
        ("charts", ("chart", "python", "code"), "python_code_execution" in tools),
        ("structured output", ("structured", "schema"), bool(request.structured_output_schema)),
        ("search filters", ("filter", "search", "tools"), "search" in tools),
        ("expected output", ("expected",), bool(request.expected_output)),
    ]
    return [(label, words) for label, words, on in used if on]


class AgentStream(RetryingClient):
    """One question to the Research Agent: one POST, its stream read by `BigdataAdapter`.

    A subclass may post another body and read another envelope (`_body`, `_adapter`): the
    Workflows client does (chats/agent/providers/workflows.py).
    """

    def _body(self) -> dict[str, Any]:
        return request_body(self.request)

    def _adapter(self) -> StreamAdapter:
        return BigdataAdapter()

    def _attempt(self) -> AsyncIterator[AgentEvent]:
        headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
        }
        if self.config.api_key:
            headers["X-API-KEY"] = self.config.api_key
        return posted_events(
            self.config.url,
            self._body(),
            headers,
            self._reader(self._adapter()),
            refuse=self._refusal,
            agent=RESEARCH_AGENT.name,
            timeouts=self.config,
        )

    def _refusal(self, response: httpx.Response) -> Exception:
        error = _http_error(response, self.request, self.config.api_key)
        return refusal(error, response.headers)


def _http_error(response: httpx.Response, request: AgentRequest, api_key: str) -> AgentError:
    """Build the user-facing error for a refused request from the body's `detail`."""
    status = response.status_code
    detail = redact(error_detail(response), api_key)
    continuing = bool(request.chat_id or request.from_checkpoint_id)
    lowered = detail.lower()
    if continuing and ((status == 404) or (status in {400, 409} and "persistence_mode" in lowered)):
        message = (
            "The research agent can no longer continue this conversation"
            f" ({detail or 'not found'}). You can start a fresh agent conversation from here;"
            " this chat's history stays."
        )
        error = AgentError(message, kind="cannot_continue", status=status)
    elif status == 403 and (option := _not_entitled_option(request, lowered)):
        message = f"Your API key is not entitled to {option}."
        error = AgentError(message, kind="http", status=status)
    else:
        error = refused(RESEARCH_AGENT, status, detail)
    return error


def _not_entitled_option(request: AgentRequest, detail: str) -> str:
    """Name the option a 403 refers to: the one its detail names, else the only one in use."""
    used = entitled_options(request)
    named = [label for label, words in used if any(word in detail for word in words)]
    if named:
        return named[0]
    return used[0][0] if len(used) == 1 else ""
