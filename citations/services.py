"""Store what an answer cites: its AUDIT traces, its sources (deduplicated) and its references."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import JSONField, Value

from chats.models import Turn

from .models import AuditTrace, Reference, Source
from .resolve import CitedAnswer, CitedSource, ResolvedReference, resolve_citations

logger = logging.getLogger(__name__)
_LOGGED_PROBLEMS = 20  # per warning line; the rest are counted


@transaction.atomic
def citations_store_for_turn(
    *, turn: Turn, answer: str, references: list[Any], audit_traces: list[Any]
) -> CitedAnswer:
    """Resolve the turn's citations, replace what was stored for it, and return the result.

    Called once the answer is complete, inside the caller's transaction. The caller renders and
    stores the HTML from the returned answer.
    """
    cited = resolve_citations(answer=answer, references=references, audit_traces=audit_traces)
    Reference.objects.filter(turn=turn).delete()
    AuditTrace.objects.filter(turn=turn).delete()

    traces = AuditTrace.objects.bulk_create(
        AuditTrace(
            turn=turn,
            position=t.position,
            tool_id=_db_text(t.tool_id, 200),
            audit_type=_db_text(t.audit_type, 100),
            title=_db_text(t.title),
            data=t.data,
        )
        for t in cited.traces
    )
    trace_ids = {t.position: t.pk for t in traces}
    source_ids = _source_ids(cited.sources)
    Reference.objects.bulk_create(
        _reference_row(turn, ref, source_ids, trace_ids) for ref in cited.references
    )
    _log_invalid(turn, cited.invalid_references)
    return cited


def _source_ids(sources: Iterable[CitedSource]) -> dict[str, int]:
    """Return Source pks by key, creating the missing rows (a concurrent insert is harmless)."""
    by_key = {s.key: s for s in sources}
    ids = dict(Source.objects.filter(key__in=by_key).values_list("key", "pk"))
    missing = [s for key, s in by_key.items() if key not in ids]
    if missing:
        Source.objects.bulk_create((_source_row(s) for s in missing), ignore_conflicts=True)
        ids.update(Source.objects.filter(key__in=[s.key for s in missing]).values_list("key", "pk"))
    return ids


def _source_row(source: CitedSource) -> Source:
    return Source(
        key=source.key,
        type=source.type,
        name=_db_text(source.name, 300),
        headline=_db_text(source.headline),
        url=source.url,
        published_on=source.published_on,
        label=_db_text(source.label, 400),
        data=source.data,
    )


def _reference_row(
    turn: Turn, ref: ResolvedReference, source_ids: dict[str, int], trace_ids: dict[int, int]
) -> Reference:
    return Reference(
        turn=turn,
        position=ref.position,
        start=_db_int(ref.start),
        end=_db_int(ref.end),
        tool_name=_db_text(ref.tool_name, 200),
        audit_id=_db_text(ref.audit_id, 200),
        # Only a shown reference links its Source, so "cited by" means cited.
        source_id=source_ids[ref.source_key] if ref.footnote is not None else None,
        audit_trace_id=trace_ids[ref.trace.position] if ref.trace else None,
        is_valid=ref.is_valid,
        problem=_db_text(ref.problem, 200),
        footnote=ref.footnote,
        # A JSON null reference is stored as JSON null, not as a missing value.
        data=Value(None, JSONField()) if ref.data is None else ref.data,
    )


def _log_invalid(turn: Turn, invalid: list[ResolvedReference]) -> None:
    if not invalid:
        return
    problems = "; ".join(f"#{r.position}: {r.problem}" for r in invalid[:_LOGGED_PROBLEMS])
    hidden = len(invalid) - _LOGGED_PROBLEMS
    more = f"; and {hidden} more" if hidden > 0 else ""
    logger.warning(
        "Turn %s: %d invalid reference(s) kept but not shown: %s%s",
        turn.pk,
        len(invalid),
        problems,
        more,
    )


def _db_int(value: int | None) -> int | None:
    """Return the offset when it fits an IntegerField column, else None (it is kept in data)."""
    return value if value is not None and -(2**31) <= value < 2**31 else None


def _db_text(value: str, max_length: int | None = None) -> str:
    """Return text that any database stores: lone surrogates replaced, cut to the column."""
    value = value.encode("utf-8", "replace").decode()
    return value[:max_length] if max_length else value
