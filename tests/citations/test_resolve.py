"""Resolving references against the complete answer: validity, links to traces, numbering."""

from datetime import date

import pytest

from chats.agent.providers.bigdata import source_document as source_fields
from chats.agent.providers.bigdata import source_key
from citations.resolve import resolve_citations
from tests.citations.conftest import bigdata, cite, ref

ANSWER = "Revenue rose 4%. Costs fell 2%. Margins improved."  # 49 characters


# --- validity ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reference", "problem"),
    [
        ("not a reference", "not an object"),
        (None, "not an object"),
        (ref(None, 5), "start is not an integer"),
        (ref(0, "5"), "end is not an integer"),
        (ref(0, 5.0), "end is not an integer"),
        (ref(False, 5), "start is not an integer"),  # bool is an int in Python, not in JSON
        (ref(0, True), "end is not an integer"),
        (ref(-1, 5), "start -1 is negative"),
        (ref(5, 5), "empty span: start 5 is not before end 5"),
        (ref(9, 3), "empty span: start 9 is not before end 3"),
        (ref(0, 50), "end 50 is beyond the answer (49 characters)"),
        (ref(0, 5, source="doc-1"), "source is neither an object nor null"),
    ],
)
def test_an_invalid_reference_is_kept_with_its_problem_and_not_numbered(reference, problem):
    cited = cite(ANSWER, reference, ref(0, 16, bigdata("ok")))

    judged = cited.references[0]
    assert (judged.is_valid, judged.problem, judged.footnote) == (False, problem, None)
    assert judged.data == reference
    assert [s.key for s in cited.sources] == ["id:ok"]
    assert [m.offset for m in cited.markers] == [16]


def test_a_span_may_end_exactly_at_the_end_of_the_answer():
    cited = cite(ANSWER, ref(0, len(ANSWER), bigdata("d")))
    assert cited.references[0].is_valid
    assert cited.markers[0].offset == len(ANSWER)


def test_only_spans_past_the_end_are_references_past_the_end():
    past, malformed = ref(20, 60, bigdata("p")), ref(-1, 60, bigdata("m"))
    cited = cite(ANSWER, ref(0, 16, bigdata("ok")), past, malformed, ref(9, 3), "text")
    assert [r.data for r in cited.references_past_the_end] == [past]
    assert len(cited.invalid_references) == 4


def test_offsets_count_code_points_not_utf16_units_or_bytes():
    answer = "😀 up 4%. 数据 down."  # the emoji is one index in Python, two in UTF-16
    cited = cite(answer, ref(0, 8, bigdata("d")), ref(9, len(answer), bigdata("e")))
    assert [answer[: m.offset][-1] for m in cited.markers] == [".", "."]
    assert all(r.is_valid for r in cited.references)


# --- tool-level attributions ---------------------------------------------------------------


def test_a_null_source_links_to_the_audit_trace_with_that_tool_id():
    traces = [
        {"audit_type": "SearchAuditV1", "tool_id": "s-1", "query": {"text": "NVDA revenue"}},
        {"audit_type": "MarkdownAuditV1", "tool_id": "cal-7", "title": "Earnings calendar"},
    ]
    cited = cite(
        ANSWER,
        ref(0, 16, None, tool_name="earnings_calendar", audit_id="cal-7"),
        ref(17, 31, None, tool_name="earnings_calendar", audit_id="cal-7"),
        traces=traces,
    )

    assert cited.sources == ()
    assert cited.markers == ()
    [attribution] = cited.tool_attributions
    assert (attribution.tool_name, attribution.title) == ("earnings_calendar", "Earnings calendar")
    assert attribution.tool_call.tool_id == "cal-7"
    assert attribution.spans == ((0, 16), (17, 31))


def test_a_search_trace_is_titled_by_its_query_and_camel_case_traces_are_read():
    traces = [{"auditType": "SearchAuditV1", "toolId": "s-9", "query": {"text": "NVDA  gaming"}}]
    cited = cite(ANSWER, ref(0, 16, None, audit_id="s-9"), traces=traces)
    [attribution] = cited.tool_attributions
    assert (attribution.tool_call.kind, attribution.title) == ("SearchAuditV1", "NVDA gaming")


def test_the_older_reference_shape_links_through_action_audits_id_or_its_tag():
    traces = [
        {"audit_type": "MarkdownAuditV1", "tool_id": "act-1", "title": "Tearsheet"},
        {"audit_type": "MarkdownAuditV1", "tool_id": "call-2", "title": "Chart"},
    ]
    older = [
        {"start": 0, "end": 16, "source": None, "tag": {"tool_call_id": "x", "ref_id": 1},
         "action_audits_id": "act-1"},
        {"start": 17, "end": 31, "source": None, "tag": {"tool_call_id": "call-2", "ref_id": 2}},
    ]  # fmt: skip
    cited = cite(ANSWER, *older, traces=traces)
    assert [r.audit_id for r in cited.references] == ["act-1", "call-2"]
    assert [t.title for t in cited.tool_attributions] == ["Tearsheet", "Chart"]


