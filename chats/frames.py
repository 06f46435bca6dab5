"""The websocket protocol between the chat page and the server, in both directions.

Browser → server frames are validated here (`parse_client_frame`); server → browser event
payloads are built here (`event_view`), both live and when replaying the event log, so a
resumed page sees exactly what a live one saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .agent.events import (
    ActionEvent,
    AgentEvent,
    AnswerEvent,
    ErrorEvent,
    LlmRetryEvent,
    PlanningEvent,
    ThinkingEvent,
    ToolErrorEvent,
    event_from_data,
)

EFFORTS = ("lite", "standard")
LEAF = "leaf"  # ask: continue the visible branch


class FrameError(ValueError):
    """A frame from the browser that we refuse; the message is shown to the user."""


@dataclass(frozen=True)
class Ask:
    message: str
    research_effort: str
    parent_turn_id: int | str | None  # LEAF, None (the start of the chat) or a turn id
    restart: bool


@dataclass(frozen=True)
class Stop:
    turn_id: int


@dataclass(frozen=True)
class Sync:
    cursors: dict[int, int]  # turn id -> the last seq the page has
    newest_turn_id: int


ClientFrame = Ask | Stop | Sync


def parse_client_frame(data: Any) -> ClientFrame:
    """Return the typed frame, or raise FrameError saying what is wrong with it."""
    if not isinstance(data, dict):
        raise FrameError("A frame must be a JSON object.")
    kind = data.get("type")
    if kind == "ask":
        message = data.get("message")
        if not isinstance(message, str) or not message.strip():
            raise FrameError("Write a question first.")
        if len(message) > settings.MESSAGE_MAX_CHARS:
            raise FrameError(f"Questions are limited to {settings.MESSAGE_MAX_CHARS} characters.")
        effort = data.get("research_effort", "standard")
        if effort not in EFFORTS:
            raise FrameError("research_effort must be 'lite' or 'standard'.")
        parent = data.get("parent_turn_id", LEAF)
        if parent is not None and parent != LEAF and not _is_id(parent):
            raise FrameError("parent_turn_id must be a turn id, null or 'leaf'.")
        restart = data.get("restart", False)
        if not isinstance(restart, bool):
            raise FrameError("restart must be true or false.")
        return Ask(message=message, research_effort=effort, parent_turn_id=parent, restart=restart)
    if kind == "stop":
        turn_id = data.get("turn_id")
        if not _is_id(turn_id):
            raise FrameError("stop needs a turn_id.")
        return Stop(turn_id=turn_id)
    if kind == "sync":
        cursors = data.get("cursors", {})
        newest = data.get("newest_turn_id", 0)
        if not isinstance(cursors, dict) or len(cursors) > 200:
            raise FrameError("cursors must be an object of at most 200 turns.")
        parsed: dict[int, int] = {}
        for key, seq in cursors.items():
            if not (isinstance(key, str) and key.isdigit()) or not _is_count(seq):
                raise FrameError("cursors maps turn ids to sequence numbers.")
            parsed[int(key)] = seq
        if not _is_count(newest):
            raise FrameError("newest_turn_id must be a whole number.")
        return Sync(cursors=parsed, newest_turn_id=newest)
    raise FrameError("Unknown frame type.")


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**63


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def event_view(seq: int, event: AgentEvent) -> dict[str, Any]:
    """What the page needs of one event: its seq and type, plus what it displays."""
    view: dict[str, Any] = {"seq": seq, "type": event.type}
    if isinstance(event, AnswerEvent | ThinkingEvent):
        view["content"] = event.content
    elif isinstance(event, PlanningEvent):
        view["plan"] = {"title": event.title, "steps": event.steps}
    elif isinstance(event, ActionEvent):
        view["label"] = describe_action(event.tool_name, event.tool_arguments)
    elif isinstance(event, ToolErrorEvent):
        view["label"] = f"{event.tool_name or 'A tool'} failed: {event.error}"
    elif isinstance(event, LlmRetryEvent):
        view["label"] = event.message or "Retrying the language model"
    elif isinstance(event, ErrorEvent):
        view["label"] = event.error
    return view


def stored_event_view(seq: int, data: dict[str, Any]) -> dict[str, Any]:
    """The same view, for an event read back from the log."""
    event = event_from_data(data)
    return event_view(seq, event) if event else {"seq": seq, "type": "UNKNOWN"}


def describe_action(tool_name: str, arguments: dict[str, Any]) -> str:
    """Return the line the page shows for a tool call: "Searching: NVIDIA Q2 FY26 earnings"."""
    query = arguments.get("query") or arguments.get("text")
    if tool_name == "search" and isinstance(query, str):
        return f"Searching: {query}"
    readable = tool_name.replace("_", " ").strip().capitalize() or "Using a tool"
    detail = ", ".join(str(v) for v in arguments.values() if isinstance(v, str | int | float))
    return f"{readable}: {detail}" if detail else readable
