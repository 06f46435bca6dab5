"""Resolve citations against the complete answer: the one place that numbers footnotes, and
groups the shown references into one claim per marker (`claims_of`; their figures are checked
by `citations/evidence.py`).

Pure (no database, no rendering, no provider) so that the live run, the stored turn,
`render_stream` and the export all get the same footnotes from the same inputs (docs/PROTOCOL.md,
"GROUNDING"). Adapters turn each provider's wire format into `Citation`s first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from citations.claims import ClaimCheck
from citations.markers import Marker, group_markers, placements_of
from citations.references import Citation, PageRead, Passage, SourceDocument, ToolCall


@dataclass(frozen=True, slots=True)
class CitedSource:
    """A unique source, numbered; its document comes from its first citation.

    `placed` is False for a source only unplaced citations name: it has no marker in the
    text, and is listed after the placed sources as "not placed in the text".
    """

    number: int
    document: SourceDocument
    placed: bool = True

    key = property(lambda self: self.document.key)
    type = property(lambda self: self.document.type)
    name = property(lambda self: self.document.name)
    headline = property(lambda self: self.document.headline)
    url = property(lambda self: self.document.url)
    label = property(lambda self: self.document.label)
    published_on = property(lambda self: self.document.published_on)


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """One citation as received, judged against the whole answer."""

    position: int
    citation: Citation = field(repr=False)
    tool_call: ToolCall | None
    tool_call_position: int | None
    audit_id: str
    footnote: int | None
    marker_offset: int | None  # where its footnote marker shows; None when not shown
    problem: str

    start = property(lambda self: self.citation.start)
    end = property(lambda self: self.citation.end)
    tool_name = property(lambda self: self.citation.tool_name)
    data = property(lambda self: self.citation.data)

    @property
    def source_key(self) -> str | None:
        return self.citation.source.key if self.citation.source else None

    @property
    def passages(self) -> tuple[Passage, ...]:
        return self.citation.passages

    @property
    def is_valid(self) -> bool:
        return not self.problem

    @property
    def is_tool_level(self) -> bool:
        """True for a valid citation with no source: it cites a tool's whole result."""
        return self.is_valid and self.citation.source is None


@dataclass(frozen=True, slots=True)
class ToolAttribution:
    """The spans one tool call supports, shown as a badge rather than a footnote."""

    tool_name: str
    audit_id: str
    tool_call: ToolCall | None
    spans: tuple[tuple[int, int], ...]

    @property
    def title(self) -> str:
        return self.tool_call.title if self.tool_call else ""

    @property
    def display_name(self) -> str:
        return self.tool_name or (self.tool_call.kind if self.tool_call else "") or "tool"


@dataclass(frozen=True, slots=True)
class Claim:
    """One marker's claim: its span, its sources' passages by footnote, and its check."""

    index: int  # the marker's index in `CitedAnswer.markers`
    start: int
    end: int  # the marker's offset
    passages: tuple[tuple[int, tuple[Passage, ...]], ...]  # (footnote, passages), ascending
    check: ClaimCheck | None = None

    @property
    def footnotes(self) -> tuple[int, ...]:
        return tuple(number for number, _ in self.passages)

    @property
    def is_flagged(self) -> bool:
        return self.check is not None and self.check.is_flagged


def claims_of(
    references: Sequence[ResolvedReference], marker_offsets: Sequence[int]
) -> tuple[Claim, ...]:
    """Group the shown references into one claim per marker."""
    by_marker: dict[int, list[ResolvedReference]] = {}
    for ref in references:
        if ref.footnote is not None and ref.marker_offset is not None:
            by_marker.setdefault(ref.marker_offset, []).append(ref)
    claims = []
    for index, offset in enumerate(marker_offsets):
        refs = by_marker.get(offset, [])
        passages: dict[int, list[Passage]] = {}
        for ref in refs:
            kept = passages.setdefault(ref.footnote, [])
            kept.extend(p for p in ref.passages if p not in kept)
        claims.append(
            Claim(
                index=index,
                start=min((r.start for r in refs), default=offset),
                end=offset,
                passages=tuple((n, tuple(passages[n])) for n in sorted(passages)),
            )
        )
    return tuple(claims)


@dataclass(frozen=True, slots=True)
class CitedAnswer:
    answer: str
    references: tuple[ResolvedReference, ...]
    sources: tuple[CitedSource, ...]
    markers: tuple[Marker, ...]
    tool_attributions: tuple[ToolAttribution, ...]
    tool_calls: tuple[ToolCall, ...]
    claims: tuple[Claim, ...] = ()  # one per marker; checked by `evidence.with_checks`
    # The cited pages the site reads itself, by source key (`citations.pages`).
    pages: Mapping[str, PageRead] = field(default_factory=dict)

    @property
    def invalid_references(self) -> list[ResolvedReference]:
        return [r for r in self.references if not r.is_valid]

    @property
    def references_past_the_end(self) -> list[ResolvedReference]:
        """The invalid references whose one fault is a span reaching past the answer's end:
        what an answer cut short keeps of citations made for the whole of it."""
        length = len(self.answer)
        return [
            r
            for r in self.invalid_references
            if not _problem(r.citation, math.inf) and (r.citation.end or 0) > length
        ]


