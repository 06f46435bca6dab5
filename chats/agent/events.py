"""Typed events of the Research Agent stream (seed 002, "Message types").

`event_from_envelope` is the one place that reads upstream JSON: it unwraps either envelope
(`message` for the Research Agent, `delta` for Workflows) and dispatches on `type`. Unknown
types become `UnknownEvent`, kept and stored, never fatal (seed 002, "Forward compatibility").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """Fields every message may carry; `data` is the message exactly as received."""

    type: str
    data: dict[str, Any] = field(repr=False)
    chat_id: str | None = None
    message_id: str | None = None
    role: str = "assistant"

    TYPE: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class PlanningEvent(AgentEvent):
    TYPE: ClassVar[str] = "PLANNING"

    @property
    def title(self) -> str:
        return _text(_dict(self.data.get("plan")).get("title"))

    @property
    def steps(self) -> list[dict[str, str]]:
        steps = _dict(self.data.get("plan")).get("steps")
        return [
            {"description": _text(s.get("description")), "status": _text(s.get("status"))}
            for s in steps or []
            if isinstance(s, dict)
        ]


@dataclass(frozen=True, slots=True)
class ThinkingEvent(AgentEvent):
    TYPE: ClassVar[str] = "THINKING"

    @property
    def content(self) -> str:
        return _text(self.data.get("content"))


@dataclass(frozen=True, slots=True)
class ActionEvent(AgentEvent):
    TYPE: ClassVar[str] = "ACTION"

    @property
    def tool_name(self) -> str:
        return _text(self.data.get("tool_name"))

    @property
    def tool_arguments(self) -> dict[str, Any]:
        return _dict(self.data.get("tool_arguments"))


@dataclass(frozen=True, slots=True)
class AuditEvent(AgentEvent):
    TYPE: ClassVar[str] = "AUDIT"

    @property
    def audit_traces(self) -> list[dict[str, Any]]:
        return [t for t in self.data.get("audit_traces") or [] if isinstance(t, dict)]


@dataclass(frozen=True, slots=True)
class GroundingEvent(AgentEvent):
    TYPE: ClassVar[str] = "GROUNDING"

    @property
    def references(self) -> list[Any]:
        """The references as sent; validity is judged later, against the whole answer."""
        references = self.data.get("references")
        return list(references) if isinstance(references, list) else []


@dataclass(frozen=True, slots=True)
class AnswerEvent(AgentEvent):
    TYPE: ClassVar[str] = "ANSWER"

    @property
    def content(self) -> str:
        # Exactly as sent: the buffering rule forbids any trimming (seed 000).
        content = self.data.get("content")
        return content if isinstance(content, str) else ""


@dataclass(frozen=True, slots=True)
class StructuredOutputEvent(AgentEvent):
    TYPE: ClassVar[str] = "STRUCTURED_OUTPUT"

    @property
    def content(self) -> Any:
        return self.data.get("content")


@dataclass(frozen=True, slots=True)
class LlmRetryEvent(AgentEvent):
    TYPE: ClassVar[str] = "LLM_RETRY"

    @property
    def message(self) -> str:
        return _text(self.data.get("message"))


@dataclass(frozen=True, slots=True)
class ToolErrorEvent(AgentEvent):
    TYPE: ClassVar[str] = "TOOL_ERROR"

    @property
    def tool_name(self) -> str:
        return _text(self.data.get("tool_name"))

    @property
    def error(self) -> str:
        return _text(self.data.get("error"))


@dataclass(frozen=True, slots=True)
class ErrorEvent(AgentEvent):
    TYPE: ClassVar[str] = "ERROR"

    @property
    def error(self) -> str:
        return _text(self.data.get("error")) or "The research agent reported an error."


@dataclass(frozen=True, slots=True)
class CompleteEvent(AgentEvent):
    TYPE: ClassVar[str] = "COMPLETE"

    @property
    def checkpoint_id(self) -> str:
        return _text(self.data.get("checkpoint_id"))

    @property
    def consumption(self) -> list[dict[str, Any]]:
        return [c for c in self.data.get("consumption") or [] if isinstance(c, dict)]


@dataclass(frozen=True, slots=True)
class UnknownEvent(AgentEvent):
    """A type this client does not know yet (CHART, NOT_ENTITLED, ...): kept, not interpreted."""


EVENT_CLASSES: dict[str, type[AgentEvent]] = {
    cls.TYPE: cls
    for cls in (
        PlanningEvent,
        ThinkingEvent,
        ActionEvent,
        AuditEvent,
        GroundingEvent,
        AnswerEvent,
        StructuredOutputEvent,
        LlmRetryEvent,
        ToolErrorEvent,
        ErrorEvent,
        CompleteEvent,
    )
}
TERMINAL_TYPES = frozenset({"COMPLETE", "ERROR"})


def event_from_message(message: dict[str, Any], chat_id: str | None = None) -> AgentEvent | None:
    """Return the typed event for one message, or None when it has no string `type`."""
    event_type = message.get("type")
    if not isinstance(event_type, str) or not event_type:
        return None
    cls = EVENT_CLASSES.get(event_type, UnknownEvent)
    message_id = message.get("message_id")
    role = message.get("role")
    return cls(
        type=event_type,
        data=message,
        chat_id=chat_id,
        message_id=message_id if isinstance(message_id, str) else None,
        role=role if isinstance(role, str) and role else "assistant",
    )


def event_from_envelope(envelope: Any) -> AgentEvent | None:
    """Return the typed event inside either envelope, or None when the document is malformed."""
    if not isinstance(envelope, dict):
        return None
    message = envelope.get("message")
    if not isinstance(message, dict):
        message = envelope.get("delta")  # Workflows
    if not isinstance(message, dict):
        return None
    chat_id = envelope.get("chat_id")
    return event_from_message(message, chat_id if isinstance(chat_id, str) else None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
