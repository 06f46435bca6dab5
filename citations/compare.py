"""Compare two versions of a cited answer: which figures moved, which sources came and went, and
which words changed.

Pure (no database, no rendering, no provider), like `resolve.py`: the compare page, the watch
that re-runs a question and the benchmark all compare `AnswerVersion`s the same way. A version
is an answer's text, its claims' spans and its sources, from a `CitedAnswer` or read straight
from the stored references (`selectors.answer_versions_to_compare`), which spares the page the
resolver's Markdown parse of both answers.

- **Figures** are aligned claim by claim. A claim is what one footnote marker closes
  (`resolve.Claim`), or, read from storage, the text from the earliest start of the cited
  spans that end at one place to that place; an answer without footnotes (an agent that
  cites nothing) is read sentence by sentence instead. Two claims are the same claim when
  their text is, or their words with their figures taken out are ("Revenue rose # to #."),
  wherever they stand, or, among the claims that moved together, nearly the same. Within a
  pair, figures of one kind are paired in the order they are written: "12%" beside "14%" is a
  change; a figure left over is added or gone, and so is every figure of a claim that has no
  partner.
- **Sources** are told apart by the key that deduplicates footnotes (`SourceDocument.key`).
- **Words**: `difflib` over sentences first, then over the words of the sentences that differ,
  so that two long answers that share most of their text cost little.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any, Literal

from citations.claims import Figure, extract_figures
from citations.references import SourceDocument
from citations.resolve import CitedAnswer

PieceKind = Literal["same", "added", "removed"]

_WORD = re.compile(r"\w+(?:[.,']\w+)*", re.UNICODE)
# A sentence ends at . ! or ? followed by a space, or at a line break (kept with the sentence).
_SENTENCE = re.compile(r"[^\n]*?(?:[.!?](?=\s)|\n|$)\s*")
_TOKEN = re.compile(r"\s*\S+\s*|\s+")
# Claims that moved together are paired by similarity only while the block is small: a block
# of thousands of unmatched claims is read as claims removed and added, not compared pairwise.
_MAX_PAIRWISE = 100
_SIMILAR = 0.6
# Word diffs of a block whose two sides multiply past this are shown as the block replaced.
_MAX_WORD_DIFF = 250_000


@dataclass(frozen=True, slots=True)
class FigureChange:
    """A figure that changed ("12%" → "14%"), was added (before "") or is gone (after "").

    `claim` is the claim it stands in: the newer version's, or for a figure gone the older's.
    """

    before: str
    after: str
    claim: str

    @property
    def label(self) -> str:
        return f"{self.before} → {self.after}"

    def to_dict(self) -> dict[str, str]:
        return {"before": self.before, "after": self.after, "claim": self.claim}


@dataclass(frozen=True, slots=True)
class SourceChange:
    """A source one version cites and the other does not, by its deduplication key."""

    key: str
    label: str
    url: str
    headline: str

    def to_dict(self) -> dict[str, str]:
        return {"key": self.key, "label": self.label, "url": self.url, "headline": self.headline}


@dataclass(frozen=True, slots=True)
class TextPiece:
    """A run of the answer text that both versions share, or that one added or removed."""

    kind: PieceKind
    text: str


@dataclass(frozen=True, slots=True)
class AnswerComparison:
    figures_changed: tuple[FigureChange, ...]
    figures_added: tuple[FigureChange, ...]
    figures_gone: tuple[FigureChange, ...]
    sources_added: tuple[SourceChange, ...]
    sources_dropped: tuple[SourceChange, ...]
    text: tuple[TextPiece, ...]

    @property
    def has_changes(self) -> bool:
        """True when a figure or a source changed (what a watch tells its analyst about)."""
        return bool(
            self.figures_changed
            or self.figures_added
            or self.figures_gone
            or self.sources_added
            or self.sources_dropped
        )

    @property
    def text_changed(self) -> bool:
        return any(piece.kind != "same" for piece in self.text)

    @property
    def summary(self) -> str:
        """ "2 figures changed, 1 source added, 1 dropped", or "No figures or sources changed"."""
        parts = []
        if self.figures_changed:
            parts.append(f"{_count(len(self.figures_changed), 'figure')} changed")
        if self.figures_added:
            parts.append(f"{_count(len(self.figures_added), 'figure')} added")
        if self.figures_gone:
            parts.append(f"{_count(len(self.figures_gone), 'figure')} gone")
        if self.sources_added:
            parts.append(f"{_count(len(self.sources_added), 'source')} added")
        if self.sources_dropped:
            # Right after "N sources added" the noun is understood: "1 source added, 1 dropped".
            n = len(self.sources_dropped)
            parts.append(f"{n} dropped" if self.sources_added else f"{_count(n, 'source')} dropped")
        return ", ".join(parts) if parts else "No figures or sources changed"

    def figures_named(self, limit: int = 5) -> str:
        """The changed figures themselves: "12% → 14%, $4.1 billion → $4.2 billion"."""
        labels = [change.label for change in self.figures_changed[:limit]]
        more = len(self.figures_changed) - limit
        return ", ".join(labels) + (f" and {more} more" if more > 0 else "")

    def to_dict(self) -> dict[str, Any]:
        """The figures and sources (not the text), as a watch run stores them."""
        return {
            "summary": self.summary,
            "figures_changed": [c.to_dict() for c in self.figures_changed],
            "figures_added": [c.to_dict() for c in self.figures_added],
            "figures_gone": [c.to_dict() for c in self.figures_gone],
            "sources_added": [s.to_dict() for s in self.sources_added],
            "sources_dropped": [s.to_dict() for s in self.sources_dropped],
        }


@dataclass(frozen=True, slots=True)
class AnswerVersion:
    """What comparing reads of one version of an answer."""

    answer: str
    claims: tuple[tuple[int, int], ...]  # (start, end) in the answer, in reading order
    sources: tuple[SourceDocument, ...]  # one per key, in the order they are first cited

    @classmethod
    def of(cls, cited: CitedAnswer) -> AnswerVersion:
        return cls(
            cited.answer,
            tuple((claim.start, claim.end) for claim in cited.claims),
            tuple(source.document for source in cited.sources),
        )

    @classmethod
    def from_spans(
        cls, answer: str, spans: Sequence[tuple[int, int, SourceDocument]]
    ) -> AnswerVersion:
        """Build a version from the spans its sources support (start, end, source), valid and
        in any order."""
        starts: dict[int, int] = {}
        sources: dict[str, SourceDocument] = {}
        for start, end, source in sorted(spans, key=lambda span: (span[1], span[0])):
            starts[end] = min(start, starts.get(end, start))
            sources.setdefault(source.key, source)
        claims = tuple((start, end) for end, start in starts.items())
        return cls(answer, claims, tuple(sources.values()))


def compare_answers(
    before: CitedAnswer | AnswerVersion, after: CitedAnswer | AnswerVersion
) -> AnswerComparison:
    """Compare an older version of an answer (`before`) with a newer one (`after`)."""
    before = before if isinstance(before, AnswerVersion) else AnswerVersion.of(before)
    after = after if isinstance(after, AnswerVersion) else AnswerVersion.of(after)
    changed: list[FigureChange] = []
    added: list[FigureChange] = []
    gone: list[FigureChange] = []
    old_units, new_units = _units(before), _units(after)
    for old, new in _align(old_units, new_units):
        if old is None and new is not None:
            added.extend(FigureChange("", f.label, new.text) for f in new.figures)
        elif new is None and old is not None:
            gone.extend(FigureChange(f.label, "", old.text) for f in old.figures)
        elif old is not None and new is not None:
            _compare_figures(old, new, changed, added, gone)
    old_sources = {s.key: s for s in before.sources}
    new_sources = {s.key: s for s in after.sources}
    return AnswerComparison(
        figures_changed=tuple(changed),
        figures_added=tuple(added),
        figures_gone=tuple(gone),
        sources_added=tuple(_source(s) for k, s in new_sources.items() if k not in old_sources),
        sources_dropped=tuple(_source(s) for k, s in old_sources.items() if k not in new_sources),
        text=diff_words(before.answer, after.answer),
    )


def diff_words(before: str, after: str) -> tuple[TextPiece, ...]:
    """Return `after` as pieces kept, added and removed (the removed ones from `before`)."""
    pieces: list[TextPiece] = []
    old, new = _sentences(before), _sentences(after)
    for op, i1, i2, j1, j2 in SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op == "equal":
            _add(pieces, "same", "".join(old[i1:i2]))
        elif op == "replace" and i2 - i1 == j2 - j1:
            # Sentence by sentence: each changed sentence against its counterpart.
            for old_sentence, new_sentence in zip(old[i1:i2], new[j1:j2], strict=True):
                _diff_block(pieces, old_sentence, new_sentence)
        else:
            _diff_block(pieces, "".join(old[i1:i2]), "".join(new[j1:j2]))
    return tuple(pieces)


def _diff_block(pieces: list[TextPiece], old_text: str, new_text: str) -> None:
    old_words, new_words = _TOKEN.findall(old_text), _TOKEN.findall(new_text)
    if not old_words or not new_words or len(old_words) * len(new_words) > _MAX_WORD_DIFF:
        _add(pieces, "removed", old_text)
        _add(pieces, "added", new_text)
        return
    matcher = SequenceMatcher(None, old_words, new_words, autojunk=False)
    for op, a1, a2, b1, b2 in matcher.get_opcodes():
        if op == "equal":
            _add(pieces, "same", "".join(new_words[b1:b2]))
        else:
            _add(pieces, "removed", "".join(old_words[a1:a2]))
            _add(pieces, "added", "".join(new_words[b1:b2]))


# --- claims and their figures ------------------------------------------------------------------


class _Unit:
    """A claim (or a sentence); its figures and its words with the figures taken out ("#")
    are read only when it differs from every claim of the other version (most do not)."""

    __slots__ = ("_figures", "_key", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._figures: tuple[Figure, ...] | None = None
        self._key: str | None = None

    @property
    def figures(self) -> tuple[Figure, ...]:
        if self._figures is None:
            self._figures = _figures_of(self.text)
        return self._figures

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = _skeleton(self.text, self.figures)
        return self._key


def _units(version: AnswerVersion) -> list[_Unit]:
    answer = version.answer
    if version.claims:
        spans = list(version.claims)
    else:
        spans = [m.span() for m in _SENTENCE.finditer(answer) if m.group().strip()]
    return [_Unit(" ".join(answer[start:end].split())) for start, end in spans]


@lru_cache(maxsize=4096)
def _figures_of(text: str) -> tuple[Figure, ...]:
    return tuple(extract_figures(text))


def _skeleton(text: str, figures: Sequence[Figure]) -> str:
    """The claim's words with each figure replaced by "#": what two versions of it share."""
    parts, last = [], 0
    for figure in figures:
        parts.append(text[last : figure.start])
        parts.append(" # ")
        last = figure.end
    parts.append(text[last:])
    return " ".join(word.casefold() for word in _WORD.findall("".join(parts)) or ["#"])