def resolve_citations(
    *, answer: str, citations: Sequence[Citation], tool_calls: Sequence[ToolCall] = ()
) -> CitedAnswer:
    """Validate, link, deduplicate and number every citation; call once the answer is complete."""
    calls_by_id: dict[str, int] = {}
    for position, call in enumerate(tool_calls):
        if call.tool_id:
            calls_by_id.setdefault(call.tool_id, position)

    problems = [_problem(c, len(answer)) for c in citations]
    valid = [p for p, problem in enumerate(problems) if not problem and not citations[p].unplaced]
    placements = dict(
        zip(
            valid,
            placements_of(answer, [(citations[p].start, citations[p].end) for p in valid]),
            strict=True,
        )
    )
    # The footnotes' order: by where the span ends (where its marker shows), then where it starts,
    # then arrival.
    shown = sorted((placements[p][0], citations[p].start, p) for p in valid)
    numbers: dict[str, int] = {}
    sources: list[CitedSource] = []
    for _offset, _start, position in shown:
        source = citations[position].source
        if source is not None and source.key not in numbers:
            numbers[source.key] = len(numbers) + 1
            sources.append(CitedSource(numbers[source.key], source))
    # Then the sources only unplaced citations name, in arrival order: never dropped.
    for citation, problem in zip(citations, problems, strict=True):
        source = citation.source
        if citation.unplaced and not problem and source is not None and source.key not in numbers:
            numbers[source.key] = len(numbers) + 1
            sources.append(CitedSource(numbers[source.key], source, placed=False))

    resolved = []
    for position, (citation, problem) in enumerate(zip(citations, problems, strict=True)):
        audit_id, call_position = _tool_call_link(citation, calls_by_id)
        resolved.append(
            ResolvedReference(
                position=position,
                citation=citation,
                tool_call=tool_calls[call_position] if call_position is not None else None,
                tool_call_position=call_position,
                audit_id=audit_id,
                footnote=numbers[citation.source.key] if citation.source and not problem else None,
                marker_offset=placements[position][0] if position in placements else None,
                problem=problem,
            )
        )
    markers = group_markers(
        (*placements[r.position], r.footnote)
        for r in resolved
        if r.footnote is not None and r.position in placements
    )
    return CitedAnswer(
        answer=answer,
        references=tuple(resolved),
        sources=tuple(sources),
        markers=markers,
        claims=claims_of(resolved, [m.offset for m in markers]),
        tool_attributions=_tool_attributions([resolved[position] for *_, position in shown]),
        tool_calls=tuple(tool_calls),
    )


def _problem(citation: Citation, answer_length: float) -> str:
    """Return why a citation cannot be shown, or "" when it can."""
    start, end = citation.start, citation.end
    if citation.problem:
        return citation.problem
    if citation.unplaced:
        return "" if citation.source is not None else "an unplaced citation names no source"
    if start is None:
        return "start is not an integer"
    if end is None:
        return "end is not an integer"
    if start < 0:
        return f"start {start} is negative"
    if start >= end:
        return f"empty span: start {start} is not before end {end}"
    if end > answer_length:
        return f"end {end} is beyond the answer ({answer_length} characters)"
    return ""


def _tool_call_link(citation: Citation, calls_by_id: dict[str, int]) -> tuple[str, int | None]:
    """Return the audit id to show and the position of the tool call it names, if any.

    The first id that names a call wins; the provider notes that an id sometimes matches no
    call, and then the first id is kept for the record.
    """
    for audit_id in citation.audit_ids:
        if audit_id in calls_by_id:
            return audit_id, calls_by_id[audit_id]
    return (citation.audit_ids[0] if citation.audit_ids else ""), None


def _tool_attributions(shown: Sequence[ResolvedReference]) -> tuple[ToolAttribution, ...]:
    """Group tool-level citations by tool call (else tool name), in reading order."""
    groups: dict[tuple[Any, ...], list[ResolvedReference]] = {}
    for ref in shown:
        if ref.is_tool_level:
            key = (
                ("call", ref.tool_call_position)
                if ref.tool_call_position is not None
                else ("tool", ref.tool_name)
            )
            groups.setdefault(key, []).append(ref)
    return tuple(
        ToolAttribution(
            tool_name=refs[0].tool_name,
            audit_id=refs[0].audit_id,
            tool_call=refs[0].tool_call,
            spans=tuple((r.start, r.end) for r in refs),
        )
        for refs in groups.values()
    )
