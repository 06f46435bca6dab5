"""Render a resolved answer as safe HTML for the chat page and the admin.

markdown-it-py (CommonMark + tables, raw HTML off) with mdit-py-plugins' footnotes, cleaned by
nh3. Footnote definitions are not written into the Markdown: the plugin's state is seeded
through `env`, so an unclosed code fence in a truncated answer cannot swallow them, and the
plugin's own syntax rules are off, so the agent's `[^1]`, `[^1]: ...` or `^[...]` stay text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin

from .html_markers import anchor, link_markers, marker_env, settle_markers
from .render import insert_at
from .resolve import CitedAnswer, CitedSource, ToolAttribution

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
    answer_html = _CLEANER.clean(render(tokens[:split], _MARKDOWN.options, env))
    if cited.sources:
        # After sanitising: the links are fixed markup; this also counts the uses of each
        # footnote, which its back-link in the Sources list needs.
        answer_html = link_markers(answer_html, env)
    tail = _tool_badges(cited.tool_attributions) + render(tokens[split:], _MARKDOWN.options, env)
    return answer_html + _CLEANER.clean(tail)


def _source_entry(source: CitedSource) -> str:
    """Return one Sources entry: the label, linked when the URL is http(s), headline on hover."""
    title = f' title="{escape(source.headline)}"' if source.headline else ""
    if source.url:
        return f'<a href="{escape(source.url)}"{title}>{escape(source.label)}</a>'
    return f"<span{title}>{escape(source.label)}</span>"


def _tool_badges(attributions: Sequence[ToolAttribution]) -> str:
    """Return one badge per tool call, between the answer and its Sources.

    A tool-level reference grounds a span in a tool's whole result rather than a document, so
    it gets no number and no Sources entry (seed 000). Listing the tools once under the answer
    keeps the prose identical to the Markdown rendering; inline badges would interleave long
    trace titles with the text and could not sit inside code or links.
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
_CLEANER = nh3.Cleaner(
    tags={
        "a", "blockquote", "br", "code", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li",
        "ol", "p", "pre", "section", "span", "strong", "sup", "table", "tbody", "td", "th",
        "thead", "tr", "ul",
    },
    attributes={
        "a": {"href", "title", "id"},
        "li": {"id"},
        "ol": {"start"},
        "span": {"title"},
        "td": {"style"},
        "th": {"style"},
    },
    allowed_classes={
        "a": {"footnote-backref"},
        "h2": {"footnotes-title"},
        "li": {"footnote-item"},
        "ol": {"footnotes-list"},
        "p": {"tool-attributions"},
        "section": {"footnotes"},
        "span": {"tool-badge"},
        "sup": {"footnote-ref"},
    },
    filter_style_properties={"text-align"},  # table column alignment
    url_schemes={"http", "https", "mailto"},
    url_relative=lambda url: url if url.startswith("#") else None,  # same-page links only
    link_rel="noopener noreferrer",
)  # fmt: skip
