"""Footnote markers for the HTML rendering: inert placeholders until the HTML is sanitised.

A placeholder `.<nonce>n<number>.` is plain text to markdown-it-py (its text rule swallows it
whole; its dots flank emphasis as the brackets of `[^1]` would) and to nh3. The nonce comes
from the answer's own hash, so the agent cannot write one. After parsing, `settle_markers`
leaves placeholders only in text outside links and code; after sanitising, `link_markers`
swaps each for a fixed superscript link. Measured with `bench/citations_render.py`, this costs
a fraction of the footnote plugin's inline rule (a rule call at every bracket, three tokens
and a sanitiser pass per marker).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from html import escape
from typing import Any

from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from citations.resolve import CitedAnswer

_LINK_DEPTH = {"link_open": 1, "link_close": -1}
# What follows `.<nonce>` in a placeholder: a footnote's number and its claim's, or a flag's claim.
_MARKER_TAIL = re.compile(r"n(\d+)c(\d+)\.|f(\d+)\.")


def marker_env(cited: CitedAnswer) -> tuple[list[tuple[int, str]], dict[str, Any]]:
    """Return the placeholder insertions (at the shared placements) and the parser env entries
    that find them.

    A placeholder names its footnote and its claim (the marker's index), `.<nonce>n1c0.`;
    a flagged claim's marker is followed by `.<nonce>f0.`, its figure-check flag.
    """
    digest = hashlib.sha256(cited.answer.encode("utf-8", "surrogatepass")).hexdigest()
    nonce = f"c{digest[:12]}"
    flagged = {c.index for c in cited.claims if c.is_flagged}
    insertions = []
    for index, marker in enumerate(cited.markers):
        text = "".join(f".{nonce}n{n}c{index}." for n in marker.numbers)
        if index in flagged:
            text += f".{nonce}f{index}."
        insertions.append((marker.offset, marker.insertion(text)))
    env = {
        "citation_nonce": nonce,
        "citation_flags": {c.index: c.check.message for c in cited.claims if c.is_flagged},
    }
    return insertions, env


def _markers(text: str, nonce: str) -> Iterator[tuple[int, int, re.Match[str]]]:
    """Each placeholder of this nonce in `text`, leftmost first and not overlapping: its start,
    its end, and the match of what follows `.<nonce>` (the numbers, as groups 1-3).

    What a regex of `.<nonce>` and the tail would find; every answer has a nonce of its own,
    and compiling that regex for each answer cost more (~80 µs) than all its markers' work."""
    head = "." + nonce
    start = text.find(head)
    while start != -1:
        tail = _MARKER_TAIL.match(text, start + len(head))
        if tail is None:
            start = text.find(head, start + 1)
        else:
            yield start, tail.end(), tail
            start = text.find(head, tail.end())


def _replace_markers(text: str, nonce: str, replace: Callable[[str, re.Match[str]], str]) -> str:
    """`text` with each placeholder of this nonce replaced by `replace(placeholder, tail)`."""
    pieces = []
    done = 0
    for start, end, tail in _markers(text, nonce):
        pieces += (text[done:start], replace(text[start:end], tail))
        done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _without_markers(text: str, nonce: str) -> tuple[str, str]:
    """`text` without this nonce's placeholders, and the placeholders taken out, in order."""
    taken: list[str] = []

    def take(placeholder: str, tail: re.Match[str]) -> str:
        taken.append(placeholder)
        return ""

    return _replace_markers(text, nonce, take), "".join(taken)


def anchor(doc_id: str, number: int) -> str:
    """Return the footnote plugin's anchor name under a docId, as in `fn-<doc>-<n>`."""
    return f"-{doc_id}-{number}"


def settle_markers(state: StateCore) -> None:
    """Core rule: leave markers only in text outside links and code.

    A marker that landed in inline code or a link (its text, URL or title) moves to just after
    it, since a link inside a link is invalid. The marker rule (`markers.placements_of`) keeps
    markers out of code blocks; one that still lands in code (an unclosed fence) is dropped.
    """
    nonce = state.env.get("citation_nonce")
    if nonce is None:
        return
    for token in state.tokens:
        if token.children:
            # Without a backtick, bracket or angle bracket there is no code span or link.
            source = token.content
            if nonce in source and ("`" in source or "[" in source or "<" in source):
                token.children = _settled(token.children, nonce)
        elif nonce in token.content or nonce in token.info:
            token.content = _without_markers(token.content, nonce)[0]
            token.info = _without_markers(token.info, nonce)[0]


def _settled(children: list[Token], nonce: str) -> list[Token]:
    settled: list[Token] = []
    held = ""  # markers taken out of a link or code span, placed right after it
    links = 0
    for token in children:
        links += _LINK_DEPTH.get(token.type, 0)
        if nonce in token.content and (links or token.type != "text"):
            token.content, taken = _without_markers(token.content, nonce)
            held += taken
        for name, value in token.attrs.items():
            if isinstance(value, str) and nonce in value:
                token.attrs[name], taken = _without_markers(value, nonce)
                held += taken
        settled.append(token)
        if held and not links:
            settled.append(Token("text", "", 0, content=held))
            held = ""
    return settled


def link_markers(html: str, env: dict[str, Any]) -> str:
    """Return sanitised HTML with each placeholder swapped for its superscript footnote link.

    The link is fixed markup (a sanitised docId, numbers), in nh3's own output form, so the
    result is what sanitising it again would give. Counts each footnote's uses in `env`.
    """
    notes, doc_id = env["footnotes"]["list"], env["docId"]

    def sup(placeholder: str, match: re.Match[str]) -> str:
        if match[3] is not None:
            message = escape(env["citation_flags"][int(match[3])])
            return f'<span class="claim-flag" role="note">{message}</span>'
        number, claim = int(match[1]), int(match[2])
        note = notes[number - 1]
        ident = anchor(doc_id, number)
        backref_target = "" if note["count"] else f' id="fnref{ident}"'  # first use only
        note["count"] += 1
        return (
            f'<sup class="footnote-ref"><a href="#fn{ident}"{backref_target} '
            f'data-claim="{claim}" rel="noopener noreferrer">[{number}]</a></sup>'
        )

    return _replace_markers(html, env["citation_nonce"], sup)
