"""The Bigdata adapter: envelopes, references and traces → typed events and citations."""

from __future__ import annotations

from chats.agent.events import AnswerEvent
from chats.agent.providers import bigdata
from tests.citations.conftest import bigdata as bigdata_source
from tests.citations.conftest import ref


def test_either_envelope_gives_its_message():
    research = {"chat_id": "c1", "message": {"type": "ANSWER", "content": "a"}}
    workflow = {"request_id": "r", "execution_id": "e", "delta": {"type": "ANSWER", "content": "b"}}
    assert bigdata.event_from_envelope(research) == AnswerEvent(content="a", chat_id="c1")
    assert bigdata.event_from_envelope(workflow) == AnswerEvent(content="b")
    assert bigdata.event_from_envelope({"message": "x"}) is None
    assert bigdata.event_from_envelope([1]) is None


def test_a_reference_names_its_tool_calls_in_order_of_trust():
    older = {"start": 0, "end": 1, "source": None, "tag": {"tool_call_id": "t-2"},
             "action_audits_id": ["a-1", "t-2"]}  # fmt: skip
    assert bigdata.citation(older).audit_ids == ("a-1", "t-2")
    assert bigdata.citation(ref(0, 1, None, auditId="x", audit_id="y")).audit_ids == ("y", "x")


def test_bigdata_chunks_and_external_text_are_passages():
    chunky = bigdata_source("a", chunks=[{"cnum": 1, "text": "Revenue rose 4%.", "relevance": 0.9}])
    assert [(p.text, p.relevance) for p in bigdata.citation(ref(0, 1, chunky)).passages] == [
        ("Revenue rose 4%.", 0.9)
    ]
    external = {
        "type": "EXTERNAL",
        "text": "Costs fell.",
        "action": {"name": "R", "url": "https://r.example"},
    }
    assert [p.text for p in bigdata.citation(ref(0, 1, external)).passages] == ["Costs fell."]


def test_a_reference_that_cannot_be_read_says_why():
    assert bigdata.citation("junk").problem == "not an object"
    assert bigdata.citation(ref(0, 1, "x")).problem == "source is neither an object nor null"


def test_a_search_trace_lists_what_it_retrieved():
    trace = {"auditType": "SearchAuditV1", "toolId": "s-9", "query": {"text": "NVDA  gaming"},
             "results": [{"values": [{"id": "d1", "hd": "NVIDIA 10-Q",
                                      "src_name": "SEC"}]}]}  # fmt: skip
    call = bigdata.tool_call(trace)
    assert (call.tool_id, call.kind, call.title) == ("s-9", "SearchAuditV1", "NVDA gaming")
    assert [(r.key, r.label) for r in call.results] == [("id:d1", "SEC")]
    assert call.result_headlines == ["NVIDIA 10-Q"]
