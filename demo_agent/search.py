"""The `search` tool: Okapi BM25 over headline and text, boosting the asked-about companies."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from demo_agent.corpus import Document

_POSSESSIVE = re.compile("['\u2019]s\\b", re.IGNORECASE)  # straight or curly apostrophe
_WORD = re.compile(r"[A-Za-z0-9]+")

# Standard BM25 constants.
_K1 = 1.2
_B = 0.75
# A document about an asked-about company ranks above others that merely share a word.
_COMPANY_BOOST_FACTOR = 1.5
_COMPANY_BOOST_BONUS = 1.0
# Share of a query's IDF mass a document must match to count (unless it is about an asked-about
# company): stops "walmart revenue" from returning every document that says "revenue".
MIN_COVERAGE = 0.5


def words(text: str) -> list[str]:
    """Return the words of a text as written, possessive endings removed."""
    return _WORD.findall(_POSSESSIVE.sub("", text))


def stem(word: str) -> str:
    """Return a crude stem: lower case, plural endings folded ("margins" -> "margin")."""
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    return [stem(w) for w in words(text)]


@dataclass(frozen=True)
class SearchHit:
    document: Document
    score: float


class SearchIndex:
    def __init__(self, documents: Sequence[Document]) -> None:
        self._documents = tuple(documents)
        self._terms = [Counter(tokenize(f"{d.headline} {d.text}")) for d in self._documents]
        self._lengths = [sum(c.values()) for c in self._terms]
        self._average_length = sum(self._lengths) / max(len(self._lengths), 1)
        self._df = Counter(term for counts in self._terms for term in counts)
        self._terms_by_key = {d.key: c for d, c in zip(self._documents, self._terms, strict=True)}

    @property
    def vocabulary(self) -> Collection[str]:
        return self._df.keys()

    def idf(self, term: str) -> float:
        """BM25's IDF; a term no document contains gets the highest value."""
        n, df = len(self._documents), self._df.get(term, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def coverage(self, document: Document, terms: Iterable[str]) -> float:
        """Return the share of the terms' IDF mass that the document contains."""
        return self._coverage(set(terms), self._terms_by_key[document.key])

    def search(
        self,
        terms: Sequence[str],
        *,
        expansion: Sequence[str] = (),
        companies: Collection[str] = (),
        limit: int = 6,
    ) -> list[SearchHit]:
        """Return the best documents for the terms, best first.

        `expansion` terms (a topic's synonyms) add to the score at half weight but do not count
        towards coverage, so they can reorder results without admitting unrelated documents.
        """
        unique = set(terms)
        extra = set(expansion) - unique
        hits = []
        for document, counts, length in zip(
            self._documents, self._terms, self._lengths, strict=True
        ):
            score = self._bm25(unique, counts, length) + self._bm25(extra, counts, length) / 2
            if document.company in companies:
                score = score * _COMPANY_BOOST_FACTOR + _COMPANY_BOOST_BONUS
            elif score <= 0 or self._coverage(unique, counts) < MIN_COVERAGE:
                continue
            hits.append(SearchHit(document, round(score, 4)))
        hits.sort(key=lambda hit: -hit.score)
        return hits[:limit]

    def _coverage(self, terms: set[str], counts: Counter[str]) -> float:
        total = sum(self.idf(t) for t in terms)
        return sum(self.idf(t) for t in terms if t in counts) / total if total else 0.0

    def _bm25(self, terms: set[str], counts: Counter[str], length: int) -> float:
        score = 0.0
        for term in terms:
            tf = counts.get(term, 0)
            if tf:
                norm = tf + _K1 * (1 - _B + _B * length / self._average_length)
                score += self.idf(term) * tf * (_K1 + 1) / norm
        return score
