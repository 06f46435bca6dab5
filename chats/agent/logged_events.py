"""The event log's rows read back as typed events, for a page catching up and for a turn
rebuilt from its log.

A row holds our event schema (`AgentEvent.data`, read by `chats.agent.events.event_from_data`),
except rows logged before events had a schema of their own: those hold the Research Agent's
GROUNDING and AUDIT messages as it sent them, and its adapter reads them
(`chats.agent.providers.bigdata.event_from_message`). Kept apart from `events`, which every
adapter imports, so that no module imports itself back.
"""

from __future__ import annotations

from typing import Any

from chats.agent.events import AgentEvent, event_from_data
from chats.agent.providers.bigdata import event_from_message


def logged_event(data: Any) -> AgentEvent | None:
    """Return the event a row of the event log holds, or None for a row without a type."""
    if isinstance(data, dict) and (
        (data.get("type") == "GROUNDING" and "citations" not in data)
        or (data.get("type") == "AUDIT" and "tool_calls" not in data)
    ):
        return event_from_message(data)
    return event_from_data(data)
