"""Read cited answers back from the stored references, by the resolver the live run uses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import fields, replace
from datetime import timedelta
from typing import Any, Protocol

from django.utils import timezone

from citations.claims import ClaimCheck
from citations.compare import AnswerVersion
from citations.evidence import with_stored_checks
from citations.models import AuditTrace, Reference, Source, SourcePage
from citations.references import Citation, PageRead, Passage, SourceDocument, ToolCall
from citations.resolve import CitedAnswer, resolve_citations
from citations.services import url_digest


class AnsweredTurn(Protocol):
    """What the core needs of a turn: its id and its answer text."""

    pk: Any
    answer_text: str


def cited_answer_for_turn(turn: AnsweredTurn) -> CitedAnswer:
    """Return the turn's cited answer from its answer text, references and tool calls."""
    return cited_answers_for_turns([turn])[turn.pk]


def cited_answers_for_turns(turns: Sequence[AnsweredTurn]) -> dict[Any, CitedAnswer]:
    """Return each turn's cited answer by pk, in two queries whatever the number of turns."""
    citations: dict[Any, list[Citation]] = defaultdict(list)
    checks: dict[Any, dict[int, ClaimCheck]] = defaultdict(dict)
    calls: dict[Any, list[ToolCall]] = defaultdict(list)
    turn_ids = [t.pk for t in turns]
    references = (
        Reference.objects.filter(turn_id__in=turn_ids)
        .select_related("source")
        .order_by("turn_id", "position")
    )
    pages: dict[Any, dict[str, PageRead]] = defaultdict(dict)
    for reference in references:
        citations[reference.turn_id].append(_citation(reference))
        read = PageRead.from_data(reference.page) if reference.source else None
        if read is not None:
            pages[reference.turn_id][reference.source.key] = read
        if reference.claim_check:
            position = len(citations[reference.turn_id]) - 1
            checks[reference.turn_id][position] = ClaimCheck.from_dict(reference.claim_check)
    for trace in AuditTrace.objects.filter(turn_id__in=turn_ids).order_by("turn_id", "position"):
        calls[trace.turn_id].append(
            ToolCall(
                tool_id=trace.tool_id,
                kind=trace.audit_type,
                title=trace.title,
                results=tuple(SourceDocument.from_data(r) for r in trace.results),
                data=trace.data,
            )
        )
    answers = {}
    for turn in turns:
        cited = resolve_citations(
            answer=turn.answer_text, citations=citations[turn.pk], tool_calls=calls[turn.pk]
        )
        stored = checks[turn.pk]
        answers[turn.pk] = replace(
            with_stored_checks(
                cited,
                {
                    r.marker_offset: stored[r.position]
                    for r in cited.references
                    if r.position in stored
                },
            ),
            pages=pages[turn.pk],
        )
    return answers


def source_pages_fresh(*, urls: Sequence[str], max_age: timedelta) -> dict[str, SourcePage]:
    """Return the stored fetches of these URLs made within `max_age`, by URL."""
    digests = {url_digest(url): url for url in urls}
    fresh = SourcePage.objects.filter(
        url_sha256__in=digests, fetched_at__gte=timezone.now() - max_age
    )
    return {digests[page.url_sha256]: page for page in fresh}


def answer_versions_to_compare(turns: Sequence[AnsweredTurn]) -> dict[Any, AnswerVersion]:
    """Return what comparing versions reads of each turn, by pk: its text, claims and sources
    from its valid references, in one query of tuples; no passages, checks or tool calls, and
    no resolving (docs/PERFORMANCE.md, "Comparing versions")."""
    spans: dict[Any, list[tuple[int, int, SourceDocument]]] = defaultdict(list)
    documents: dict[int, SourceDocument] = {}
    rows = (
        Reference.objects.filter(turn_id__in=[t.pk for t in turns], is_valid=True)
        .exclude(start=None)
        .exclude(end=None)
        .exclude(source=None)  # a tool-level attribution: a badge, not a footnote
        .values_list(
            "turn_id", "start", "end", "source_id", "source__key", "source__type",
            "source__name", "source__headline", "source__url", "source__published_on",
        )
    )  # fmt: skip
    for turn_id, start, end, source_id, *source in rows:
        document = documents.get(source_id)
        if document is None:
            key, kind, name, headline, url, published_on = source
            document = documents[source_id] = SourceDocument(
                key=key, type=kind, name=name, headline=headline, url=url,
                published_on=published_on,
            )  # fmt: skip
        spans[turn_id].append((start, end, document))
    return {turn.pk: AnswerVersion.from_spans(turn.answer_text, spans[turn.pk]) for turn in turns}


def source_document(source: Source) -> SourceDocument:
    """The document a Source row stores: the row has a column for each of its fields."""
    return SourceDocument(**{f.name: getattr(source, f.name) for f in fields(SourceDocument)})


def _citation(reference: Reference) -> Citation:
    """Rebuild the citation the stored row was resolved from.

    A shown reference links its Source; an invalid one keeps its problem, so it stays unshown
    whatever its columns say. A shown reference without offsets was an unplaced citation.
    """
    unplaced = (
        reference.is_valid
        and reference.source_id is not None
        and reference.start is None
        and reference.end is None
    )
    return Citation(
        start=reference.start,
        end=reference.end,
        source=source_document(reference.source) if reference.source else None,
        tool_name=reference.tool_name,
        audit_ids=(reference.audit_id,) if reference.audit_id else (),
        passages=tuple(p for item in reference.passages if (p := Passage.from_data(item))),
        problem="" if reference.is_valid else (reference.problem or "invalid"),
        data=reference.data,
        unplaced=unplaced,
    )
