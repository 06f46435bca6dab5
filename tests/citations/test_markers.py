"""The one marker rule: where footnote markers go, and that both renderings show every one."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.footnote import footnote_plugin

from citations.markers import Marker, group_markers, placements_of
from citations.render import render_markdown
from citations.render_html import render_html
from tests.citations.conftest import ParsedHtml, bigdata, cite, ref


def place_markers(answer: str, spans: list[tuple[int, int, int]]) -> tuple[Marker, ...]:
    """The markers for (start, end, footnote) spans, as `resolve` composes the rule's parts."""
    placements = placements_of(answer, [(start, end) for start, end, _ in spans])
    return group_markers(
        (offset, indent, number)
        for (offset, indent), (*_, number) in zip(placements, spans, strict=True)
    )


def test_a_marker_goes_right_after_its_claim():
    assert place_markers("Up 4%. Down 2%.", [(0, 6, 1)]) == (Marker(6, (1,)),)


def test_numbers_ending_at_one_offset_share_one_marker_ascending():
    markers = place_markers("Up 4%. Down 2%.", [(0, 6, 2), (3, 6, 1), (0, 6, 2)])
    assert markers == (Marker(6, (1, 2)),)


def test_trailing_whitespace_and_newlines_stay_after_the_marker():
    assert place_markers("Up 4%.\n\nNext", [(0, 8, 1)]) == (Marker(6, (1,)),)


def test_a_marker_at_the_end_of_a_table_row_stays_inside_its_last_cell():
    answer = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    (marker,) = place_markers(answer, [(20, 29, 1)])
    assert answer[: marker.offset].endswith("| 2")


def test_a_marker_never_follows_an_odd_run_of_backslashes():
    assert place_markers("a\\", [(0, 2, 1)]) == (Marker(1, (1,)),)
    assert place_markers("a\\\\", [(0, 3, 1)]) == (Marker(3, (1,)),)


def test_after_a_structural_line_a_marker_gets_a_paragraph_of_its_own():
    assert place_markers("Title\n---\n", [(0, 9, 1)]) == (Marker(9, (1,), ""),)
    assert Marker(9, (1,), "  ").insertion("[^1]") == "\n\n  [^1]\n"


def test_a_marker_inside_a_fenced_block_goes_after_its_closing_fence():
    answer = "Intro\n\n```python\nx = 1\n```\nAfter"
    (marker,) = place_markers(answer, [(16, 21, 1)])
    assert (answer[: marker.offset].endswith("x = 1\n```"), marker.own_line_indent) == (True, "")


def test_a_marker_in_a_fenced_block_of_a_list_item_keeps_the_item_indent():
    answer = "- item\n\n  ```\n  code\n  ```\n"
    (marker,) = place_markers(answer, [(15, 19, 1)])
    assert marker.own_line_indent == "  "
    assert answer[: marker.offset].endswith("  ```")


# --- both renderings show every marker ------------------------------------------------------

_MARKDOWN = MarkdownIt("commonmark").enable("table").use(footnote_plugin)

words = st.lists(
    st.sampled_from(["revenue", "rose", "4%", "数据", "😀", "e\u0301", "👩\u200d💻", "Q3", "x"]),
    min_size=1,
    max_size=5,
).map(" ".join)
blocks = st.one_of(
    words,  # a paragraph
    words.map(lambda w: f"# {w}"),
    words.map(lambda w: f"> {w}"),
    st.lists(words, min_size=1, max_size=3).map(lambda ws: "\n".join(f"- {w}" for w in ws)),
    st.lists(words, min_size=1, max_size=3).map(
        lambda ws: "\n".join(f"{i}. {w}" for i, w in enumerate(ws, 1))
    ),
    st.tuples(words, words).map(lambda c: f"| a | b |\n|---|---|\n| {c[0]} | {c[1]} |"),
    words.map(lambda w: f"```\n{w}\n```"),
    words.map(lambda w: f"    {w}\n    {w}"),
    words.map(lambda w: f"- {w}\n\n  ```\n  {w}\n  ```"),
    words.map(lambda w: f">     {w}"),  # indented code in a quote
    words.map(lambda w: f"1.     {w}"),  # indented code in a list item
    words.map(lambda w: f"```\r{w}\r```"),  # lone CR line breaks
)  # fmt: skip
SOURCES = [bigdata(name) for name in "abcd"]


