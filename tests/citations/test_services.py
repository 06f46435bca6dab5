"""Storing citations for a turn, reading them back, and exporting answers."""

import logging

import pytest
from django.db import transaction

from chats.agent.providers import bigdata as bigdata_adapter
from chats.answer.export import export_turns_markdown
from chats.models import Turn
from chats.selectors import chat_branch
from citations.evidence import with_checks
from citations.models import AuditTrace, Reference, Source
from citations.render import render_markdown
from citations.selectors import cited_answer_for_turn
from citations.services import citations_store_for_turn
from tests.citations.conftest import bigdata, cited_from_capture, ref

pytestmark = pytest.mark.django_db

ANSWER = "Revenue rose 4%. Costs fell 2%. Margins improved."
TRACES = [{"audit_type": "MarkdownAuditV1", "tool_id": "cal-7", "title": "Earnings calendar"}]


def store(turn: Turn, references, traces=()):
    with transaction.atomic():
        return citations_store_for_turn(
            turn_id=turn.pk,
            answer=turn.answer_text,
            citations=[bigdata_adapter.citation(r) for r in references],
            tool_calls=[bigdata_adapter.tool_call(t) for t in traces],
        )


def test_storing_creates_traces_sources_and_references_in_arrival_order(make_turn):
    turn = make_turn(answer=ANSWER)
    references = [
        ref(17, 31, bigdata("b")),
        ref(0, 16, None, tool_name="earnings_calendar", audit_id="cal-7"),
        ref(0, 16, bigdata("a")),
        ref(0, 99, bigdata("never-shown")),
        None,
    ]
    cited = store(turn, references, TRACES)

    trace = AuditTrace.objects.get(turn=turn)
    assert (trace.tool_id, trace.title) == ("cal-7", "Earnings calendar")
    rows = list(Reference.objects.filter(turn=turn).order_by("position"))
    assert [(r.position, r.start, r.end, r.footnote, r.is_valid) for r in rows] == [
        (0, 17, 31, 2, True),
        (1, 0, 16, None, True),
        (2, 0, 16, 1, True),
        (3, 0, 99, None, False),
        (4, None, None, None, False),
    ]
    assert rows[1].audit_trace == trace and rows[1].source is None
    assert [r.source.key if r.source else None for r in rows] == ["id:b", None, "id:a", None, None]
    assert rows[3].problem == "end 99 is beyond the answer (49 characters)"
    assert rows[4].data is None  # a JSON null reference is kept as JSON null
    assert [s.number for s in cited.sources] == [1, 2]
    source = Source.objects.get(key="id:a")
    assert (source.type, source.name, source.label, source.url) == (
        "BIGDATA",
        "Reuters",
        "Reuters - 2026-04-16",
        "https://news.example/a",
    )
    assert str(source.published_on) == "2026-04-16"
    assert not Source.objects.filter(key="id:never-shown").exists()


def test_one_source_cited_by_two_turns_is_one_row(make_turn, django_assert_max_num_queries):
    first, second = make_turn(answer=ANSWER), make_turn("And costs?", answer=ANSWER)
    store(first, [ref(0, 16, bigdata("shared")), ref(17, 31, bigdata("only-first"))])
    with django_assert_max_num_queries(8):  # not one query per reference or source
        store(second, [ref(17, 31, bigdata("shared", src_name="Renamed"))] * 20)

    source = Source.objects.get(key="id:shared")
    assert source.name == "Reuters"  # as first seen
    assert Source.objects.count() == 2
    # Reference.Meta.ordering puts `position` into SELECT DISTINCT: clear it, or each
    # reference comes back as its own row.
    cited_by = source.references.order_by().values("turn").distinct()
    assert sorted(row["turn"] for row in cited_by) == [first.pk, second.pk]


def test_storing_again_replaces_what_was_stored(make_turn):
    turn = make_turn(answer=ANSWER)
    store(turn, [ref(0, 16, bigdata("a"))] * 3, TRACES)
    store(turn, [ref(0, 16, bigdata("a"))], TRACES)
    assert (Reference.objects.filter(turn=turn).count(), AuditTrace.objects.count()) == (1, 1)


def test_invalid_references_are_logged_as_one_warning(make_turn, caplog):
    turn = make_turn(answer=ANSWER)
    with caplog.at_level(logging.WARNING, logger="citations.services"):
        store(turn, [ref(0, 99, None), "junk", ref(0, 16, bigdata("a"))])
    [record] = caplog.records
    assert record.getMessage() == (
        f"Turn {turn.pk}: 2 invalid reference(s) kept but not shown: "
        "#0: end 99 is beyond the answer (49 characters); #1: not an object"
    )


def test_odd_values_fit_their_columns(make_turn):
    turn = make_turn(answer=ANSWER)
    store(turn, [ref(0, 2**40, bigdata("a")), ref(0, 16, bigdata("b" * 700, src_name="N" * 500))])
    huge, long_key = Reference.objects.filter(turn=turn).order_by("position")
    assert (huge.start, huge.end, huge.data["end"]) == (0, None, 2**40)
    assert len(long_key.source.key) <= 600 and len(long_key.source.name) <= 300


