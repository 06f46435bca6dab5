"""Compose an answer from sentences found by the tools, with exact GROUNDING offsets.

Every claim is a sentence copied verbatim from a document (or from a tool's output), so each
reference's span covers exactly the sentence it cites. Offsets count Python code points (str
indices) into the whole answer, as the cumulative ANSWER text is indexed (docs/PROTOCOL.md,
"GROUNDING").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from demo_agent.corpus import Document
from demo_agent.search import tokenize

# One sentence may be backed by several documents (a wire story and its republication).
MAX_CITATIONS_PER_CLAIM = 2


@dataclass(frozen=True)
class Citation:
    tool_name: str
    audit_id: str
    source: dict[str, Any] | None  # None for tool-level citations (earnings_calendar)
    document_key: str | None = None


@dataclass(frozen=True)
class Found:
    """A document a search returned, and the audit trace (search call) that returned it."""

    document: Document
    audit_id: str

    def citation(self) -> Citation:
        return Citation("search", self.audit_id, self.document.source, self.document.key)


@dataclass
class Claim:
    sentence: str
    citations: list[Citation] = field(default_factory=list)
    label: str | None = None  # who the sentence is about, shown when an answer mixes companies


@dataclass(frozen=True)
class Answer:
    text: str
    references: list[dict[str, Any]]
    documents: tuple[str, ...]  # keys of the cited documents, in order of first citation


def with_passage(source: dict[str, Any] | None, sentence: str) -> dict[str, Any] | None:
    """Return the source with the passage it contributed, as the real API sends it: BIGDATA
    `chunks[].text`, EXTERNAL `text` (docs/PROTOCOL.md). The demo's claims quote their
    documents, so the passage is the document's sentence."""
    if source is None:
        return None
    passage = " ".join(sentence.split())
    if source.get("type") == "EXTERNAL":
        return {**source, "text": passage, "relevance": 1.0}
    return {**source, "chunks": [{"cnum": 0, "text": passage, "relevance": 1.0}]}


def pick_claims(
    found: Sequence[Found],
    term_weights: Mapping[str, float],
    *,
    max_claims: int,
    per_document: int,
    group_by_company: bool = False,
) -> tuple[list[Claim], bool]:
    """Return the sentences that best answer, and whether they match the question specifically.

    Documents are taken in rank order (alternating between companies when asked to), up to
    `per_document` matching sentences each; with no matching sentence at all the documents' lead
    sentences are returned instead, flagged as not specific.
    """
    scored = [(f, [_score(s, term_weights) for s in f.document.sentences]) for f in found]
    relevant = [(f, scores) for f, scores in scored if max(scores, default=0) > 0]
    specific = bool(relevant)
    ranked = sorted(relevant, key=lambda item: -max(item[1])) if specific else scored
    if group_by_company:
        ranked = _alternate_companies(ranked)

    claims: dict[str, Claim] = {}
    for f, scores in ranked:
        sentences = f.document.sentences
        if specific:
            best = sorted(range(len(sentences)), key=lambda i: -scores[i])[:per_document]
            chosen = [sentences[i] for i in sorted(best) if scores[i] > 0]
        else:
            chosen = list(sentences[:1])
        for sentence in chosen:
            if sentence in claims:
                _cite(claims[sentence], f.citation())
            elif len(claims) < max_claims:
                claims[sentence] = Claim(sentence, [f.citation()])
    # Corroborate: another found document carrying the very same sentence is cited too.
    for claim in claims.values():
        for f in found:
            if claim.sentence in f.document.sentences:
                _cite(claim, f.citation())
    return list(claims.values()), specific


def compose(intro: str, claims: Sequence[Claim], *, bullets: bool) -> Answer:
    """Return the answer: an intro line, then the claims as a paragraph or a bullet list.

    Labels ("**NVIDIA:** ") stay outside the cited spans: a span is exactly the quoted sentence.
    """
    builder = _AnswerBuilder()
    builder.write(intro)
    bullets = bullets or any(claim.label for claim in claims)
    for index, claim in enumerate(claims):
        if bullets:
            builder.write("\n\n- " if index == 0 else "\n- ")
            if claim.label:
                builder.write(f"**{claim.label}:** ")
        else:
            builder.write("\n\n" if index == 0 else " ")
        builder.claim(claim)
    return builder.answer()


def nothing_found(subject: str, coverage: str) -> Answer:
    """Return the honest answer for a question the corpus cannot ground: no references."""
    text = f"I found nothing in the demo corpus about {subject}. {coverage}"
    return Answer(text=text, references=[], documents=())


def _cite(claim: Claim, citation: Citation) -> None:
    """Add a citation unless the claim already cites that document (or that tool call)."""
    cited = {c.document_key or c.audit_id for c in claim.citations}
    key = citation.document_key or citation.audit_id
    if key not in cited and len(claim.citations) < MAX_CITATIONS_PER_CLAIM:
        claim.citations.append(citation)


def _score(sentence: str, term_weights: Mapping[str, float]) -> float:
    return sum(term_weights.get(term, 0.0) for term in set(tokenize(sentence)))


_Scored = tuple[Found, list[float]]


def _alternate_companies(ranked: list[_Scored]) -> list[_Scored]:
    queues: dict[str | None, list[_Scored]] = {}
    for item in ranked:
        queues.setdefault(item[0].document.company, []).append(item)
    merged = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                merged.append(queue.pop(0))
    return merged


class _AnswerBuilder:
    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._references: list[dict[str, Any]] = []
        self._documents: dict[str, None] = {}

    def write(self, text: str) -> None:
        self._parts.append(text)
        self._length += len(text)

    def claim(self, claim: Claim) -> None:
        start = self._length
        self.write(claim.sentence)
        for citation in claim.citations:
            self._references.append(
                {
                    "start": start,
                    "end": self._length,
                    "tool_name": citation.tool_name,
                    "audit_id": citation.audit_id,
                    "source": with_passage(citation.source, claim.sentence),
                }
            )
            if citation.document_key:
                self._documents[citation.document_key] = None

    def answer(self) -> Answer:
        return Answer("".join(self._parts), self._references, tuple(self._documents))
