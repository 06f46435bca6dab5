"""Source text for claims whose citation carried none: passages taken from the cited page.

Gemini, OpenAI and xAI cite a URL and no words of it, and a Research Agent source may come
without chunks; the figure check then has nothing to check against. The site fetches such
pages itself, after the answer is shown (`chats/verify/`); this module is the pure part: which
sources need their page, which sentences of a page best support a claim, and the answer with
those passages in place and its claims checked again. A claim is only ever checked against its
source's words, never against the answer's own text.

Sentences as a reader sees them: footnote marks ("[12]", "[a]", "[citation needed]",
superscript digits) are taken out; a sentence ends at . ! ? or … (with any closing quote or
bracket) before the capital, digit, quote or currency sign that starts the next, but not after
an abbreviation ("Dr.", "U.S.", "Jan.", "No.") or an initial ("J. Smith"); a decimal point is
never an end. A run longer than `MAX_SENTENCE` (a table, a list) is split at its clause
boundaries (";", ":", ",", a dash), or else between words: nothing of it is dropped.

Choosing a passage: each sentence is scored by the claim's words it contains plus, with more
weight, the claim's figures it states, matched by value by the figure check's own rule
(`citations.claims`: "10,000", "10000" and "10k" are one value; "2017" is not "17"). The best
sentence is the passage; when the figure check still misses a figure, the best sentences that
state it are added, up to three, in page order, so a claim that joins two facts of a page is
checked against both.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from decimal import Decimal
from functools import lru_cache

from citations.claims import Figure, check_claim, claim_figures, passage_figures, supports
from citations.evidence import content_words, with_checks
from citations.references import PageRead, Passage
from citations.resolve import CitedAnswer, claims_of

MAX_PASSAGES = 3  # sentences shown (and checked) for one claim from one page
MAX_SENTENCE = 600  # characters: a longer run is split at clause boundaries
_CANDIDATES = 8  # best-scoring sentences looked at for a missing figure
_FIGURE_WEIGHT = 3  # a figure of the claim stated in a sentence counts as three shared words
_FOOTNOTE_MARK = re.compile(
    r"\[(?:\d{1,4}|[a-z]{1,2}|[A-Z]|note[ ]\d{1,3}|nb[ ]\d{1,3}|citation needed)\]"
    r"|[\u00b9\u00b2\u00b3\u2070\u2074-\u2079]+"
)
# A sentence's end, and the start of the next: "...population. Next", "...rose 4%.” The".
_SENTENCE_END = re.compile(
    r"[.!?\u2026][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9$\u20ac\u00a3\u00a5])"
)
# Words after which a full stop does not end the sentence (compared without case).
_ABBREVIATIONS = frozenset(
    {
        *("mr", "mrs", "ms", "dr", "prof", "sen", "rep", "gov", "gen", "lt", "col", "sgt"),
        *("capt", "st", "mt", "jr", "sr", "rev", "hon", "no", "nos", "vol", "art", "sec"),
        *("fig", "ch", "p", "pp", "approx", "ca", "est", "vs", "cf", "al", "inc", "corp"),
        *("co", "ltd", "bros", "dept", "univ", "e.g", "i.e", "u.s", "u.k", "u.n", "e.u"),
        *("jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"),
    }
)
_ENDS = (". ", "? ", "! ", "\u2026 ", '." ', ".\u201d ", ".) ")  # where a line may hold two
# Where a long run may be split, best first: after these, then at a space.
_CLAUSE_ENDS = ("; ", ": ", " \u2014 ", " \u2013 ", " - ", ", ")


@dataclass(slots=True)
class PageSentences:
    """A page's main text, split once into sentences, with their casefolded text to score;
    the figures they state are read (and indexed by value) the first time a claim asks."""

    sentences: tuple[str, ...]
    folded: tuple[str, ...]
    _index: _FigureIndex | None = field(default=None, repr=False)

    @property
    def figures(self) -> _FigureIndex:
        if self._index is None:
            self._index = _FigureIndex(self.sentences, self.folded)
        return self._index


@lru_cache(maxsize=64)
def page_sentences(text: str) -> PageSentences:
    """The sentences of a page's main text (kept for the last 64 pages: a cited page is mostly
    cited by other answers too, and its sentences and figures are read once)."""
    sentences = []
    for line in text.splitlines():
        if "[" in line or not line.isascii():
            line = _FOOTNOTE_MARK.sub("", line)
        line = " ".join(line.split())
        # The regex only where a line may hold several sentences: it is most of the cost.
        pieces = _split_sentences(line) if any(e in line for e in _ENDS) else [line]
        for sentence in pieces:
            if len(sentence) > MAX_SENTENCE:
                sentences.extend(_split_long(sentence))
            elif len(sentence) > 1:
                sentences.append(sentence)
    return PageSentences(tuple(sentences), tuple(s.casefold() for s in sentences))


def _split_sentences(line: str) -> list[str]:
    """The sentences of one line of text (its spaces already collapsed)."""
    pieces, start = [], 0
    for end in _SENTENCE_END.finditer(line):
        if not _ends_in_abbreviation(line, start, end.start()):
            pieces.append(line[start : end.end()].rstrip())
            start = end.end()
    pieces.append(line[start:])
    return pieces


def _ends_in_abbreviation(line: str, start: int, stop: int) -> bool:
    """True if the full stop at `stop` closes an abbreviation or an initial, not a sentence."""
    if line[stop] != ".":
        return False
    space = line.rfind(" ", start, stop)
    token = line[space + 1 if space >= 0 else start : stop].lstrip("(\"'\u201c").casefold()
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def _split_long(sentence: str) -> list[str]:
    """`sentence` in pieces of at most MAX_SENTENCE characters, cut at clause boundaries (one
    word longer than that is the only thing ever cut)."""
    pieces = []
    while len(sentence) > MAX_SENTENCE:
        window = sentence[:MAX_SENTENCE]
        cut = -1
        for mark in _CLAUSE_ENDS:
            at = window.rfind(mark, MAX_SENTENCE // 3)
            if at != -1:
                cut = at + len(mark.rstrip())
                break
        if cut == -1:
            cut = window.rfind(" ")
        if cut <= 0:
            cut = MAX_SENTENCE
        pieces.append(sentence[:cut].strip())
        sentence = sentence[cut:].strip()
    if sentence:
        pieces.append(sentence)
    return pieces


class _FigureIndex:
    """The figures of a page's sentences by family and value, to find the sentences that state a
    claim's figure without comparing it with every figure of the page."""

    def __init__(self, sentences: tuple[str, ...], folded: tuple[str, ...]) -> None:
        found = [
            (figure, position)
            for position, sentence in enumerate(sentences)
            if _MAY_STATE_A_FIGURE.search(folded[position])
            for figure in passage_figures(sentence)
        ]
        by_family: dict[str, list[tuple[Decimal, int, Figure]]] = {}
        self.dates = [(position, f) for f, position in found if f.kind == "date"]
        for figure, position in found:
            kind = figure.kind
            if isinstance(figure.value, Decimal):
                family = "amount" if kind in _AMOUNTS else kind
                by_family.setdefault(family, []).append((figure.value, position, figure))
            if (kind == "quarter" or kind == "date") and (year := _year_written(figure)):
                by_family.setdefault("year", []).append((Decimal(year), position, figure))
        self.sorted = {}
        for family, entries in by_family.items():
            entries.sort(key=_value_of)
            self.sorted[family] = ([value for value, _, _ in entries], entries)

    def stating(self, figure: Figure) -> set[int]:
        """The positions of the sentences that state `figure` (the figure check's rule)."""
        if not isinstance(figure.value, Decimal):
            return {p for p, candidate in self.dates if supports(figure, candidate)}
        # Within a family, a value in the claim's rounding is the figure check's match, but for
        # two different currencies, or a quarter or date whose year differs.
        half = figure.precision / 2
        unit = figure.unit if figure.kind in _AMOUNTS else ""
        positions = set()
        for family in _LOOKS_IN.get(figure.kind, (figure.kind,)):
            values, entries = self.sorted.get(family, ((), ()))
            low = bisect_left(values, figure.value - half)
            high = bisect_right(values, figure.value + half)
            for _, position, candidate in entries[low:high]:
                if candidate.kind in _AMOUNTS:
                    if not unit or not candidate.unit or unit == candidate.unit:
                        positions.add(position)
                elif supports(figure, candidate):
                    positions.add(position)
        return positions


