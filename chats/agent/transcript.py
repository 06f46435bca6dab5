"""Everything one run of the agent said, accumulated from its events.

The live run, crash recovery (rebuilding from the stored event log) and `render_stream` all
fold events through `Transcript.apply`, so they cannot disagree about what an answer was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chats.agent.events import (
    AgentEvent,
    AnswerEvent,
    AuditEvent,
    ChartEvent,
    CompleteEvent,
    ErrorEvent,
    GroundingEvent,
    PlanningEvent,
    SkippedEvent,
    StructuredOutputEvent,
    ToolErrorEvent,
)
from chats.agent.logged_events import logged_event
from citations.references import Citation, ToolCall


@dataclass
class Transcript:
    answer_parts: list[str] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    structured_output: Any = None
    charts: list[ChartEvent] = field(default_factory=list)
    consumption: list[dict[str, Any]] = field(default_factory=list)
    checkpoint_id: str = ""
    upstream_chat_id: str = ""
    error: str = ""
    tool_errors: int = 0
    skipped: list[str] = field(default_factory=list)  # what the reader skipped, in words
    skipped_lines: int = 0
    completed: bool = False
    event_count: int = 0

    @property
    def answer(self) -> str:
        """The exact concatenation of ANSWER contents, in arrival order (docs/PROTOCOL.md, "The
        answer and its offsets")."""
        if len(self.answer_parts) > 1:
            self.answer_parts[:] = ["".join(self.answer_parts)]
        return self.answer_parts[0] if self.answer_parts else ""

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def apply(self, event: AgentEvent) -> None:
        self.event_count += 1
        if event.chat_id and not self.upstream_chat_id:
            self.upstream_chat_id = event.chat_id
        if isinstance(event, AnswerEvent):
            self.answer_parts.append(event.content)
        elif isinstance(event, GroundingEvent):
            self.citations.extend(event.citations)
        elif isinstance(event, AuditEvent):
            self.tool_calls.extend(event.tool_calls)
        elif isinstance(event, PlanningEvent):
            self.plan = {"title": event.title, "steps": [dict(s) for s in event.steps]}
        elif isinstance(event, StructuredOutputEvent):
            self.structured_output = event.content
        elif isinstance(event, ChartEvent):
            self.charts.append(event)
        elif isinstance(event, ToolErrorEvent):
            self.tool_errors += 1
        elif isinstance(event, SkippedEvent):
            self.skipped.append(event.notice)
            self.skipped_lines += event.lines
        elif isinstance(event, ErrorEvent):
            self.error = event.error
        elif isinstance(event, CompleteEvent):
            self.completed = True
            self.checkpoint_id = event.checkpoint_id
            self.consumption = list(event.consumption)

    @classmethod
    def from_events(cls, events: Iterable[AgentEvent]) -> Transcript:
        transcript = cls()
        for event in events:
            transcript.apply(event)
        return transcript

    @classmethod
    def from_log(cls, rows: Iterable[dict[str, Any]]) -> Transcript:
        """Rebuild from the event log (`TurnEvent.data`, our event schema)."""
        return cls.from_events(e for data in rows if (e := logged_event(data)) is not None)