def _align(old: list[_Unit], new: list[_Unit]) -> list[tuple[_Unit | None, _Unit | None]]:
    """Pair the claims of two versions in order: the same text first (nothing to compare), then,
    among the claims between, the same words around their figures, then similar words; None
    where a claim has no partner."""
    pairs: list[tuple[_Unit | None, _Unit | None]] = []
    same_text = SequenceMatcher(None, [u.text for u in old], [u.text for u in new], autojunk=False)
    for op, i1, i2, j1, j2 in same_text.get_opcodes():
        if op != "equal":
            pairs.extend(_align_by_words(old[i1:i2], new[j1:j2]))
    return _pair_moved(pairs)


def _pair_moved(
    pairs: list[tuple[_Unit | None, _Unit | None]],
) -> list[tuple[_Unit | None, _Unit | None]]:
    """Pair the claims left alone that have the same words elsewhere: a claim that moved."""
    unpaired_new: dict[str, list[_Unit]] = {}
    for old, new in pairs:
        if old is None and new is not None:
            unpaired_new.setdefault(new.key, []).append(new)
    moved: set[int] = set()
    result: list[tuple[_Unit | None, _Unit | None]] = []
    for old, new in pairs:
        if new is None and old is not None and unpaired_new.get(old.key):
            partner = unpaired_new[old.key].pop(0)
            moved.add(id(partner))
            result.append((old, partner))
        else:
            result.append((old, new))
    # The moved claims' places as claims added go: they are paired now.
    return [(old, new) for old, new in result if not (old is None and id(new) in moved)]


