"""Resolve GROUNDING references against the complete answer: the one place that numbers footnotes.

Pure (no database, no rendering) so that the live run, the stored turn, `render_stream` and the
export all get the same footnotes from the same inputs (seed 000 "Grounding and citations").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from .sources import SourceFields, source_fields, source_key


@dataclass(frozen=True, slots=True)
class Trace:
    """One AUDIT trace (`audit_traces[]` entry), in arrival order."""

    position: int
    tool_id: str
    audit_type: str
    title: str
    data: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class CitedSource(SourceFields):
    """A unique source, numbered; its fields come from its first citation."""

    number: int = 0
    data: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ResolvedReference:
    """One reference as received, judged against the whole answer."""

    position: int
    data: Any = field(repr=False)
    start: int | None
    end: int | None
    tool_name: str
    audit_id: str
    source_key: str | None
    trace: Trace | None
    footnote: int | None
    problem: str

    @property
    def is_valid(self) -> bool:
        return not self.problem

    @property
    def is_tool_level(self) -> bool:
        """True for a valid reference with a null source: it cites a tool's whole result."""
        return self.is_valid and self.source_key is None


@dataclass(frozen=True, slots=True)
class ToolAttribution:
    """The spans one tool call supports, shown as a badge rather than a footnote."""

    tool_name: str
    audit_id: str
    trace: Trace | None
    spans: tuple[tuple[int, int], ...]

    @property
    def title(self) -> str:
        return self.trace.title if self.trace else ""

    @property
    def display_name(self) -> str:
        return self.tool_name or (self.trace.audit_type if self.trace else "") or "tool"


@dataclass(frozen=True, slots=True)
class Marker:
    """Footnote numbers to insert right after `offset` of the answer, ascending."""

    offset: int
    numbers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CitedAnswer:
    answer: str
    references: tuple[ResolvedReference, ...]
    sources: tuple[CitedSource, ...]
    markers: tuple[Marker, ...]
    tool_attributions: tuple[ToolAttribution, ...]
    traces: tuple[Trace, ...]

    @property
    def invalid_references(self) -> list[ResolvedReference]:
        return [r for r in self.references if not r.is_valid]


def resolve_citations(
    *, answer: str, references: Sequence[Any], audit_traces: Sequence[Any]
) -> CitedAnswer:
    """Validate, link, deduplicate and number every reference; call once the answer is complete."""
    traces = tuple(_trace(i, t) for i, t in enumerate(audit_traces) if isinstance(t, dict))
    traces_by_tool_id: dict[str, Trace] = {}
    for trace in traces:
        if trace.tool_id:
            traces_by_tool_id.setdefault(trace.tool_id, trace)

    judged = [_judge(data, len(answer)) for data in references]
    # Seed 000's order: by where the span ends, then where it starts, then arrival.
    shown = sorted((j[1], j[0], position) for position, j in enumerate(judged) if not j[3])
    numbers: dict[str, int] = {}
    sources: list[CitedSource] = []
    for _end, _start, position in shown:
        key = judged[position][2]
        if key is not None and key not in numbers:
            numbers[key] = len(numbers) + 1
            sources.append(_cited_source(numbers[key], references[position]["source"]))

    resolved = tuple(
        _resolved(position, data, judgement, numbers, traces_by_tool_id)
        for position, (data, judgement) in enumerate(zip(references, judged, strict=True))
    )
    return CitedAnswer(
        answer=answer,
        references=resolved,
        sources=tuple(sources),
        markers=_markers(resolved),
        tool_attributions=_tool_attributions([resolved[position] for *_, position in shown]),
        traces=traces,
    )


def _judge(data: Any, answer_length: int) -> tuple[int | None, int | None, str | None, str]:
    """Return a reference's (start, end, source key, problem); the problem is "" when valid."""
    if not isinstance(data, dict):
        return None, None, None, "not an object"
    start, end, source = _int(data.get("start")), _int(data.get("end")), data.get("source")
    key = source_key(source) if isinstance(source, dict) else None
    if start is None:
        problem = "start is not an integer"
    elif end is None:
        problem = "end is not an integer"
    elif start < 0:
        problem = f"start {start} is negative"
    elif start >= end:
        problem = f"empty span: start {start} is not before end {end}"
    elif end > answer_length:
        problem = f"end {end} is beyond the answer ({answer_length} characters)"
    elif source is not None and key is None:
        problem = "source is neither an object nor null"
    else:
        problem = ""
    return start, end, key, problem