@st.composite
def cited_documents(draw):
    answer = "\n\n".join(draw(st.lists(blocks, min_size=1, max_size=5)))
    claim_ends = [m.end() for m in re.finditer(r"\S(?=\s|$)", answer)]
    references = []
    for end in draw(st.lists(st.sampled_from(claim_ends), min_size=1, max_size=6)):
        start = draw(st.integers(0, end - 1))
        references.append(ref(start, end, draw(st.sampled_from(SOURCES))))
    return cite(answer, *references)


def _markdown_refs(markdown: str) -> list[int]:
    found = []
    stack = list(_MARKDOWN.parse(markdown))
    while stack:
        token = stack.pop()
        if token.type == "footnote_ref":
            found.append(int(token.meta["label"]))
        stack.extend(token.children or ())
    return sorted(found)


def _html_refs(html: str) -> list[int]:
    page = ParsedHtml(html)
    hrefs = [e.attrs.get("href") or "" for e in page.elements if e.tag == "a"]
    return sorted(int(h.rsplit("-", 1)[1]) for h in hrefs if h.startswith("#fn-"))


CODE_BLOCKS = {
    "tilde fence": ("Intro\n\n~~~\nx = 1\n~~~\nAfter", "x = 1\n~~~"),
    "indented by spaces": ("Intro\n\n    x = 1\n\nAfter", "x = 1"),
    "indented by a tab": ("Intro\n\n\tx = 1\n\nAfter", "x = 1"),
    "indented, first line": ("    x = 1\n\nAfter", "x = 1"),
    "tab, first line": ("\tx = 1\n\nAfter", "x = 1"),
    "spaces then a tab": ("Intro\n\n  \tx = 1\n\nAfter", "x = 1"),
    "in a quote": ("Intro\n\n>     x = 1\n\nAfter", "x = 1"),
    "in a list item": ("Intro\n\n1.     x = 1\n\nAfter", "x = 1"),
    "in a bullet in a quote": ("Intro\n\n> -     x = 1\n\nAfter", "x = 1"),
    "fence, lone CR line breaks": ("Intro\r\r```\rx = 1\r```\rAfter", "x = 1\r```"),
    "fence, CRLF line breaks": ("Intro\r\n\r\n```\r\nx = 1\r\n```\r\nAfter", "x = 1\r\n```"),
}


@pytest.mark.parametrize(("answer", "after"), CODE_BLOCKS.values(), ids=CODE_BLOCKS)
def test_a_marker_in_any_kind_of_code_block_goes_after_the_block_and_shows(answer, after):
    start = answer.index("x = 1")
    (marker,) = place_markers(answer, [(start, start + 3, 1)])  # ends inside the code
    assert answer[: marker.offset].endswith(after) and marker.own_line_indent is not None
    cited = cite(answer, ref(start, start + 3, SOURCES[0]))
    assert _markdown_refs(render_markdown(cited)) == [1]
    assert _html_refs(render_html(cited, doc_id="x")) == [1]


def test_a_marker_after_code_in_a_list_item_keeps_the_rest_of_the_item_in_it():
    # At a lesser indent the marker's line would end the item, and its indented text after the
    # code would become code too (found by the property test below)
    answer = "1.     revenue\n\n    rose\n    again"
    start = answer.index("rose")
    (code,) = place_markers(answer, [(0, 2, 1)])
    assert code.own_line_indent == "   "  # the item's content indent
    cited = cite(answer, ref(0, 2, SOURCES[0]), ref(start, start + 4, SOURCES[1]))
    assert _markdown_refs(render_markdown(cited)) == [1, 2]
    assert _html_refs(render_html(cited, doc_id="x")) == [1, 2]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(cited_documents())
def test_every_marker_in_the_markdown_has_a_marker_in_the_html(cited):
    # Footnote definitions of the Markdown must be numbered in order of first use for the
    # plugin's ids to be ours; the renderer writes them so.
    markdown = render_markdown(cited)
    html = render_html(cited, doc_id="x")
    expected = sorted(n for marker in cited.markers for n in marker.numbers)
    assert _markdown_refs(markdown) == expected, markdown
    assert _html_refs(html) == expected, html