def _align_by_words(old: list[_Unit], new: list[_Unit]) -> list[tuple[_Unit | None, _Unit | None]]:
    pairs: list[tuple[_Unit | None, _Unit | None]] = []
    matcher = SequenceMatcher(None, [u.key for u in old], [u.key for u in new], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            pairs.extend(zip(old[i1:i2], new[j1:j2], strict=True))
        elif op == "replace" and (i2 - i1) * (j2 - j1) <= _MAX_PAIRWISE:
            pairs.extend(_pair_similar(old[i1:i2], new[j1:j2]))
        else:
            pairs.extend((unit, None) for unit in old[i1:i2])
            pairs.extend((None, unit) for unit in new[j1:j2])
    return pairs


def _pair_similar(old: list[_Unit], new: list[_Unit]) -> list[tuple[_Unit | None, _Unit | None]]:
    """Pair each claim with the most similar unpaired one of the other version, if similar."""
    pairs: list[tuple[_Unit | None, _Unit | None]] = []
    taken: set[int] = set()
    candidates = [candidate.key.split() for candidate in new]
    for unit in old:
        matcher = SequenceMatcher(None, b=unit.key.split(), autojunk=False)  # indexed once
        best, best_ratio = None, _SIMILAR
        for index, words in enumerate(candidates):
            if index in taken:
                continue
            matcher.set_seq1(words)  # the cheap upper bounds first: most candidates stop there
            if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
                continue
            ratio = matcher.ratio()
            if ratio >= best_ratio:
                best, best_ratio = index, ratio
        if best is None:
            pairs.append((unit, None))
        else:
            taken.add(best)
            pairs.append((unit, new[best]))
    pairs.extend((None, unit) for index, unit in enumerate(new) if index not in taken)
    return pairs


def _compare_figures(
    old: _Unit,
    new: _Unit,
    changed: list[FigureChange],
    added: list[FigureChange],
    gone: list[FigureChange],
) -> None:
    """Pair the figures of one claim's two versions kind by kind, in the order written."""
    kinds = dict.fromkeys(f.kind for f in (*old.figures, *new.figures))
    for kind in kinds:
        before = [f for f in old.figures if f.kind == kind]
        after = [f for f in new.figures if f.kind == kind]
        for was, now in zip(before, after, strict=False):
            if was != now:
                changed.append(FigureChange(was.label, now.label, new.text))
        added.extend(FigureChange("", f.label, new.text) for f in after[len(before) :])
        gone.extend(FigureChange(f.label, "", old.text) for f in before[len(after) :])


# --- helpers -----------------------------------------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [m.group() for m in _SENTENCE.finditer(text) if m.group()]


def _add(pieces: list[TextPiece], kind: PieceKind, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1].kind == kind:
        pieces[-1] = TextPiece(kind, pieces[-1].text + text)
    else:
        pieces.append(TextPiece(kind, text))


def _source(source: SourceDocument) -> SourceChange:
    return SourceChange(source.key, source.label, source.url, source.headline)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
