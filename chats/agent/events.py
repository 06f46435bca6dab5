"""The typed events every provider's adapter produces, whatever its wire format.

The vocabulary is the Research Agent's (docs/PROTOCOL.md, "Events"): a run plans, thinks, calls
tools, streams its answer and its citations, and completes or fails. Adapters (`bigdata.py`, and one
per other provider) build these; everything past them (the run, the event log, the page) reads only
these fields. `data` is the event in our own JSON schema, which the event log stores and
`event_from_data` reads back; `raw` is the wire text the event came from, kept for the record. That
schema borrows the Research Agent's message shape for every type but AUDIT and GROUNDING, whose
provider-neutral forms are `ToolCall`s and `Citation`s.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields
from typing import Any

from chats.agent.json_values import as_dict, as_offset, is_int, objects
from citations.references import Citation, ToolCall

AGENT_ERROR = "The research agent reported an error."
SKIPPED = "STREAM_SKIPPED"  # our own event type: adapters must not read it from a wire


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentEvent:
    type: str
    chat_id: str | None = None  # the provider's conversation id, when its envelope carries one
    raw: str | None = field(default=None, compare=False, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        data = {"type": self.type, **self._payload()}
        if self.chat_id:
            data["chat_id"] = self.chat_id
        return data

    def _payload(self) -> dict[str, Any]:
        """The event's own fields, a tuple as a list (of each `ToolCall`'s or `Citation`'s
        data); a type whose schema differs says how."""
        payload = {}
        for name in _payload_fields(type(self)):  # a loop: half a comprehension's cost on 3.11
            value = getattr(self, name)
            payload[name] = _listed(value) if isinstance(value, tuple) else value
        return payload


@functools.cache
def _payload_fields(kind: type[AgentEvent]) -> tuple[str, ...]:
    """The fields of an event's data besides `type` and `chat_id`: those it is compared by, so
    not the wire text it came from (`raw`) nor what the site renders of it (a chart's `html`)."""
    return tuple(f.name for f in fields(kind) if f.compare and f.name not in {"type", "chat_id"})


def _listed(items: tuple[Any, ...]) -> list[Any]:
    return [item.to_data() if isinstance(item, ToolCall | Citation) else item for item in items]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanningEvent(AgentEvent):
    type: str = "PLANNING"
    title: str = ""
    steps: tuple[dict[str, str], ...] = ()  # {"description", "status"}

    def _payload(self) -> dict[str, Any]:
        return {"plan": {"title": self.title, "steps": [dict(s) for s in self.steps]}}


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingEvent(AgentEvent):
    type: str = "THINKING"
    content: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionEvent(AgentEvent):
    type: str = "ACTION"
    tool_name: str = ""
    tool_arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEvent(AgentEvent):
    """Tool calls made and what they returned (Bigdata AUDIT; other providers' searches)."""

    type: str = "AUDIT"
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GroundingEvent(AgentEvent):
    type: str = "GROUNDING"
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerEvent(AgentEvent):
    type: str = "ANSWER"
    content: str = ""  # exactly as sent: the buffering rule forbids any trimming (docs/PROTOCOL.md)


@dataclass(frozen=True, slots=True, kw_only=True)
class StructuredOutputEvent(AgentEvent):
    type: str = "STRUCTURED_OUTPUT"
    content: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChartEvent(AgentEvent):
    """A chart the agent drew; `vega_lite_spec` is untrusted (see `chats/answer/charts.py`)."""

    type: str = "CHART"
    chart_id: str = ""
    title: str = ""
    chart_type: str = ""
    vega_lite_spec: Any = None
    caption: str = ""
    data_points: Any = None
    start: int | None = None  # offsets into the answer, when the agent places the chart
    end: int | None = None
    # The chart made safe as it arrived (`chats.answer.charts.safe_chart_event`): its spec or
    # None, a note, its data table. Set by the site; an agent's own is replaced on arrival.
    sanitized: dict[str, Any] | None = None
    # Its HTML for the live frame, rendered with it off the event loop (`chats.run.rendering`);
    # not part of its data: the log keeps `sanitized`, and a page catching up renders that.
    html: str | None = field(default=None, compare=False, repr=False)

    def _payload(self) -> dict[str, Any]:
        payload = AgentEvent._payload(self)  # not super(): slots=True makes the class anew
        if self.sanitized is None:  # as it arrived, before the site made it safe
            del payload["sanitized"]
        return payload


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmRetryEvent(AgentEvent):
    type: str = "LLM_RETRY"
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolErrorEvent(AgentEvent):
    type: str = "TOOL_ERROR"
    tool_name: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(AgentEvent):
    type: str = "ERROR"
    error: str = AGENT_ERROR


@dataclass(frozen=True, slots=True, kw_only=True)
class CompleteEvent(AgentEvent):
    type: str = "COMPLETE"
    checkpoint_id: str = ""
    consumption: tuple[dict[str, Any], ...] = ()  # token use per model tier


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedEvent(AgentEvent):
    """Part of the stream this site had to skip (a line over AGENT_MAX_LINE_BYTES): what was
    lost, in words, and how many lines. Made by our reader, never read from an agent's wire."""

    type: str = SKIPPED
    notice: str = ""
    lines: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent(AgentEvent):
    """A type this site does not interpret yet (NOT_ENTITLED...): kept as received."""

    payload: dict[str, Any] = field(default_factory=dict)

    def _payload(self) -> dict[str, Any]:
        return dict(self.payload)


KNOWN_TYPES = (
    "PLANNING",
    "THINKING",
    "ACTION",
    "AUDIT",
    "GROUNDING",
    "ANSWER",
    "STRUCTURED_OUTPUT",
    "CHART",
    "LLM_RETRY",
    "TOOL_ERROR",
    "ERROR",
    "COMPLETE",
)


def event_from_data(data: Any) -> AgentEvent | None:
    """Read an event back from our schema (`AgentEvent.data`). The event log's rows, some of
    which predate the schema, are read by `chats.agent.logged_events.logged_event`."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str) or not data["type"]:
        return None
    chat_id = data.get("chat_id")
    return event_from_fields(data, chat_id=chat_id if isinstance(chat_id, str) else None)


def event_from_fields(
    data: dict[str, Any], *, chat_id: str | None, raw: str | None = None
) -> AgentEvent:
    """Return the event whose fields (all but `chat_id`) are in `data`, a dict with a string
    `type`; the conversation id and the wire text are given, not read from it."""
    kind = data["type"]
    if kind == "ANSWER":  # most of every stream, so tested first
        content = data.get("content")
        return AnswerEvent(
            content=content if isinstance(content, str) else "", chat_id=chat_id, raw=raw
        )
    common = {"chat_id": chat_id, "raw": raw}
    match kind:
        case "PLANNING":
            plan = as_dict(data.get("plan"))
            steps = objects(plan.get("steps"))
            return PlanningEvent(
                title=_text(plan.get("title")),
                steps=tuple(
                    {"description": _text(s.get("description")), "status": _text(s.get("status"))}
                    for s in steps
                ),
                **common,
            )
        case "THINKING":
            return ThinkingEvent(content=_text(data.get("content")), **common)
        case "ACTION":
            return ActionEvent(
                tool_name=_text(data.get("tool_name")),
                tool_arguments=as_dict(data.get("tool_arguments")),
                **common,
            )
        case "AUDIT":
            calls = objects(data.get("tool_calls"))
            return AuditEvent(tool_calls=tuple(ToolCall.from_data(c) for c in calls), **common)
        case "GROUNDING":
            items = objects(data.get("citations"))
            return GroundingEvent(citations=tuple(Citation.from_data(c) for c in items), **common)
        case "STRUCTURED_OUTPUT":
            return StructuredOutputEvent(content=data.get("content"), **common)
        case "CHART":
            return ChartEvent(
                chart_id=_text(data.get("chart_id")),
                title=_text(data.get("title")),
                chart_type=_text(data.get("chart_type")),
                vega_lite_spec=data.get("vega_lite_spec"),
                caption=_text(data.get("caption")),
                data_points=data.get("data_points"),
                start=as_offset(data.get("start")),
                end=as_offset(data.get("end")),
                sanitized=sanitized
                if isinstance(sanitized := data.get("sanitized"), dict)
                else None,
                **common,
            )
        case "LLM_RETRY":
            return LlmRetryEvent(message=_text(data.get("message")), **common)
        case "TOOL_ERROR":
            return ToolErrorEvent(
                tool_name=_text(data.get("tool_name")), error=_text(data.get("error")), **common
            )
        case "ERROR":
            return ErrorEvent(error=_text(data.get("error")) or AGENT_ERROR, **common)
        case "COMPLETE":
            consumption = objects(data.get("consumption"))
            return CompleteEvent(
                checkpoint_id=_text(data.get("checkpoint_id")),
                consumption=tuple(consumption),
                **common,
            )
        case "STREAM_SKIPPED" if raw is None:  # from our event log, not from a wire
            lines = data.get("lines")
            return SkippedEvent(
                notice=_text(data.get("notice")),
                lines=lines if is_int(lines) else 1,
                **common,
            )
    payload = {k: v for k, v in data.items() if k not in {"type", "chat_id"}}
    return UnknownEvent(type=kind, payload=payload, **common)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))
