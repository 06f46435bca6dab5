"""Render a resolved answer as safe HTML for the chat page and the admin.

markdown-it-py (CommonMark + tables, raw HTML off) with mdit-py-plugins' footnotes, cleaned by
nh3. Footnote definitions are not written into the Markdown: the plugin's state is seeded
through `env`, so an unclosed code fence in a truncated answer cannot swallow them, and the
plugin's own syntax rules are off, so the agent's `[^1]`, `[^1]: ...` or `^[...]` stay text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date
from html import escape
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from citations.evidence import checks_summary, shared_words
from citations.html_markers import anchor, link_markers, marker_env, settle_markers
from citations.markers import BLOCK_PREFIX
from citations.pages import NO_SENTENCE_LINE, fetched_label, page_problem_line
from citations.references import PageRead, Passage
from citations.render import UNPLACED_NOTE, insert_at
from citations.resolve import CitedAnswer, CitedSource, ToolAttribution
from citations.sources import url_host

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
_ALLOWED_LINK = re.compile(r"#|(?:https?|mailto):", re.IGNORECASE)


def render_html(cited: CitedAnswer, *, doc_id: str) -> str:
    """Return the cited answer as sanitised HTML; `doc_id` keeps its ids unique on a page."""
    doc_id = _ID_UNSAFE.sub("-", doc_id) or "answer"
    env: dict[str, Any] = {"docId": doc_id}
    body = cited.answer
    if cited.sources:
        insertions, marker_entries = marker_env(cited)
        body = insert_at(cited.answer, insertions)
        env.update(marker_entries)
        env["citation_entries"] = [_source_entry(s) for s in cited.sources]
        # The footnote plugin's list, as its syntax rules would have left it.
        notes = {s.number - 1: {"label": str(s.number), "count": 0} for s in cited.sources}
        env["footnotes"] = {"refs": {}, "list": notes}
    tokens = _MARKDOWN.parse(body, env)

    split = next((i for i, t in enumerate(tokens) if t.type == "footnote_block_open"), len(tokens))
    render = _MARKDOWN.renderer.render
    answer_html = CLEANER.clean(render(tokens[:split], _MARKDOWN.options, env))
    if cited.sources:
        # After sanitising: the links are fixed markup; this also counts the uses of each
        # footnote, which its back-link in the Sources list needs.
        answer_html = link_markers(answer_html, env)
    tail = (
        _checks_summary(cited)
        + _tool_badges(cited.tool_attributions)
        + render(tokens[split:], _MARKDOWN.options, env)
        + _also_consulted(cited)
        + _evidence(cited, doc_id)
    )
    return answer_html + CLEANER.clean(tail)


def _checks_summary(cited: CitedAnswer) -> str:
    summary = checks_summary(cited)
    if not summary:
        return ""
    if summary.endswith("…"):  # "Checking 3 sources…": the page asks again if it misses the end
        return f'<p class="claim-summary claim-summary-pending">{escape(summary)}</p>\n'
    return f'<p class="claim-summary">{escape(summary)}.</p>\n'


def _also_consulted(cited: CitedAnswer) -> str:
    """Return what the agent's tools retrieved but the answer never cited, under a fold."""
    cited_keys = {s.key for s in cited.sources}
    unused = {}
    for call in cited.tool_calls:
        for document in call.results:
            if document.key not in cited_keys:
                unused.setdefault(document.key, document)
    if not unused:
        return ""
    items = "".join(
        f"<li>{_link(d.url, d.label)}"
        + (f" · {escape(d.headline)}" if d.headline and d.headline != d.label else "")
        + "</li>"
        for d in unused.values()
    )
    return (
        f'<details class="also-consulted"><summary>Also consulted ({len(unused)})</summary>'
        f"<ul>{items}</ul></details>\n"
    )


