"""The event log's rows read back: our schema, and rows logged before it had one."""

from __future__ import annotations

import pytest

from chats.agent.events import GroundingEvent, event_from_data
from chats.agent.logged_events import logged_event
from chats.agent.providers import bigdata
from tests.citations.conftest import bigdata as bigdata_source
from tests.citations.conftest import ref


def test_rows_logged_before_the_schema_read_as_research_agent_messages():
    legacy_grounding = {"type": "GROUNDING", "references": [ref(0, 3, bigdata_source("a"))]}
    event = logged_event(legacy_grounding)
    assert [c.source.key for c in event.citations] == ["id:a"]
    legacy_audit = {"type": "AUDIT", "audit_traces": [{"tool_id": "t", "title": "x"}]}
    assert [c.tool_id for c in logged_event(legacy_audit).tool_calls] == ["t"]
    # The schema's own reader takes them for events of the schema, with nothing in them.
    assert event_from_data(legacy_grounding) == GroundingEvent()


@pytest.mark.parametrize(
    "message",
    [
        {"type": "GROUNDING", "references": [ref(0, 3, bigdata_source("a"))]},
        {"type": "AUDIT", "audit_traces": [{"tool_id": "t", "title": "x", "results": []}]},
        {"type": "ANSWER", "content": "Revenue rose."},
        {"type": "NOT_ENTITLED", "feature": "f"},
    ],
)
def test_rows_of_the_schema_read_back_as_the_event_they_were(message):
    event = bigdata.event_from_message(message)
    assert logged_event(event.data) == event == event_from_data(event.data)


@pytest.mark.parametrize("data", [None, [], {}, {"type": ""}, {"type": 3}])
def test_what_is_not_an_event_reads_as_none(data):
    assert logged_event(data) is None
