"""Properties of the Markdown and HTML renderings over random text and random spans."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chats.agent.providers import bigdata as bigdata_adapter
from citations.markers import placements_of
from citations.render import markdown_insertions, render_markdown
from citations.render_html import CLEANER, parsed_plain_text, plain_text, render_html
from citations.resolve import CitedAnswer, resolve_citations
from tests.citations.conftest import ParsedHtml

SOURCES = [
    {"type": "BIGDATA", "id": "a", "hd": "A", "src_name": "AP", "ts": "2026-01-02", "url": "https://a.example"},
    {"type": "BIGDATA", "id": "b", "hd": "B", "src_name": "BBC"},
    {"type": "EXTERNAL", "hd": "C", "action": {"name": "CNN", "url": "https://c.example/1"}},
    {"type": "EXTERNAL", "hd": "C again", "action": {"name": "CNN", "url": "https://c.example/1"}},
    {"type": "BIGDATA", "hd": "Only a headline"},
]  # fmt: skip

# Any code point but lone surrogates, weighted towards what Markdown and the markers care about.
texts = st.text(
    st.one_of(
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from([*"[^]\\`*_()<>!:\n .", "😀", "𝄞", "数", "\u200d", "\r"]),
    ),
    max_size=80,
)


@st.composite
def cited_answers(draw) -> CitedAnswer:
    """A random answer with mostly valid references, often several ending at one offset."""
    answer = draw(texts)
    size = len(answer)
    ends = draw(st.lists(st.integers(1, size), min_size=1, max_size=3)) if size else [1]
    valid_span = st.sampled_from(ends).flatmap(
        lambda end: st.tuples(st.integers(0, max(0, end - 1)), st.just(end))
    )
    any_span = st.tuples(
        st.one_of(st.integers(-2, size + 2), st.sampled_from([None, True, "3", 1.5])),
        st.one_of(st.integers(-2, size + 2), st.sampled_from([None, False, 2.0])),
    )
    reference = st.builds(
        lambda span, tool, source: {
            "start": span[0],
            "end": span[1],
            "tool_name": tool,
            "audit_id": "a-1",
            "source": source,
        },
        st.one_of(valid_span, valid_span, valid_span, any_span),
        st.sampled_from(["search", "earnings_calendar"]),
        st.one_of(st.sampled_from(SOURCES), st.sampled_from(SOURCES), st.none(), st.just("x")),
    )
    references = draw(st.lists(st.one_of(reference, st.sampled_from([None, "x", 3])), max_size=12))
    return resolve_citations(
        answer=answer, citations=[bigdata_adapter.citation(r) for r in references]
    )


def body_of(cited: CitedAnswer, prefix: str) -> str:
    markdown = render_markdown(cited, label_prefix=prefix)
    if not cited.sources:
        return markdown
    footnotes = markdown.split("\n\n")[-1]
    labels = re.findall(rf"^\[\^{prefix}(\d+)\]: ", footnotes, re.MULTILINE)
    assert labels == [str(s.number) for s in cited.sources]  # one line per source
    return markdown[: markdown.rindex("\n\n" + f"[^{prefix}1]: ")]


@given(cited_answers(), st.sampled_from(["", "t9-"]))
def test_removing_the_markers_by_position_gives_back_the_exact_answer(cited, prefix):
    body = body_of(cited, prefix)
    for offset, marker in markdown_insertions(cited, label_prefix=prefix):
        # Earlier markers are already gone, so the answer's own offsets apply.
        assert body[offset : offset + len(marker)] == marker
        body = body[:offset] + body[offset + len(marker) :]
    assert body == cited.answer


@given(cited_answers())
def test_every_valid_cited_span_is_followed_by_its_marker(cited):
    # The test above shows the output is the answer with exactly these insertions.
    numbers_at = {offset: marker for offset, marker in markdown_insertions(cited)}
    shown = [r for r in cited.references if r.footnote is not None]
    placements = placements_of(cited.answer, [(r.start, r.end) for r in shown])
    for reference, (offset, _indent) in zip(shown, placements, strict=True):
        # At the span's end, or where the one marker rule moves it (citations/markers.py).
        assert f"[^{reference.footnote}]" in numbers_at[offset]
    for marker in numbers_at.values():
        numbers = [int(n) for n in re.findall(r"\[\^(\d+)\]", marker)]
        assert numbers == sorted(set(numbers))  # once each, ascending


@given(cited_answers())
def test_numbers_run_from_one_with_one_footnote_per_key_in_order_of_first_use(cited):
    assert [s.number for s in cited.sources] == list(range(1, len(cited.sources) + 1))
    assert len({s.key for s in cited.sources}) == len(cited.sources)
    first_use = []
    for _, marker in markdown_insertions(cited):
        for number in map(int, re.findall(r"\[\^(\d+)\]", marker)):
            if number not in first_use:
                first_use.append(number)
    assert first_use == [s.number for s in cited.sources]
    shown = {r.source_key for r in cited.references if r.footnote is not None}
    assert shown == {s.key for s in cited.sources}


@settings(deadline=None)
@given(cited_answers())
def test_the_html_is_a_sanitiser_fixed_point_whose_links_all_resolve(cited):
    html = render_html(cited, doc_id="p")
    assert CLEANER.clean(html) == html
    page = ParsedHtml(html)
    assert len(page.find("li", class_="footnote-item")) == len(cited.sources)
    fragments = [h[1:] for h in page.hrefs if h.startswith("#")]
    assert set(fragments) <= set(page.ids)
    assert len(page.ids) == len(set(page.ids))


# Prose, after a line start and with pieces that make Markdown syntax.
claim_texts = st.lists(
    st.one_of(
        st.sampled_from(["a", "b1", " ", "\t", "1.", "2)", "-", "+", "#", ">", "=", "|", "!", ":"]),
        st.sampled_from(["*a*", "_a_", "`a`", "[a](#b)", "[a](https://b.c)", "<http://a.b>"]),
        st.sampled_from(["&amp;", "&#35;", "\\*", "\\!", "~~~", "===", "---"]),
        st.sampled_from(["\n", "\r", "\x00", "\x0b", "\u00a0", "\u2028"]),
        st.characters(exclude_categories=("Cs",)),
    ),
    max_size=8,
).map("".join)
line_starts = st.sampled_from(["", " ", "   ", "    ", "- ", "+ ", "1. ", "12) ", "# ", "> ", "="])


@settings(max_examples=1000)
@given(line_starts, claim_texts)
def test_a_claims_plain_text_without_a_parse_is_what_the_parse_gives(start, markdown):
    assert plain_text(start + markdown) == parsed_plain_text(start + markdown)


# One of each thing that makes a claim's shown words differ from its text.
SYNTAX = [
    "a \\! b", "`a`", "*a*", "_a_", "[a](#b)", "<http://a.b>", "&amp;", "a\x00b", "~~~",
    "a\n===", "a\r---", "# a", "> a", "- a", "+ a", "1. a", "2) a", "   # a",
]  # fmt: skip


@pytest.mark.parametrize("markdown", SYNTAX)
def test_a_claim_with_markdown_syntax_is_parsed_for_its_plain_text(markdown):
    assert parsed_plain_text(markdown) != " ".join(markdown.split())  # the parse matters
    assert plain_text(markdown) == parsed_plain_text(markdown)