def _evidence(cited: CitedAnswer, doc_id: str) -> str:
    """Return the evidence cards, hidden: the page shows one when a marker is hovered or
    focused (`evidence.js`). Each claim's card lists, per source, the passages it contributed
    with the words they share with the claim marked."""
    if not cited.claims:
        return ""
    sources = {s.number: s for s in cited.sources}
    cards = []
    for claim in cited.claims:
        text = plain_text(cited.answer[claim.start : claim.end])
        parts = [f'<p class="evidence-claim-text">{escape(text)}</p>']
        reading = [n for n in claim.footnotes if _read_of(cited, sources[n]).pending]
        if reading:
            where = "its source" if len(claim.footnotes) == 1 else "its sources"
            parts.append(f'<p class="evidence-check evidence-check-pending">checking {where}…</p>')
        elif claim.check is not None:
            state = _STATE_CLASSES[claim.check.status]
            line = escape(claim.check.line)
            parts.append(f'<p class="evidence-check {state}">{line}</p>')
        for number, passages in claim.passages:
            source = sources[number]
            read = _read_of(cited, source)
            meta = " · ".join(
                escape(x)
                for x in (
                    source.name,
                    source.published_on.isoformat() if source.published_on else "",
                    source.type.title(),
                )
                if x
            )
            if passages:
                shown = _origin(passages[0]) + "".join(_passage(text, p) for p in passages)
            elif read.pending:
                shown = '<p class="evidence-none">Checking the page…</p>'
            elif read.problem:
                shown = f'<p class="evidence-none">{escape(page_problem_line(read.problem))}</p>'
            elif read.was_read:
                shown = _page_origin(read.final_url or read.url, read.fetched_on) + (
                    f'<p class="evidence-none">{escape(NO_SENTENCE_LINE)}</p>'
                )
            else:
                shown = '<p class="evidence-none">This source sent no passage to show.</p>'
            headline = (
                f'<p class="evidence-headline">{escape(source.headline)}</p>'
                if source.headline
                else ""
            )
            parts.append(
                f'<div class="evidence-source" data-source="{number}">'
                f'<p class="evidence-label">[{number}] {_link(source.url, source.label)}</p>'
                f'<p class="evidence-meta">{meta}</p>{headline}{shown}</div>'
            )
        cards.append(
            f'<div class="evidence-claim" data-claim="{claim.index}">{"".join(parts)}</div>'
        )
    return f'<div class="evidence" data-doc="{doc_id}" hidden>{"".join(cards)}</div>\n'


# Characters that make inline syntax (escapes, code, emphasis, links, autolinks, entities) or
# end a line; a claim without them and without leading block syntax (`BLOCK_PREFIX`, which
# also catches what only looks like it, such as "1.5"), on one line, shows its own words.
_INLINE_SYNTAX = frozenset("\\`*_[]<&~\n\r\x00")


def plain_text(markdown: str) -> str:
    """Return the words a reader sees in a piece of Markdown, on one line.

    A claim with no syntax at all (most are a sentence of prose) is its own words: parsing it
    cost ~15 µs a claim at every finish. `tests/citations/test_properties.py` checks the
    shortcut against the parse.
    """
    if _INLINE_SYNTAX.isdisjoint(markdown) and not BLOCK_PREFIX.match(markdown):
        return " ".join(markdown.split())
    return parsed_plain_text(markdown)


def parsed_plain_text(markdown: str) -> str:
    """The words of `markdown` as its parse gives them: what `plain_text` shortcuts."""
    words = []
    for token in _MARKDOWN.parse(markdown, {}):
        if token.type in {"fence", "code_block"}:
            words.append(token.content)
        for child in token.children or ():
            if child.type in {"text", "code_inline"}:
                words.append(child.content)
    return " ".join(" ".join(words).split())


_NOT_READ = PageRead(url="")


def _read_of(cited: CitedAnswer, source: CitedSource) -> PageRead:
    """What the site made of the source's page, if it read it (`citations.pages`)."""
    return cited.pages.get(source.key, _NOT_READ)


def _origin(passage: Passage) -> str:
    """Where the card's passage comes from: the agent, or the page the site fetched."""
    if passage.fetched_on is None:
        return '<p class="evidence-origin">The passage the agent cited</p>'
    return _page_origin(passage.page_url, passage.fetched_on)


def _page_origin(url: str, fetched_on: date | None) -> str:
    page = _link(url, url_host(url) or url)
    label = fetched_label(fetched_on) if fetched_on else "From the page"
    return f'<p class="evidence-origin">{escape(label)} · {page}</p>'


# Each state's class on the card's check line (`evidence.css` colours them).
_STATE_CLASSES: dict[str, str] = {
    "supported": "evidence-check-supported",
    "figure not found": "evidence-check-flagged",
    "no figure to check": "evidence-check-no-figure",
    "not read": "evidence-check-not-read",
}


def _passage(claim: str, passage: Passage) -> str:
    pieces, previous = [], 0
    for start, end in shared_words(claim, passage.text):
        pieces.append(escape(passage.text[previous:start]))
        pieces.append(f"<mark>{escape(passage.text[start:end])}</mark>")
        previous = end
    pieces.append(escape(passage.text[previous:]))
    relevance = (
        f'<span class="evidence-relevance">relevance {passage.relevance:.2f}</span>'
        if passage.relevance is not None
        else ""
    )
    return f'<blockquote class="evidence-passage">{"".join(pieces)}{relevance}</blockquote>'


def _link(url: str, label: str) -> str:
    if url:
        return f'<a href="{escape(url)}">{escape(label)}</a>'
    return escape(label)


