"""Typed events: what the event log stores (`data`) reads back as the same event."""

from __future__ import annotations

import json

import pytest

from chats.agent.events import UnknownEvent, event_from_data
from chats.agent.providers import bigdata
from tests.citations.conftest import bigdata as bigdata_source
from tests.citations.conftest import ref

MESSAGES = [
    {"type": "PLANNING",
     "plan": {"title": "T", "steps": [{"description": "d", "status": "IN_PROGRESS"}]}},
    {"type": "THINKING", "content": "hmm"},
    {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "NVDA"}},
    {"type": "AUDIT", "audit_traces": [{"audit_type": "SearchAuditV1", "tool_id": "s-1",
                                         "query": {"text": "NVDA"},
                                         "results": [{"values": [{"hd": "H", "id": "d1"}]}]}]},
    {"type": "GROUNDING", "references": [ref(0, 3, bigdata_source("a")), ref(0, 3, None), "junk"]},
    {"type": "ANSWER", "content": " spaced \n"},
    {"type": "STRUCTURED_OUTPUT", "content": {"rows": [1, 2]}},
    {"type": "LLM_RETRY", "message": "again"},
    {"type": "TOOL_ERROR", "tool_name": "search", "error": "timeout"},
    {"type": "ERROR", "error": "boom"},
    {"type": "COMPLETE", "checkpoint_id": "k",
     "consumption": [{"type": "base", "input_tokens": 3}]},
    {"type": "CHART", "chart_id": "c", "vega_lite_spec": {"mark": "bar"}},
]  # fmt: skip


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m["type"])
def test_what_the_log_stores_reads_back_as_the_same_event(message):
    event = bigdata.event_from_message(message, chat_id="c1", raw=json.dumps(message))
    stored = json.loads(json.dumps(event.data))  # the log stores JSON
    assert event_from_data(stored) == event
    assert event.raw == json.dumps(message)


def test_unknown_types_keep_their_fields():
    event = event_from_data({"type": "NOT_ENTITLED", "feature": "f"})
    assert isinstance(event, UnknownEvent)
    assert event.data == {"type": "NOT_ENTITLED", "feature": "f"}


@pytest.mark.parametrize("data", [None, [], {}, {"type": ""}, {"type": 3}])
def test_what_is_not_an_event_reads_as_none(data):
    assert event_from_data(data) is None


@pytest.mark.parametrize(
    "data",
    [
        {"type": "COMPLETE", "consumption": 5},
        {"type": "PLANNING", "plan": {"steps": "abc"}},
        {"type": "GROUNDING", "citations": 3},
        {"type": "AUDIT", "tool_calls": {"a": 1}},
        {"type": "GROUNDING", "citations": [{"audit_ids": 7, "passages": "x", "start": 0}]},
    ],
)
def test_fields_of_the_wrong_shape_read_as_empty(data):
    assert event_from_data(data) is not None
