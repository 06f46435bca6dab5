"""Source text for claims whose citation carried none: passages taken from the cited page.

Gemini, OpenAI and xAI cite a URL and no words of it, and a Research Agent source may come
without chunks; the figure check then has nothing to check against. The site fetches such
pages itself, after the answer is shown (`chats/verify/`); this module is the pure part: which
sources need their page, which sentences of a page best support a claim, and the answer with
those passages in place and its claims checked again. A claim is only ever checked against its
source's words, never against the answer's own text.

Choosing a passage: the page's main text is split into sentences; each is scored by the claim's
content words it contains plus, with more weight, the claim's figures written in it. The best
sentence is the passage; when the figure check still misses a figure, the next best sentences
that write that figure are added, up to three, in page order, so a claim that joins two facts
of a page is checked against both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date

from citations.claims import check_claim
from citations.evidence import claims_of, content_words, with_checks
from citations.references import PageRead, Passage
from citations.resolve import CitedAnswer

MAX_PASSAGES = 3  # sentences shown (and checked) for one claim from one page
_CANDIDATES = 8  # best-scoring sentences looked at for a missing figure
_MAX_SENTENCE = 600  # characters: a "sentence" longer than this (a table, a list) is cut
_FIGURE_WEIGHT = 3  # a figure of the claim written in a sentence counts as three shared words
# Within a line, a sentence ends at . ! ? or … (and any closing quote or bracket, kept with it)
# before the capital, digit or currency sign that starts the next; each line ends one too.
_SENTENCE_END = re.compile(
    r"([.!?\u2026][\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9$\u20ac\u00a3\u00a5])"
)
_ENDS = (". ", "? ", "! ", "\u2026 ")  # a line without any of these is one sentence
_NUMERAL = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True, slots=True)
class PageSentences:
    """A page's main text, split once into sentences (and their casefolded text, to score)."""

    sentences: tuple[str, ...]
    folded: tuple[str, ...]


def page_sentences(text: str) -> PageSentences:
    sentences = []
    for line in text.splitlines():
        # The regex only where a line may hold several sentences: it is most of the cost.
        pieces = _SENTENCE_END.split(line) if any(e in line for e in _ENDS) else [line]
        for position in range(0, len(pieces), 2):  # sentence, its end punctuation, sentence...
            end = pieces[position + 1] if position + 1 < len(pieces) else ""
            sentence = " ".join((pieces[position] + end).split())
            if len(sentence) > 1:
                sentences.append(sentence[:_MAX_SENTENCE])
    return PageSentences(tuple(sentences), tuple(s.casefold() for s in sentences))


def best_passages(claim: str, page: PageSentences) -> tuple[str, ...]:
    """Return the page's sentences that best support `claim`, in page order (none when no
    sentence has a word or figure of it)."""
    # Substring tests, not word sets: scoring every sentence of 20 pages for 40 claims must
    # cost milliseconds; the figure check, not the score, decides what is supported.
    # Every digit run of the claim, figure or not ("Q3" gives "3"): a cheap hint for the
    # ranking; the figure check below reads the figures properly.
    numerals = _NUMERAL.findall(claim)
    wanted = [*content_words(claim), *numerals * _FIGURE_WEIGHT]  # a figure counts thrice
    scored = []
    for position, folded in enumerate(page.folded):
        score = len([w for w in wanted if w in folded])
        if score:
            scored.append((-score, position))
    if not scored:
        return ()
    ranked = [position for _, position in sorted(scored)[:_CANDIDATES]]
    chosen = ranked[:1]
    if all(n in page.sentences[chosen[0]] for n in numerals):
        return (page.sentences[chosen[0]],)  # every figure is written there: nothing to add
    check = check_claim(claim, [page.sentences[chosen[0]]])
    for position in ranked[1:]:
        if not check.missing or len(chosen) == MAX_PASSAGES:
            break
        missing = [n for f in check.missing for n in _NUMERAL.findall(f.text)]
        if not any(n in page.sentences[position] for n in missing):
            continue
        trial = check_claim(claim, [page.sentences[p] for p in [*chosen, position]])
        if len(trial.missing) < len(check.missing):
            chosen, check = [*chosen, position], trial
    return tuple(page.sentences[p] for p in sorted(chosen))


def pages_to_read(cited: CitedAnswer) -> dict[str, str]:
    """Return the URL of every cited source, by key, that some shown claim cites without a
    passage; only http(s) URLs (adapters keep no other kind)."""
    urls = {s.key: s.url for s in cited.sources if s.url}
    wanted: dict[str, str] = {}
    for ref in cited.references:
        key = ref.source_key
        if ref.footnote is not None and not ref.passages and key in urls:
            wanted[key] = urls[key]
    return wanted


def with_pending_pages(cited: CitedAnswer) -> CitedAnswer:
    """Return the answer with every page it needs marked as being read ("Checking 3 sources…")."""
    pending = {key: PageRead(url=url, pending=True) for key, url in pages_to_read(cited).items()}
    return replace(cited, pages=pending) if pending else cited


def with_pages(cited: CitedAnswer, reads: Mapping[str, PageRead]) -> CitedAnswer:
    """Return the answer with passages from the pages read (by source key), checked again.

    A source whose page could not be read keeps no passage, so its claims count as not
    checked; `cited.pages` records what happened to each page, without its text.
    """
    sentences = {key: page_sentences(r.text) for key, r in reads.items() if r.is_read}
    claims = {claim.end: claim for claim in cited.claims}
    references = []
    for ref in cited.references:
        key = ref.source_key
        if key in sentences and not ref.passages and ref.marker_offset in claims:
            read = reads[key]
            claim = claims[ref.marker_offset]
            texts = best_passages(cited.answer[claim.start : claim.end], sentences[key])
            passages = tuple(
                Passage(text=t, page_url=read.final_url or read.url, fetched_on=read.fetched_on)
                for t in texts
            )
            ref = replace(ref, citation=replace(ref.citation, passages=passages))
        references.append(ref)
    pages = {**cited.pages, **{key: replace(r, text="") for key, r in reads.items()}}
    return with_checks(
        replace(
            cited,
            references=tuple(references),
            claims=claims_of(references, [m.offset for m in cited.markers]),
            pages=pages,
        )
    )


def fetched_label(fetched_on: date) -> str:
    """Where a passage the site took from the page comes from, as its card says."""
    return f"From the page, fetched {fetched_on.isoformat()}"


def page_problem_line(problem: str) -> str:
    """The one line a card (and an export) shows for a cited page that could not be read."""
    return f"The page could not be read ({problem}), so its claims are not checked."
