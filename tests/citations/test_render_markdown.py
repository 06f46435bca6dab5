"""The Markdown rendering: markers after spans, one footnote line per source."""

from citations.render import markdown_insertions, render_markdown
from tests.citations.conftest import bigdata, cite, ref

ANSWER = "Revenue rose 4%. Costs fell 2%."


def test_nothing_cited_gives_the_answer_unchanged_without_a_footnote_block():
    cited = cite(ANSWER, ref(0, 16, None, tool_name="earnings_calendar"), ref(0, 99, bigdata("x")))
    assert render_markdown(cited) == ANSWER


def test_sources_ending_at_one_offset_give_their_numbers_once_each_ascending():
    cited = cite(
        ANSWER,
        ref(17, 31, bigdata("b")),
        ref(0, 16, bigdata("a")),
        ref(0, 31, bigdata("a")),
        ref(20, 31, bigdata("c")),
    )
    body, footnotes = render_markdown(cited).split("\n\n")
    assert body == "Revenue rose 4%.[^1] Costs fell 2%.[^1][^2][^3]"
    assert footnotes.splitlines()[0] == "[^1]: [Reuters - 2026-04-16](https://news.example/a)"


def test_a_label_prefix_keeps_footnotes_of_several_answers_apart():
    cited = cite(ANSWER, ref(0, 16, bigdata("a")))
    assert render_markdown(cited, label_prefix="t7-") == (
        "Revenue rose 4%.[^t7-1] Costs fell 2%.\n\n"
        "[^t7-1]: [Reuters - 2026-04-16](https://news.example/a)\n"
    )
    assert markdown_insertions(cited, label_prefix="t7-") == [(16, "[^t7-1]")]


def test_a_source_without_an_http_url_is_a_plain_label_and_link_syntax_is_escaped():
    cited = cite(
        ANSWER,
        ref(0, 16, bigdata("a", url="javascript:alert(1)", src_name="Dow [Jones] *Wire*")),
    )
    assert render_markdown(cited).endswith("\n\n[^1]: Dow \\[Jones\\] \\*Wire\\* - 2026-04-16\n")