def test_the_stored_answer_is_rebuilt_by_the_same_resolver(make_turn, stream_fixtures_dir):
    from chats.agent.sse import parse_sse_text
    from chats.agent.transcript import Transcript

    capture = stream_fixtures_dir / "tool_level.sse"
    transcript = Transcript.from_events(
        parse_sse_text(capture.read_text(encoding="utf-8"), bigdata_adapter.BigdataAdapter())[0]
    )
    turn = make_turn(answer=transcript.answer)
    with transaction.atomic():
        citations_store_for_turn(
            turn_id=turn.pk,
            answer=turn.answer_text,
            citations=transcript.citations,
            tool_calls=transcript.tool_calls,
        )

    rebuilt = cited_answer_for_turn(turn)
    # The figure checks are stored when the turn completes and read back, not recomputed.
    assert rebuilt == with_checks(cited_from_capture(capture))
    assert all(c.check is not None for c in rebuilt.claims)
    assert render_markdown(rebuilt) == capture.with_suffix(".md").read_text(encoding="utf-8")


def test_the_active_branch_runs_from_the_root_to_the_active_turn(chat, make_turn):
    root = make_turn("Q1")
    left = make_turn("Q2 left", parent=root)
    right = make_turn("Q2 right", parent=root)
    newest = make_turn("Q3 under left", parent=left)

    chat.active_turn = right
    assert [b.turn for b in chat_branch(chat=chat)] == [root, right]
    chat.active_turn = None
    assert [b.turn for b in chat_branch(chat=chat)] == [
        root,
        left,
        newest,
    ]  # the newest turn's branch


def test_an_empty_chat_has_an_empty_branch(chat):
    assert [b.turn for b in chat_branch(chat=chat)] == []
    assert export_turns_markdown([]) == ""


def test_the_export_gives_each_answer_its_own_footnote_labels(make_turn):
    first = make_turn("How did\nNVIDIA do?", answer=ANSWER)
    second = make_turn("And Microsoft?", answer="Azure grew 33%.")
    unanswered = make_turn("Still running?")
    store(first, [ref(0, 16, bigdata("a")), ref(17, 31, bigdata("b"))])
    store(second, [ref(0, 15, bigdata("a"))])

    markdown = export_turns_markdown([first, second, unanswered])
    p1, p2 = f"t{first.pk}-", f"t{second.pk}-"
    assert markdown == (
        "## How did NVIDIA do?\n\n"
        f"Revenue rose 4%.[^{p1}1] Costs fell 2%.[^{p1}2] Margins improved.\n\n"
        f"[^{p1}1]: [Reuters - 2026-04-16](https://news.example/a)\n"
        f"[^{p1}2]: [Reuters - 2026-04-16](https://news.example/b)\n"
        "\n> Figure check: 2 cited claims: 2 not read.\n"
        "> - not read: “Revenue rose 4%.” (its source sent no passage)\n"
        "> - not read: “Costs fell 2%.” (its source sent no passage)\n"
        "\n"
        "## And Microsoft?\n\n"
        f"Azure grew 33%.[^{p2}1]\n\n"
        f"[^{p2}1]: [Reuters - 2026-04-16](https://news.example/a)\n"
        "\n> Figure check: 1 cited claim: 1 not read.\n"
        "> - not read: “Azure grew 33%.” (its source sent no passage)\n"
        "\n"
        "## Still running?\n\n_No answer._\n"
    )


def test_the_export_keeps_the_figure_check_and_gives_each_claims_state(make_turn):
    answer = "Margin rose to 38% in Q3. Sales rose 5%. Demand was strong."
    turn = make_turn("Margins?", answer=answer)
    passage = [{"cnum": 1, "text": "Gross margin reached 35% in the third quarter; sales rose 5%."}]
    source = bigdata("a", chunks=passage)
    store(turn, [ref(0, 25, source), ref(26, 40, source), ref(41, 59, source)])
    assert export_turns_markdown([turn]).endswith(
        "> Figure check: 3 cited claims: 1 figure found, 1 not found,"
        " 1 with no figure to check.\n"
        "> - figure not found: “Margin rose to 38% in Q3.” (38% not found in its source)\n"
        "> - supported: “Sales rose 5%.” (5% found in its source)\n"
        "> - no figure to check: “Demand was strong.”\n"
    )


def test_the_export_reads_all_turns_in_a_fixed_number_of_queries(
    make_turn, django_assert_num_queries
):
    turns = [make_turn(f"Q{i}", answer=ANSWER) for i in range(5)]
    for turn in turns:
        store(turn, [ref(0, 16, bigdata("a"))])
    with django_assert_num_queries(2):
        export_turns_markdown(turns)


def test_an_unplaced_citation_is_stored_and_read_back_as_unplaced(make_turn):
    from citations.references import Citation, SourceDocument

    turn = make_turn(answer=ANSWER)
    web = SourceDocument(key="url:https://w.example/", type="WEB", name="w.example",
                         url="https://w.example/")  # fmt: skip
    with transaction.atomic():
        stored = citations_store_for_turn(
            turn_id=turn.pk,
            answer=turn.answer_text,
            citations=[
                bigdata_adapter.citation(ref(0, 16, bigdata("a"))),
                Citation(start=None, end=None, source=web, unplaced=True),
                Citation(start=None, end=None, source=None, unplaced=True),
            ],
        )
    row = Reference.objects.get(turn=turn, position=1)
    assert (row.start, row.end, row.footnote, row.is_valid) == (None, None, 2, True)
    assert Reference.objects.get(turn=turn, position=2).is_valid is False
    again = cited_answer_for_turn(turn)
    assert [(s.number, s.placed) for s in again.sources] == [(1, True), (2, False)]
    assert render_markdown(again) == render_markdown(stored)
    assert render_markdown(again).endswith(
        "[^2]: [w.example](https://w.example/) (not placed in the text)\n"
    )
