"""The HTML rendering: footnote links, the Sources list, tool badges, and nothing executable."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chats.agent.providers.bigdata import source_document as source_fields
from citations.html_markers import _markers
from citations.render import render_markdown
from citations.render_html import CLEANER, render_html
from tests.citations.conftest import ParsedHtml, bigdata, cite, cited_from_capture, ref

ANSWER = "Revenue rose 4%. Costs fell 2%. Margins improved."


def sups(page: ParsedHtml) -> list[str]:
    """The footnote hrefs of the markers, in order."""
    links = [e.attrs.get("href") or "" for e in page.elements if e.tag == "a"]
    return [href for href in links if href.startswith("#fn-")]


def test_markers_are_superscript_links_to_a_sources_list(stream_fixtures_dir):
    html = render_html(cited_from_capture(stream_fixtures_dir / "lifecycle.sse"), doc_id="t1")
    page = ParsedHtml(html)

    assert 'NVIDIA\'s gross margin was 72.4% in Q2 FY26.<sup class="footnote-ref">' in html
    assert sups(page) == ["#fn-t1-1", "#fn-t1-1", "#fn-t1-2"]
    assert [e.attrs.get("id") for e in page.elements if e.tag == "sup"] == [None] * 3
    assert page.find("h2", class_="footnotes-title") and "Sources" in page.text
    entries = page.find("li", class_="footnote-item")
    assert [e.attrs["id"] for e in entries] == ["fn-t1-1", "fn-t1-2"]
    links = page.find("a", href="https://www.sec.gov/example-10q")
    assert links[0].attrs["title"] == "NVIDIA 10-Q Filing"  # the headline on hover
    assert "SEC EDGAR - 2026-04-15" in page.text and "Reuters - 2026-04-16" in page.text
    backrefs = page.find("a", class_="footnote-backref")
    assert [a.attrs["href"] for a in backrefs] == ["#fnref-t1-1", "#fnref-t1-2"]
    assert {"fnref-t1-1", "fnref-t1-2"} <= set(page.ids)


def test_the_footnote_plugin_prefixes_its_ids_with_the_doc_id():
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin

    md = MarkdownIt("commonmark").use(footnote_plugin)
    html = md.render("A[^1]\n\n[^1]: B\n", {"docId": "t5"})
    assert 'href="#fn-t5-1" id="fnref-t5-1"' in html and 'id="fn-t5-1"' in html


def test_two_answers_on_one_page_have_no_id_in_common(stream_fixtures_dir):
    first = cited_from_capture(stream_fixtures_dir / "dedup.sse")
    second = cited_from_capture(stream_fixtures_dir / "lifecycle.sse")
    page = ParsedHtml(render_html(first, doc_id="turn-1") + render_html(second, doc_id="turn-2"))

    assert len(page.ids) == len(set(page.ids)) == 3 + 3 + 2 + 2  # entries and first uses
    assert {h[1:] for h in page.hrefs if h.startswith("#")} <= set(page.ids)


def test_a_source_without_an_http_url_is_listed_unlinked_with_its_headline_on_hover():
    cited = cite(ANSWER, ref(0, 16, bigdata("a", url="javascript:alert(1)")))
    page = ParsedHtml(render_html(cited, doc_id="x"))
    [label] = [e for e in page.elements if e.tag == "span" and e.attrs.get("title")]
    assert label.attrs["title"] == "Headline a"
    assert not [h for h in page.hrefs if not h.startswith("#")]


def test_tool_level_attributions_are_badges_between_the_answer_and_its_sources(
    stream_fixtures_dir,
):
    html = render_html(cited_from_capture(stream_fixtures_dir / "tool_level.sse"), doc_id="t")
    page = ParsedHtml(html)
    [badge] = page.find("span", class_="tool-badge")
    assert badge.attrs["title"] == "Earnings calendar"
    assert "earnings_calendar · Earnings calendar" in page.text
    assert html.index("tool-badge") < html.index("Sources")
    assert len(page.find("li", class_="footnote-item")) == 1  # not listed among the sources
    assert sups(page) == ["#fn-t-1"]


def test_a_tool_badge_without_a_trace_shows_the_tool_name():
    cited = cite(ANSWER, ref(0, 16, None, tool_name="company_tearsheet", audit_id="gone"))
    html = render_html(cited, doc_id="x")
    assert '<span class="tool-badge">company_tearsheet</span>' in html
    assert "Sources" not in html


def test_no_citations_renders_the_markdown_alone():
    assert render_html(cite("Plain *answer*."), doc_id="x") == "<p>Plain <em>answer</em>.</p>\n"


@pytest.mark.parametrize(
    ("answer", "end", "expected"),
    [
        ("Use `x = 1` here", 10, "<code>x = 1</code><sup"),  # inside a code span: after it
        ("See [the filing](https://s.example/q) now", 14, "the filing</a><sup"),  # link text
        ("See [the filing](https://s.example/q) now", 34, 'href="https://s.example/q"'),
        ("Path C:\\ then", 8, "C:<sup"),  # before a lone backslash, which would escape it
        ("Revenue rose.\n\nNext", 15, "rose.<sup"),  # trailing whitespace stays after it
        ("_adjusted_ margin", 10, "<em>adjusted</em><sup"),  # emphasis still closes
        ("Rose 4%(Q2)", 7, "4%<sup"),  # a "(" after the span makes no link
        ("| a |\n|---|\n| 1 |\n\nAfter", 17, "<td>1<sup"),  # the last cell, not a new one
    ],
)
def test_markers_land_where_markdown_can_show_them(answer, end, expected):
    html = render_html(cite(answer, ref(0, end, bigdata("a"))), doc_id="x")
    assert expected in html
    assert len(sups(ParsedHtml(html))) == 1
    assert not re.search(r"\.c[0-9a-f]{12}n", html)  # no placeholder left anywhere


@pytest.mark.parametrize(
    ("answer", "block"),
    [
        ("```\nprint(1)\n```\nAfter.", "<pre><code>print(1)\n</code></pre>"),
        ("Title\n===\nAfter.", "<h1>Title</h1>"),
        ("Above\n\n***\nAfter.", "<hr>"),
        ("- item\n\n  ```\n  x\n  ```\nAfter.", "</code></pre>\n<p><sup"),  # in the item
    ],
)
def test_a_marker_after_a_structural_line_does_not_change_the_structure(answer, block):
    end = answer.index("\nAfter.")
    html = render_html(cite(answer, ref(0, end, bigdata("a"))), doc_id="x")
    assert block in html
    assert "<p>After.</p>" in html
    assert len(sups(ParsedHtml(html))) == 1
    assert "```" not in html and "===" not in html


def test_a_marker_inside_a_code_block_goes_right_after_the_block_in_both_renderings():
    answer = "```\nprint(1)\n```\n"
    cited = cite(answer, ref(4, 12, bigdata("a")))
    html = render_html(cited, doc_id="x")
    page = ParsedHtml(html)
    assert "<pre><code>print(1)\n</code></pre>" in html
    assert sups(page) == ["#fn-x-1"] and len(page.find("li", class_="footnote-item")) == 1
    assert html.index("</pre>") < html.index('class="footnote-ref"')
    assert render_markdown(cited).startswith("```\nprint(1)\n```\n\n[^1]\n\n")


def test_a_marker_inside_an_indented_code_block_goes_after_it_at_the_outer_indent():
    answer = "Run:\n\n    make test\n    make run\n\nDone."
    cited = cite(answer, ref(10, 19, bigdata("a")))
    assert render_markdown(cited).startswith("Run:\n\n    make test\n    make run\n\n[^1]\n\n")
    assert sups(ParsedHtml(render_html(cited, doc_id="x"))) == ["#fn-x-1"]


HOSTILE_TEXT = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> "
    "[click](javascript:alert(3)) [rel](/admin/) <a href='javascript:alert(4)'>a</a> "
    '![pixel](https://tracker.example/p.gif) <https://ok.example/"onmouseover="alert(5)> '
    "Claim[^1] and ^[inline note].\n\n[^1]: [forged](https://evil.example)\n"
)
HOSTILE_SOURCE = bigdata(
    "evil",
    hd='"><script>alert(6)</script><img src=x onerror=alert(7)>',
    src_name="<img src=x onerror=alert(8)>",
    url='https://evil.example/"onmouseover="alert(9)',
)


@pytest.mark.parametrize(
    "source",
    [
        HOSTILE_SOURCE,
        {**HOSTILE_SOURCE, "url": "javascript:alert(10)"},
        {**HOSTILE_SOURCE, "url": " JaVaScRiPt:alert(11)"},
        {"type": "EXTERNAL", "hd": "x", "action": {"name": '"<b>', "url": "data:text/html,x"}},
    ],
)
def test_hostile_answers_and_sources_produce_no_executable_markup(source):
    traces = [{"audit_type": "MarkdownAuditV1", "tool_id": "t", "title": "<script>x</script>"}]
    cited = cite(
        HOSTILE_TEXT,
        ref(0, 25, source),
        ref(26, 40, None, tool_name='<img src=x onerror="y">', audit_id="t"),
        traces=traces,
    )
    html = render_html(cited, doc_id='x"><script>')
    page = ParsedHtml(html)

    allowed = {"a", "p", "sup", "section", "h2", "ol", "li", "span", "code", "em", "strong", "pre"}
    allowed |= {"div", "blockquote", "mark", "details", "summary", "ul"}  # evidence cards
    assert {e.tag for e in page.elements} <= allowed
    assert not [name for e in page.elements for name in e.attrs if name.startswith("on")]
    assert all(h.startswith(("#", "https://", "http://", "mailto:")) for h in page.hrefs)
    assert not [h for h in page.hrefs if "evil.example" in h and '"' in h]
    assert all(i.startswith(("fn-x-", "fnref-x-")) for i in page.ids)
    # The agent's own footnote syntax stays text: one source, one marker, no forged entry.
    assert len(page.find("li", class_="footnote-item")) == 1
    assert len(sups(page)) == 1
    assert "[^1]" in page.text and "^[inline note]" in page.text and "forged" in page.text
    assert "<script>alert(1)</script>" in page.text  # shown as text, not run
    assert source_fields(source).label in page.text
    assert CLEANER.clean(html) == html


NONCE = "c0123456789ab"
# Pieces of placeholders, the nonce, another nonce and their neighbours, in any order.
near_placeholders = st.lists(
    st.sampled_from(
        [
            *(".", NONCE, f".{NONCE}", f".{NONCE}n1c0.", ".c00000000000f"),
            *"ncf1x",
            "23",
            "n1c0.",
            "f2.",
        ]
    ),
    max_size=30,
).map("".join)


@given(near_placeholders)
def test_placeholders_are_found_as_a_regex_of_the_answers_nonce_finds_them(text):
    regex = re.compile(rf"\.{NONCE}(?:n(\d+)c(\d+)|f(\d+))\.")
    expected = [(m.start(), m.end(), m.groups()) for m in regex.finditer(text)]
    assert [(start, end, tail.groups()) for start, end, tail in _markers(text, NONCE)] == expected


def test_a_forged_placeholder_in_the_answer_stays_text():
    answer = "Claim. .c000000000000n1. and more"
    html = render_html(cite(answer, ref(0, 6, bigdata("a"))), doc_id="x")
    assert len(sups(ParsedHtml(html))) == 1
    assert ".c000000000000n1." in html
