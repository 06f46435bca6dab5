"""Comparing two versions of a cited answer: figures claim by claim, sources, words."""

from __future__ import annotations

from citations.compare import AnswerVersion, TextPiece, compare_answers, diff_words
from citations.references import Citation, SourceDocument
from citations.resolve import CitedAnswer, resolve_citations


def cited(claims: list[tuple[str, str]], tail: str = "") -> CitedAnswer:
    """An answer of these (sentence, source name) claims, each cited to its source."""
    answer, citations = "", []
    for sentence, name in claims:
        start = len(answer) + (1 if answer else 0)
        answer = f"{answer} {sentence}" if answer else sentence
        source = SourceDocument(key=f"id:{name}", type="BIGDATA", name=name)
        citations.append(Citation(start=start, end=len(answer), source=source))
    return resolve_citations(answer=answer + tail, citations=citations)


FIRST = cited(
    [
        ("Revenue rose 12% to $4.1 billion.", "Reuters"),
        ("Shipments reached a record in the quarter.", "Bloomberg"),
    ]
)
SECOND = cited(
    [
        ("Revenue rose 14% to $4.2 billion.", "Reuters"),
        ("Shipments reached a record in the quarter.", "Nikkei"),
    ]
)


def test_changed_figures_are_paired_within_their_claim():
    comparison = compare_answers(FIRST, SECOND)
    assert [c.label for c in comparison.figures_changed] == [
        "12% → 14%",
        "$4.1 billion → $4.2 billion",
    ]
    assert {c.claim for c in comparison.figures_changed} == {"Revenue rose 14% to $4.2 billion."}
    assert comparison.figures_added == comparison.figures_gone == ()


def test_sources_added_and_dropped_by_their_key_with_their_label():
    comparison = compare_answers(FIRST, SECOND)
    assert [(s.key, s.label) for s in comparison.sources_added] == [("id:Nikkei", "Nikkei")]
    assert [(s.key, s.label) for s in comparison.sources_dropped] == [("id:Bloomberg", "Bloomberg")]


def test_summary_line_and_the_figures_named():
    comparison = compare_answers(FIRST, SECOND)
    assert comparison.summary == "2 figures changed, 1 source added, 1 dropped"
    assert comparison.figures_named() == "12% → 14%, $4.1 billion → $4.2 billion"
    assert comparison.has_changes


def test_the_same_answer_has_no_changes():
    comparison = compare_answers(FIRST, FIRST)
    assert comparison.summary == "No figures or sources changed"
    assert not comparison.has_changes
    assert not comparison.text_changed


def test_claims_are_aligned_by_their_text_not_their_place():
    moved = cited(
        [
            ("Margins were 38% in the quarter.", "Reuters"),
            ("Revenue rose 12% to $4.1 billion.", "Reuters"),
        ]
    )
    again = cited(
        [
            ("Revenue rose 12% to $4.1 billion.", "Reuters"),
            ("Analysts expect more next year.", "Reuters"),
            ("Margins were 39% in the quarter.", "Reuters"),
        ]
    )
    comparison = compare_answers(moved, again)
    assert [c.label for c in comparison.figures_changed] == ["38% → 39%"]


def test_a_figure_added_or_gone_within_a_claim_and_with_a_whole_claim():
    before = cited([("Revenue rose 12% to $4.1 billion.", "Reuters")])
    after = cited(
        [
            ("Revenue rose 12%.", "Reuters"),
            ("The dividend is $0.50 a share.", "Reuters"),
        ]
    )
    comparison = compare_answers(before, after)
    assert [c.before for c in comparison.figures_gone] == ["$4.1 billion"]
    assert [c.after for c in comparison.figures_added] == ["$0.50"]
    assert comparison.summary == "1 figure added, 1 figure gone"


def test_an_answer_without_citations_is_compared_sentence_by_sentence():
    before = resolve_citations(
        answer="Sales grew 5% last year. The outlook is stable.", citations=[]
    )
    after = resolve_citations(
        answer="Sales grew 7% last year. The outlook is stable.", citations=[]
    )
    assert [c.label for c in compare_answers(before, after).figures_changed] == ["5% → 7%"]


def test_words_added_and_removed_are_marked_on_words_not_characters():
    pieces = diff_words("Revenue rose 12% to $4.1 billion.", "Revenue rose 14% to $4.2 billion.")
    assert pieces == (
        TextPiece("same", "Revenue rose "),
        TextPiece("removed", "12% "),
        TextPiece("added", "14% "),
        TextPiece("same", "to "),
        TextPiece("removed", "$4.1 "),
        TextPiece("added", "$4.2 "),
        TextPiece("same", "billion."),
    )


def test_the_word_diff_keeps_both_texts_whole():
    before = "One.\n\nTwo three four. Five six.\nSeven"
    after = "One.\n\nTwo 3 four. Six five.\nSeven eight"
    pieces = diff_words(before, after)
    assert "".join(p.text for p in pieces if p.kind != "removed") == after
    assert "".join(p.text for p in pieces if p.kind != "added") == before


def test_a_version_read_from_stored_spans_has_the_resolvers_claims_and_sources():
    reuters = SourceDocument(key="id:Reuters", type="BIGDATA", name="Reuters")
    bloomberg = SourceDocument(key="id:Bloomberg", type="BIGDATA", name="Bloomberg")
    answer = FIRST.answer
    end_one = len("Revenue rose 12% to $4.1 billion.")
    # Two sources for the first claim (one span starting later), stored in any order.
    spans = [(end_one + 1, len(answer), bloomberg), (13, end_one, reuters), (0, end_one, reuters)]
    version = AnswerVersion.from_spans(answer, spans)
    assert version == AnswerVersion.of(FIRST)
    assert compare_answers(version, SECOND).summary == compare_answers(FIRST, SECOND).summary