# Figures that can state one another share a family; a claim's year may be stated by a year, a
# date or quarter of that year (indexed under "year" too), or the plain number.
_AMOUNTS = frozenset({"number", "currency"})
_LOOKS_IN = {"number": ("amount",), "currency": ("amount",), "year": ("year", "amount")}


def _value_of(entry: tuple[Decimal, int, Figure]) -> Decimal:
    return entry[0]


def _year_written(figure: Figure) -> int | None:
    if figure.kind == "quarter" and figure.unit.isdigit():
        return int(figure.unit)
    if figure.kind == "date" and str(figure.value)[:4].isdigit():
        return int(str(figure.value)[:4])
    return None


# A sentence (casefolded) without a digit, a spelled-out number, an ordinal, a month or a
# multiple states no figure.
_MAY_STATE_A_FIGURE = re.compile(
    r"\d|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty|forty|fifty"
    r"|sixty|seventy|eighty|ninety|hundred|eleven|first|second|third|fourth|twice|doubl|tripl"
    r"|quadrupl|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
)


def best_passages(claim: str, page: PageSentences) -> tuple[str, ...]:
    """Return the page's sentences that best support `claim`, in page order (none when no
    sentence has a word or figure of it)."""
    # Substring tests for words, not word sets: scoring every sentence of 20 pages for 40
    # claims must cost milliseconds. Words with a digit are left to the figures, matched by
    # value ("17" is not in "2017").
    words = [w for w in content_words(claim) if not any(c.isdigit() for c in w)]
    figures = claim_figures(claim)
    stating = [page.figures.stating(f) for f in figures]
    scores: dict[int, int] = {}
    for position, folded in enumerate(page.folded):
        score = len([w for w in words if w in folded])
        if score:
            scores[position] = score
    for positions in stating:
        for position in positions:
            scores[position] = scores.get(position, 0) + _FIGURE_WEIGHT
    if not scores:
        return ()
    ranked = sorted(scores, key=lambda position: (-scores[position], position))[:_CANDIDATES]
    chosen = ranked[:1]
    missing = [i for i, positions in enumerate(stating) if chosen[0] not in positions]
    if not missing:
        return (page.sentences[chosen[0]],)  # every figure is stated there: nothing to add
    check = check_claim(claim, [page.sentences[chosen[0]]])
    for position in ranked[1:]:
        if not check.missing or len(chosen) == MAX_PASSAGES:
            break
        if not any(position in stating[i] for i in missing):
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


# What a card shows for a page that was read but has no sentence with a word of the claim.
NO_SENTENCE_LINE = "No sentence of the page shares a word with this claim."


def page_problem_line(problem: str) -> str:
    """The one line a card (and an export) shows for a cited page that could not be read."""
    return f"The page could not be read ({problem}), so its claims are not checked."