def test_an_audit_id_that_matches_no_trace_falls_back_to_the_tool_name():
    cited = cite(ANSWER, ref(0, 16, None, tool_name="company_tearsheet", audit_id="gone"))
    [attribution] = cited.tool_attributions
    assert (attribution.display_name, attribution.title, attribution.tool_call) == (
        "company_tearsheet",
        "",
        None,
    )
    assert cited.references[0].audit_id == "gone"


# --- deduplication and numbering -----------------------------------------------------------


def test_sources_are_keyed_by_id_else_url_else_headline_never_by_audit_id():
    external = {
        "type": "EXTERNAL",
        "hd": "Debt",
        "action": {"name": "FT", "url": "https://ft.example/d"},
    }
    assert source_key(bigdata("doc-9")) == "id:doc-9"
    assert source_key(bigdata(None, url="https://dj.example/9")) == "url:https://dj.example/9"
    assert source_key(external) == "url:https://ft.example/d"
    assert source_key({"type": "BIGDATA", "hd": "Results"}) == "hd:Results"
    assert source_key({"type": "BIGDATA"}).startswith("sha256:")
    assert source_key({"type": "BIGDATA"}) == source_key({"type": "BIGDATA"})

    same_call = cite(ANSWER, ref(0, 16, bigdata("a")), ref(17, 31, bigdata("b")))
    assert [s.key for s in same_call.sources] == ["id:a", "id:b"]  # both audit_id "a-1"


def test_an_overlong_key_is_hashed_to_fit_the_column():
    key = source_key(bigdata(None, url="https://x.example/" + "a" * 700))
    assert key.startswith("url-sha256:") and len(key) < 100


def test_numbering_follows_end_then_start_then_arrival():
    cited = cite(
        ANSWER,
        ref(17, 31, bigdata("late")),  # ends at 31
        ref(0, 31, bigdata("wide")),  # also ends at 31 but starts first
        ref(0, 16, bigdata("early")),
        ref(0, 16, bigdata("early-twin")),  # same span as "early", arrived later
    )
    assert [s.key for s in cited.sources] == ["id:early", "id:early-twin", "id:wide", "id:late"]
    assert [r.footnote for r in cited.references] == [4, 3, 1, 2]
    assert [(m.offset, m.numbers) for m in cited.markers] == [(16, (1, 2)), (31, (3, 4))]


def test_a_source_shows_the_fields_of_its_first_citation_in_reading_order():
    cited = cite(
        ANSWER,
        ref(17, 31, bigdata("d", src_name="Later Name", url=None)),
        ref(0, 16, bigdata("d", src_name="First Name")),
    )
    [source] = cited.sources
    assert (source.name, source.url) == ("First Name", "https://news.example/d")


def test_references_from_before_and_after_the_answer_chunks_all_apply():
    from chats.agent.providers.bigdata import event_from_message
    from chats.agent.transcript import Transcript

    messages = [
        {"type": "GROUNDING", "references": [ref(0, 16, bigdata("before"))]},
        {"type": "ANSWER", "content": ANSWER[:20]},
        {"type": "ANSWER", "content": ANSWER[20:]},
        {"type": "GROUNDING", "references": [ref(17, 49, bigdata("after"))]},
    ]
    transcript = Transcript.from_events(event_from_message(m) for m in messages)
    cited = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert [s.key for s in cited.sources] == ["id:before", "id:after"]


# --- labels and links ----------------------------------------------------------------------


def test_a_bigdata_label_is_its_source_name_and_the_date_part_of_ts():
    fields = source_fields(bigdata("d", src_name="SEC EDGAR", ts="2026-04-15T23:30:00-05:00"))
    assert (fields.label, fields.published_on) == ("SEC EDGAR - 2026-04-15", date(2026, 4, 15))


def test_an_external_label_prefers_the_date_of_its_action():
    source = {
        "type": "EXTERNAL",
        "hd": "Nvidia results",
        "ts": "2026-04-16T09:30:00Z",
        "action": {"name": "Reuters", "url": "https://r.example/n", "date": "2026-04-14"},
    }
    assert source_fields(source).label == "Reuters - 2026-04-14"
    del source["action"]["date"]
    assert source_fields(source).label == "Reuters - 2026-04-16"


@pytest.mark.parametrize(
    ("source", "label"),
    [
        (bigdata("d", ts=None), "Reuters"),
        (bigdata("d", ts="yesterday"), "Reuters"),
        (bigdata("d", ts=1776297600000), "Reuters - 2026-04-16"),  # epoch milliseconds
        (bigdata("d", src_name=None, ts=None), "Headline d"),
        (bigdata("d", src_name="  ", hd=None), "news.example - 2026-04-16"),
        ({"type": "EXTERNAL"}, "Source"),
    ],
)
def test_a_label_falls_back_sensibly(source, label):
    assert source_fields(source).label == label


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://ft.example/a b(c)", "https://ft.example/a%20b%28c%29"),
        ("HTTP://ex.example/x", "HTTP://ex.example/x"),
        ("javascript:alert(1)", ""),
        ("java\tscript:alert(1)", ""),
        (" data:text/html,<script>", ""),
        ("//evil.example/x", ""),
        ("ftp://files.example/x", ""),
        ("https://", ""),
        (42, ""),
    ],
)
def test_only_http_urls_are_linked(url, linked):
    assert source_fields(bigdata("d", url=url)).url == linked
