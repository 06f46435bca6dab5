"""Passages from cited pages (citations/pages.py): the best sentences of the page for each
claim, the figure check run on them, and what an unreadable or pending page shows."""

from __future__ import annotations

from datetime import date

from citations.claims import check_claim
from citations.evidence import checks_summary, with_checks
from citations.pages import (
    MAX_SENTENCE,
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
    assert checks_summary(checked) == "2 cited claims: 1 figure found, 1 not found"
    assert checked.pages[WEB.key].text == ""  # the page's text is not kept with the answer

    html = render_html(checked, doc_id="t1")
    assert "From the page, fetched 2026-11-27" in html
    assert f'<a href="{FINAL}" rel="noopener noreferrer">news.example</a>' in html
    assert "38% not found in its source" in html


def test_a_claim_is_never_checked_against_the_answers_own_text():
    """Without a page, a claim whose citation carries no passage is not checked at all."""
    cited = cited_without_passages()
    assert [c.check.status for c in cited.claims] == ["not read", "not read"]
    assert [c.check.line for c in cited.claims] == ["not read: its source sent no passage"] * 2
    assert checks_summary(cited) == "2 cited claims: 2 not read"


def test_while_pages_are_read_the_summary_says_so():
    pending = with_pending_pages(cited_without_passages())
    assert checks_summary(pending) == "Checking 1 source…"
    html = render_html(pending, doc_id="t1")
    assert '<p class="claim-summary claim-summary-pending">Checking 1 source…</p>' in html
    assert "Checking the page…" in html


def test_an_unreadable_page_says_why_and_its_claims_are_not_checked():
    problem = PageRead(url=URL, fetched_on=date(2026, 11, 27), problem="HTTP 404")
    checked = with_pages(cited_without_passages(), {WEB.key: problem})
    assert [c.check.status for c in checked.claims] == ["not read", "not read"]
    assert checks_summary(checked) == "2 cited claims: 2 not read"
    html = render_html(checked, doc_id="t1")
    assert "The page could not be read (HTTP 404), so its claims are not checked." in html
    assert '<p class="evidence-check evidence-check-not-read">not read: HTTP 404</p>' in html
    assert "found" not in html


def test_a_claim_sharing_no_word_with_its_read_page_names_the_figure_not_found():
    """The page was read and never speaks of margins: 38% is not on it, which is what the
    check exists to catch, so it is flagged, not reported as having nothing to check."""
    page = read_page(
        PAGE_TEXT.replace("Gross margin widened to 31.5% from 29.8% a year earlier", "Costs held")
    )
    unrelated = "Zebras graze on 38% of the plain."
    cited = with_checks(
        resolve_citations(
            answer=CLAIM_ONE + " " + unrelated,
            citations=[
                Citation(start=0, end=len(CLAIM_ONE), source=WEB),
                Citation(
                    start=len(CLAIM_ONE) + 1, end=len(CLAIM_ONE) + 1 + len(unrelated), source=WEB
                ),
            ],
        )
    )
    checked = with_pages(cited, {WEB.key: page})

    one, two = checked.claims
    assert one.check.status == "supported"
    assert two.passages == ((1, ()),)
    assert (two.check.status, two.check.line) == ("figure not found", "38% not found in its source")
    assert checks_summary(checked) == "2 cited claims: 1 figure found, 1 not found"
    html = render_html(checked, doc_id="t1")
    assert "No sentence of the page shares a word with this claim." in html
    assert f'From the page, fetched 2026-11-27 · <a href="{FINAL}"' in html


def test_footnote_marks_abbreviations_and_decimals_do_not_break_or_join_sentences():
    text = (
        "The utility serves the city.[12] It maintains 4,300 miles of gas mains.[97][98] Next"
        " year it plans more.[a] Dr. J. Smith of Acme Inc. said U.S. sales rose 3.5% on Jan. 5."
        "\u00b9 Gross margin was 38%.[citation needed]"
    )
    assert page_sentences(text).sentences == (
        "The utility serves the city.",
        "It maintains 4,300 miles of gas mains.",
        "Next year it plans more.",
        "Dr. J. Smith of Acme Inc. said U.S. sales rose 3.5% on Jan. 5.",
        "Gross margin was 38%.",
    )
    page = page_sentences(text)
    assert best_passages("Maintains 4300 miles of gas mains.", page) == (
        "It maintains 4,300 miles of gas mains.",
    )


def test_a_long_run_is_split_at_its_clauses_and_no_figure_is_lost():
    cells = [f"region {n} sold {n * 7} units" for n in range(1, 120)]
    text = "Sales by region: " + ", ".join(cells) + "; total 49,980 units."
    page = page_sentences(text)
    assert all(len(s) <= MAX_SENTENCE for s in page.sentences)
    assert " ".join(page.sentences) == text  # every word kept, in order
    assert all(s.endswith((",", ";", ":", ".")) for s in page.sentences)
    (passage,) = best_passages("In total 49,980 units were sold.", page)
    assert passage.endswith("total 49,980 units.")
    assert check_claim("In total 49,980 units were sold.", [passage]).status == "supported"


def test_a_claims_figure_ranks_the_sentence_stating_its_value_however_written():
    page = page_sentences(
        "Subscribers reached 10,000 in March.\n"
        "Subscribers in 2017 were counted by the board.\n"
        "The park has 17 benches."
    )
    for written in ("10000", "10,000", "10k"):
        assert best_passages(f"Subscribers reached {written}.", page) == (
            "Subscribers reached 10,000 in March.",
        )
    # "17" is not in "2017": the sentence with the claim's words and a year gets no credit for it.
    assert best_passages("Subscribers counted 17 benches.", page) == ("The park has 17 benches.",)


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
