"""Passages from cited pages (citations/pages.py): the best sentences of the page for each
claim, the figure check run on them, and what an unreadable or pending page shows."""

from __future__ import annotations

from datetime import date

from citations.evidence import checks_summary, with_checks
from citations.pages import (
    best_passages,
    page_sentences,
    pages_to_read,
    with_pages,
    with_pending_pages,
)
from citations.references import Citation, PageRead, Passage, SourceDocument
from citations.render_html import render_html
from citations.resolve import resolve_citations

CLAIM_ONE = "Revenue rose 12% to $4.1 billion."
CLAIM_TWO = " Gross margin widened to 38%."
ANSWER = CLAIM_ONE + CLAIM_TWO
URL = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/AbC"
FINAL = "https://news.example/2026/11/acme-results"
PAGE_TEXT = (
    "Acme's quarterly revenue rises on cloud demand\n"
    "By Jane Doe, November 3, 2026\n"
    "Acme Corp said on Tuesday that quarterly revenue rose 12% to $4.1 billion, helped by demand"
    " for its cloud services.\n"
    "Gross margin widened to 31.5% from 29.8% a year earlier, the company said. Operating"
    " expenses were flat.\n"
    "Shares rose in after-hours trading."
)
WEB = SourceDocument(key=f"url:{URL}", type="WEB", name="news.example", url=URL)


def cited_without_passages(source: SourceDocument = WEB):
    citations = [
        Citation(start=0, end=len(CLAIM_ONE), source=source),
        Citation(start=len(CLAIM_ONE) + 1, end=len(ANSWER), source=source),
    ]
    return with_checks(resolve_citations(answer=ANSWER, citations=citations))


def read_page(text: str = PAGE_TEXT) -> PageRead:
    return PageRead(url=URL, final_url=FINAL, fetched_on=date(2026, 11, 27), text=text)


def test_the_best_sentence_is_the_one_sharing_the_claims_words_and_figures():
    page = page_sentences(PAGE_TEXT)
    assert best_passages(CLAIM_ONE, page) == (
        "Acme Corp said on Tuesday that quarterly revenue rose 12% to $4.1 billion, helped by"
        " demand for its cloud services.",
    )
    assert best_passages(CLAIM_TWO, page) == (
        "Gross margin widened to 31.5% from 29.8% a year earlier, the company said.",
    )


def test_a_claim_joining_two_facts_gets_both_sentences_in_page_order():
    page = page_sentences(PAGE_TEXT)
    joined = "Revenue rose 12% and gross margin reached 31.5%."
    assert best_passages(joined, page) == (
        "Acme Corp said on Tuesday that quarterly revenue rose 12% to $4.1 billion, helped by"
        " demand for its cloud services.",
        "Gross margin widened to 31.5% from 29.8% a year earlier, the company said.",
    )


def test_a_claim_sharing_nothing_with_the_page_gets_no_passage():
    assert best_passages("Zebras graze.", page_sentences(PAGE_TEXT)) == ()


def test_the_figure_not_on_the_page_is_flagged_and_the_other_claim_is_supported():
    cited = cited_without_passages()
    assert pages_to_read(cited) == {WEB.key: URL}

    checked = with_pages(cited, {WEB.key: read_page()})

    one, two = checked.claims
    assert one.check.status == "supported"
    assert two.check.message == "38% not found in its source"
    (passage,) = two.passages[0][1]
    assert passage.text.startswith("Gross margin widened to 31.5%")
    assert passage.page_url == FINAL
    assert passage.fetched_on == date(2026, 11, 27)
    assert checks_summary(checked) == "2 cited claims: 1 checked, 1 figure not found in its source"
    assert checked.pages[WEB.key].text == ""  # the page's text is not kept with the answer

    html = render_html(checked, doc_id="t1")
    assert "From the page, fetched 2026-11-27" in html
    assert f'<a href="{FINAL}" rel="noopener noreferrer">news.example</a>' in html
    assert "38% not found in its source" in html


def test_a_claim_is_never_checked_against_the_answers_own_text():
    """Without a page, a claim whose citation carries no passage is not checked at all."""
    cited = cited_without_passages()
    assert [c.check.status for c in cited.claims] == ["no_passage", "no_passage"]
    assert checks_summary(cited) == "2 cited claims: 2 without a passage to check"


def test_while_pages_are_read_the_summary_says_so():
    pending = with_pending_pages(cited_without_passages())
    assert checks_summary(pending) == "Checking 1 source…"
    html = render_html(pending, doc_id="t1")
    assert '<p class="claim-summary claim-summary-pending">Checking 1 source…</p>' in html
    assert "Checking the page…" in html


def test_an_unreadable_page_says_why_and_its_claims_are_not_checked():
    problem = PageRead(url=URL, fetched_on=date(2026, 11, 27), problem="HTTP 404")
    checked = with_pages(cited_without_passages(), {WEB.key: problem})
    assert [c.check.status for c in checked.claims] == ["no_passage", "no_passage"]
    assert checks_summary(checked) == "2 cited claims: 2 without a passage to check"
    html = render_html(checked, doc_id="t1")
    assert "The page could not be read (HTTP 404), so its claims are not checked." in html
    assert "checked," not in html


def test_a_source_that_sent_passages_is_not_read_and_shows_it_came_from_the_agent():
    agent = SourceDocument(key="id:d1", type="BIGDATA", name="Reuters", url="https://r.example/1")
    citations = [
        Citation(
            start=0,
            end=len(CLAIM_ONE),
            source=agent,
            passages=(Passage("Quarterly revenue rose 12 percent to $4.1bn."),),
        )
    ]
    cited = with_checks(resolve_citations(answer=CLAIM_ONE, citations=citations))
    assert pages_to_read(cited) == {}
    assert with_pending_pages(cited) is cited
    assert "The passage the agent cited" in render_html(cited, doc_id="t1")


def test_a_page_passage_round_trips_through_its_stored_form():
    passage = Passage("Gross margin widened.", page_url=FINAL, fetched_on=date(2026, 11, 27))
    assert Passage.from_data(passage.to_data()) == passage
    assert Passage.from_data({"text": "x", "relevance": 0.5}).to_data() == {
        "text": "x",
        "relevance": 0.5,
    }
    read = PageRead(url=URL, final_url=FINAL, fetched_on=date(2026, 11, 27), problem="HTTP 404")
    assert PageRead.from_data(read.to_data()) == read