def _source_entry(source: CitedSource) -> str:
    """Return one Sources entry: the label, linked when the URL is http(s), headline on hover."""
    title = f' title="{escape(source.headline)}"' if source.headline else ""
    if source.url:
        entry = f'<a href="{escape(source.url)}"{title}>{escape(source.label)}</a>'
    else:
        entry = f"<span{title}>{escape(source.label)}</span>"
    if not source.placed:
        entry += f' <span class="source-unplaced">({UNPLACED_NOTE})</span>'
    return entry


def _tool_badges(attributions: Sequence[ToolAttribution]) -> str:
    """Return one badge per tool call, between the answer and its Sources.

    A tool-level reference grounds a span in a tool's whole result rather than a document, so
    it gets no number and no Sources entry (docs/PROTOCOL.md, "GROUNDING"). Listing the tools once
    under the answer keeps the prose identical to the Markdown rendering; inline badges would
    interleave long trace titles with the text and could not sit inside code or links.
    """
    badges = dict.fromkeys(_badge(a) for a in attributions)
    if not badges:
        return ""
    return f'<p class="tool-attributions">Tools used: {" ".join(badges)}</p>\n'


def _badge(attribution: ToolAttribution) -> str:
    title = attribution.title
    text = f"{attribution.display_name} · {title}" if title else attribution.display_name
    hover = f' title="{escape(title)}"' if title else ""
    return f'<span class="tool-badge"{hover}>{escape(text)}</span>'


# --- the footnote plugin's Sources list, with our heading, entries and a single back-link ----


def _render_block_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return (
        '<section class="footnotes">\n<h2 class="footnotes-title">Sources</h2>\n'
        '<ol class="footnotes-list">\n'
    )


def _render_entry_open(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    number = tokens[idx].meta["id"] + 1
    entry = env["citation_entries"][number - 1]
    return f'<li id="fn{anchor(env["docId"], number)}" class="footnote-item">{entry}'


def _render_backref(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """Link back to the first marker, if one was rendered (not one arrow per use)."""
    number = tokens[idx].meta["id"] + 1
    if tokens[idx].meta["subId"] or not env["footnotes"]["list"][number - 1]["count"]:
        return ""
    ident = anchor(env["docId"], number)
    return f' <a href="#fnref{ident}" class="footnote-backref">\u21a9\ufe0e</a>'


def _markdown_it() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    md.use(footnote_plugin, inline=False)
    # Only the resolver makes footnotes: the plugin's syntax rules are off (see html_markers).
    md.block.ruler.disable("footnote_def")
    md.inline.ruler.disable("footnote_ref")
    md.core.ruler.push("citation_markers", settle_markers)  # after text_join: whole runs
    # An image would make the reader's browser fetch a URL the agent chose: show it as a link.
    md.disable("image")
    md.validateLink = lambda url: _ALLOWED_LINK.match(url) is not None  # type: ignore[method-assign]
    md.add_render_rule("footnote_block_open", _render_block_open)
    md.add_render_rule("footnote_open", _render_entry_open)
    md.add_render_rule("footnote_anchor", _render_backref)
    return md


_MARKDOWN = _markdown_it()
# The sanitiser of every answer's HTML; what it returns it leaves as it is (tests check that).
CLEANER = nh3.Cleaner(
    tags={
        "a", "blockquote", "br", "code", "details", "div", "em", "h1", "h2", "h3", "h4", "h5",
        "h6", "hr", "li", "mark", "ol", "p", "pre", "section", "span", "strong", "summary", "sup",
        "table", "tbody", "td", "th", "thead", "tr", "ul",
    },
    attributes={
        "a": {"href", "title", "id", "data-claim"},
        "div": {"data-claim", "data-source", "data-doc", "hidden"},
        "li": {"id"},
        "ol": {"start"},
        "span": {"title", "role"},
        "td": {"style"},
        "th": {"style"},
    },
    allowed_classes={
        "a": {"footnote-backref"},
        "blockquote": {"evidence-passage"},
        "details": {"also-consulted"},
        "div": {"evidence", "evidence-claim", "evidence-source"},
        "h2": {"footnotes-title"},
        "li": {"footnote-item"},
        "ol": {"footnotes-list"},
        "p": {
            "tool-attributions", "claim-summary", "claim-summary-pending", "evidence-claim-text",
            "evidence-check",
            "evidence-check-flagged", "evidence-check-supported", "evidence-check-no-figure",
            "evidence-check-not-read",
            "evidence-label", "evidence-meta", "evidence-headline", "evidence-none",
            "evidence-origin", "evidence-check-pending",
        },
        "section": {"footnotes"},
        "span": {"tool-badge", "claim-flag", "evidence-relevance", "source-unplaced"},
        "sup": {"footnote-ref"},
    },
    filter_style_properties={"text-align"},  # table column alignment
    url_schemes={"http", "https", "mailto"},
    url_relative=lambda url: url if url.startswith("#") else None,  # same-page links only
    link_rel="noopener noreferrer",
)  # fmt: skip
