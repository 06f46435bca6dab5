"""The evidence behind each claim: what the cited sources say, and whether it has its figures.

A claim is what one footnote marker closes: the text from the earliest start of the spans that
end at that marker to the marker. Its evidence is the passages each of its sources contributed
(Bigdata chunks, Anthropic's cited_text, sentences of a cited page the site fetched). The figure
check (`claims.check_claim`) runs when the turn completes, and again once the cited pages are
read (`citations.pages`); the result is stored with the references and read back, never
recomputed on display.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from citations.claims import ClaimCheck, check_claim, summarise
from citations.references import PageRead, Passage
from citations.resolve import CitedAnswer

_WORD = re.compile(r"\w+(?:[.,']\w+)*", re.UNICODE)
# Words too common to show as evidence of anything.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
    ]
)


def with_checks(cited: CitedAnswer) -> CitedAnswer:
    """Return the answer with every claim's figures checked against its passages.

    A source counts as read when it gave a passage, or when the site read its page
    (`cited.pages`) even if no sentence of it speaks of the claim; a claim none of whose sources
    was read is "not read", with the reasons of its sources.
    """
    sources = {s.number: s for s in cited.sources}
    claims = []
    for claim in cited.claims:
        texts = [p.text for _, passages in claim.passages for p in passages]
        dates = (sources[n].published_on for n in claim.footnotes if n in sources)
        published = [day.isoformat() for day in dates if day is not None]
        reasons = []
        for number, passages in claim.passages:
            read = cited.pages.get(sources[number].key) if number in sources else None
            reasons.append(_unread_reason(passages, read))
        check = check_claim(
            cited.answer[claim.start : claim.end],
            texts,
            sources=len(claim.footnotes),
            published=published,
            read=any(reason == "" for reason in reasons),
            unread="; ".join(dict.fromkeys(r for r in reasons if r)) or _NO_PASSAGE,
        )
        claims.append(replace(claim, check=check))
    return replace(cited, claims=tuple(claims))


_NO_PASSAGE = "its source sent no passage"


def _unread_reason(passages: Sequence[Passage], read: PageRead | None) -> str:
    """Why a source of a claim was not read, or "" if it was."""
    if passages or (read is not None and read.was_read):
        return ""
    if read is None:
        return _NO_PASSAGE
    return "its page is being read" if read.pending else read.problem or _NO_PASSAGE


def with_stored_checks(cited: CitedAnswer, checks: dict[int, ClaimCheck]) -> CitedAnswer:
    """Return the answer with the checks stored when the turn completed, by marker offset."""
    claims = tuple(replace(c, check=checks.get(c.end)) for c in cited.claims)
    return replace(cited, claims=claims)


def checks_summary(cited: CitedAnswer) -> str:
    """Return "4 cited claims: 2 figures found, 1 not found, 1 with no figure to check", or "".

    While the site is still reading cited pages (`citations.pages`): "Checking 3 sources…".
    """
    shown = {s.key for s in cited.sources}
    pending = sum(1 for key, read in cited.pages.items() if read.pending and key in shown)
    if pending:
        return f"Checking {pending} source{'' if pending == 1 else 's'}…"
    checks = [c.check for c in cited.claims if c.check is not None]
    return summarise(checks) if checks and len(checks) == len(cited.claims) else ""


def content_words(text: str) -> set[str]:
    """Return the words of `text` worth matching (casefolded, no stop words, no single letters)."""
    return {w for w in word_set(text) if len(w) > 1} - _STOPWORDS


def word_set(text: str) -> frozenset[str]:
    """Return every word of `text`, casefolded: to intersect with a claim's `content_words`."""
    return frozenset(_WORD.findall(text.casefold()))


def shared_words(claim: str, passage: str) -> list[tuple[int, int]]:
    """Return the spans of `passage` whose words also appear in the claim (for highlighting)."""
    wanted = {w.casefold() for w in _WORD.findall(claim)} - _STOPWORDS
    return [
        m.span() for m in _WORD.finditer(passage) if m[0].casefold() in wanted and len(m[0]) > 1
    ]
