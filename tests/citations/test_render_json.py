"""The JSON rendering: everything resolved, invalid references included."""

import json

from citations.render import render_json
from tests.citations.conftest import cite, cited_from_capture, ref


def test_json_carries_answer_references_sources_numbering_and_tools(stream_fixtures_dir):
    data = render_json(cited_from_capture(stream_fixtures_dir / "tool_level.sse"))
    assert json.loads(json.dumps(data)) == data

    assert data["answer"].startswith("Microsoft reports on April 29.")
    assert [(r["footnote"], r["is_valid"], r["source_key"]) for r in data["references"]] == [
        (None, True, None),
        (1, True, "id:ms-1"),
    ]
    assert data["sources"] == [
        {
            "number": 1,
            "key": "id:ms-1",
            "type": "BIGDATA",
            "label": "SEC EDGAR - 2026-01-30",
            "name": "SEC EDGAR",
            "headline": "MSFT 10-Q",
            "url": "https://sec.example/msft",
            "published_on": "2026-01-30",
            "placed": True,
        }
    ]
    assert data["numbering"] == [{"offset": 75, "footnotes": [1]}]
    assert data["tool_attributions"] == [
        {
            "tool_name": "earnings_calendar",
            "audit_id": "cal-7",
            "audit_type": "MarkdownAuditV1",
            "title": "Earnings calendar",
            "spans": [[0, 30]],
        }
    ]


def test_json_keeps_invalid_references_with_their_problem_and_raw_data():
    data = render_json(cite("Short.", ref(0, 60, None), "junk"))
    assert [(r["is_valid"], r["problem"], r["data"]) for r in data["references"]] == [
        (False, "end 60 is beyond the answer (6 characters)", ref(0, 60, None)),
        (False, "not an object", "junk"),
    ]
    assert data["sources"] == data["numbering"] == data["tool_attributions"] == []