def _resolved(
    position: int,
    data: Any,
    judgement: tuple[int | None, int | None, str | None, str],
    numbers: dict[str, int],
    traces_by_tool_id: dict[str, Trace],
) -> ResolvedReference:
    start, end, key, problem = judgement
    fields = data if isinstance(data, dict) else {}
    audit_id, trace = _audit_link(fields, traces_by_tool_id)
    tag = fields.get("tag") if isinstance(fields.get("tag"), dict) else {}
    return ResolvedReference(
        position=position,
        data=data,
        start=start,
        end=end,
        tool_name=_first_text(
            fields.get("tool_name"), fields.get("toolName"), tag.get("tool_name")
        ),
        audit_id=audit_id,
        source_key=key,
        trace=trace,
        footnote=numbers[key] if key is not None and not problem else None,
        problem=problem,
    )


def _audit_link(
    data: dict[str, Any], traces_by_tool_id: dict[str, Trace]
) -> tuple[str, Trace | None]:
    """Return the reference's audit id and the AUDIT trace it names, if any.

    Tries `audit_id`, then camelCase `auditId`, then the older shape's `action_audits_id` and
    `tag.tool_call_id`; the provider notes the id sometimes matches no trace.
    """
    tag = data.get("tag")
    candidates = (
        data.get("audit_id"),
        data.get("auditId"),
        data.get("action_audits_id"),
        tag.get("tool_call_id") if isinstance(tag, dict) else None,
    )
    first = ""
    for candidate in candidates:
        for value in candidate if isinstance(candidate, list) else (candidate,):
            text = _first_text(value)
            if text in traces_by_tool_id:
                return text, traces_by_tool_id[text]
            first = first or text
    return first, None


def _trace(position: int, data: dict[str, Any]) -> Trace:
    query = data.get("query")
    query_text = query.get("text") if isinstance(query, dict) else query
    return Trace(
        position=position,
        tool_id=_first_text(data.get("tool_id"), data.get("toolId")),
        audit_type=_first_text(data.get("audit_type"), data.get("auditType")),
        # MarkdownAuditV1 has a title; SearchAuditV1 has query.text.
        title=" ".join(_first_text(data.get("title"), query_text).split()),
        data=data,
    )


def _cited_source(number: int, source: dict[str, Any]) -> CitedSource:
    shown = source_fields(source)
    return CitedSource(
        **{f.name: getattr(shown, f.name) for f in dataclass_fields(SourceFields)},
        number=number,
        data=source,
    )


def _markers(references: Sequence[ResolvedReference]) -> tuple[Marker, ...]:
    numbers_at: dict[int, set[int]] = {}
    for ref in references:
        if ref.footnote is not None:
            numbers_at.setdefault(ref.end, set()).add(ref.footnote)
    return tuple(Marker(offset, tuple(sorted(numbers_at[offset]))) for offset in sorted(numbers_at))


def _tool_attributions(shown: Sequence[ResolvedReference]) -> tuple[ToolAttribution, ...]:
    """Group tool-level references by tool call (trace, else tool name), in reading order."""
    groups: dict[tuple[Any, ...], list[ResolvedReference]] = {}
    for ref in shown:
        if ref.is_tool_level:
            key = ("trace", ref.trace.position) if ref.trace else ("tool", ref.tool_name)
            groups.setdefault(key, []).append(ref)
    return tuple(
        ToolAttribution(
            tool_name=refs[0].tool_name,
            audit_id=refs[0].audit_id,
            trace=refs[0].trace,
            spans=tuple((r.start, r.end) for r in refs),
        )
        for refs in groups.values()
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _first_text(*values: Any) -> str:
    for value in values:
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return ""
