"""Store what an answer cites: its tool calls, its sources (deduplicated) and its references."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField, Value
from django.utils import timezone

from citations.evidence import with_checks
from citations.models import AuditTrace, Reference, Source, SourcePage
from citations.new_rows import insert_rows
from citations.references import Citation, PageRead, SourceDocument, ToolCall
from citations.resolve import CitedAnswer, ResolvedReference, resolve_citations

logger = logging.getLogger(__name__)
_LOGGED_PROBLEMS = 20  # per warning line; the rest are counted


def citations_resolve(
    *, answer: str, citations: Sequence[Citation], tool_calls: Sequence[ToolCall] = ()
) -> CitedAnswer:
    """Judge, number and check the answer's citations: no database, so callers can do it
    before they take any lock."""
    return with_checks(resolve_citations(answer=answer, citations=citations, tool_calls=tool_calls))


@transaction.atomic(savepoint=False)  # inside the caller's transaction: all or nothing
def citations_store_for_turn(
    *,
    turn_id: int,
    answer: str,
    citations: Sequence[Citation],
    tool_calls: Sequence[ToolCall] = (),
    replace_stored: bool = True,
) -> CitedAnswer:
    """Resolve the turn's citations, replace what was stored for it, and return the result.

    Called once the answer is complete, inside the caller's transaction. The caller renders and
    stores the HTML from the returned answer. `replace_stored=False` skips looking for stored
    rows when the caller knows there are none.
    """
    cited = citations_resolve(answer=answer, citations=citations, tool_calls=tool_calls)
    citations_store_for_turns([(turn_id, cited)], replace_stored=replace_stored)
    return cited


@transaction.atomic(savepoint=False)
def citations_store_for_turns(
    turns: Sequence[tuple[int, CitedAnswer]], *, replace_stored: bool = True
) -> None:
    """Store the resolved citations of several turns (answers that ended together), by turn
    id, in the queries of one."""
    if replace_stored:
        turn_ids = [turn_id for turn_id, _ in turns]
        Reference.objects.filter(turn_id__in=turn_ids).delete()
        AuditTrace.objects.filter(turn_id__in=turn_ids).delete()

    traces = AuditTrace.objects.bulk_create(
        AuditTrace(
            turn_id=turn_id,
            position=position,
            tool_id=db_text(call.tool_id, 200),
            audit_type=db_text(call.kind, 100),
            title=db_text(call.title),
            results=[_document_fields(r) for r in call.results],
            data=_json(call.data),
        )
        for turn_id, cited in turns
        for position, call in enumerate(cited.tool_calls)
    )
    trace_ids = {(t.turn_id, t.position): t.pk for t in traces}
    source_ids = _source_ids(s.document for _, cited in turns for s in cited.sources)
    insert_rows(  # nothing refers to a reference: no ids need to come back
        Reference,
        (
            _reference_row(turn_id, ref, source_ids, trace_ids, checks, cited.pages)
            for turn_id, cited in turns
            for checks in [_checks(cited)]
            for ref in cited.references
        ),
    )
    for turn_id, cited in turns:
        _log_invalid(turn_id, cited.invalid_references)


def _checks(cited: CitedAnswer) -> dict[int, dict[str, Any]]:
    """The figure check of each claim, by the offset of its marker."""
    return {c.end: c.check.to_dict() for c in cited.claims if c.check is not None}


def _source_ids(documents: Iterable[SourceDocument]) -> dict[str, int]:
    """Return Source pks by key, creating the missing rows (a concurrent insert is harmless)."""
    by_key = {d.key: d for d in documents}
    ids = dict(Source.objects.filter(key__in=by_key).values_list("key", "pk"))
    # In key order: two processes inserting the same new sources then never wait on each other.
    missing = [by_key[key] for key in sorted(by_key) if key not in ids]
    if missing:
        Source.objects.bulk_create((_source_row(d) for d in missing), ignore_conflicts=True)
        ids.update(Source.objects.filter(key__in=[d.key for d in missing]).values_list("key", "pk"))
    return ids


def _source_row(document: SourceDocument) -> Source:
    return Source(
        key=document.key,
        type=document.type if document.type in Source.Type.values else Source.Type.OTHER,
        name=db_text(document.name, 300),
        headline=db_text(document.headline),
        url=db_text(document.url),
        published_on=document.published_on,
        label=db_text(document.label, 400),
        data=_json(document.data),
    )


def _reference_row(
    turn_id: int,
    ref: ResolvedReference,
    source_ids: dict[str, int],
    trace_ids: dict[tuple[int, int], int],
    checks: dict[int, dict[str, Any]],
    cited_pages: Mapping[str, PageRead],
) -> dict[str, Any]:
    """The reference's row, as `insert_rows` takes it."""
    return {
        "turn_id": turn_id,
        "position": ref.position,
        "start": _db_int(ref.start),
        "end": _db_int(ref.end),
        "tool_name": db_text(ref.tool_name, 200),
        "audit_id": db_text(ref.audit_id, 200),
        # Only a shown reference links its Source, so "cited by" means cited.
        "source_id": source_ids[ref.source_key] if ref.footnote is not None else None,
        "audit_trace_id": trace_ids[turn_id, ref.tool_call_position]
        if ref.tool_call_position is not None
        else None,
        "is_valid": ref.is_valid,
        "problem": db_text(ref.problem, 200),
        "footnote": ref.footnote,
        "passages": _passages(ref),
        "claim_check": checks.get(ref.marker_offset) if ref.marker_offset is not None else None,
        "page": _page(cited_pages, ref),
        "data": _json(ref.data),
    }


def _passages(ref: ResolvedReference) -> list[dict[str, Any]]:
    return [{**p.to_data(), "text": db_text(p.text)} for p in ref.passages]


def _page(pages: Mapping[str, PageRead], ref: ResolvedReference) -> Any:
    """What the site made of the reference's cited page, on a shown reference that has one."""
    read = pages.get(ref.source_key or "") if ref.footnote is not None else None
    if read is None:
        return None
    data = read.to_data()
    data["problem"] = db_text(read.problem, 200)
    return data


@transaction.atomic(savepoint=False)
def citations_store_pages_for_turns(turns: Sequence[tuple[int, CitedAnswer]]) -> None:
    """Store the passages taken from cited pages, what happened to each page and the claims'
    checks again, on the stored references of each turn (`citations.pages.with_pages`), in one
    query and one statement whatever the number of turns."""
    ids = {
        (turn_id, position): pk
        for turn_id, position, pk in Reference.objects.filter(
            turn_id__in=[turn_id for turn_id, _ in turns]
        ).values_list("turn_id", "position", "pk")
    }
    fields = [Reference._meta.get_field(name) for name in ("passages", "claim_check", "page")]
    rows = []
    for turn_id, cited in turns:
        checks = _checks(cited)
        for ref in cited.references:
            pk = ids.get((turn_id, ref.position))
            if pk is None:
                continue
            check = checks.get(ref.marker_offset) if ref.marker_offset is not None else None
            values = (_passages(ref), check, _page(cited.pages, ref))
            rows.append(
                [f.get_db_prep_save(v, connection) for f, v in zip(fields, values, strict=True)]
                + [pk]
            )
    # One statement run for each row: bulk_update's CASE per field and row cost 3x the CPU.
    columns = ", ".join(f"{connection.ops.quote_name(f.column)} = %s" for f in fields)
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {connection.ops.quote_name(Reference._meta.db_table)}"  # noqa: S608
            f" SET {columns} WHERE id = %s",
            rows,
        )


def source_page_save(
    *,
    url: str,
    final_url: str,
    status_code: int | None,
    content_type: str,
    problem: str,
    text: str,
) -> SourcePage:
    """Keep what fetching `url` gave, now, in place of what an earlier fetch gave."""
    page, _ = SourcePage.objects.update_or_create(
        url_sha256=url_digest(url),
        defaults={
            "url": db_text(url),
            "final_url": db_text(final_url),
            "fetched_at": timezone.now(),
            "status_code": status_code,
            "content_type": db_text(content_type, 200),
            "problem": db_text(problem, 200),
            "text": db_text(text),
        },
    )
    return page


def url_digest(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def _document_fields(document: SourceDocument) -> dict[str, Any]:
    """A tool call's result, without the raw object (the trace's own data holds that)."""
    fields = document.to_data()
    fields.pop("data")
    return {k: db_text(v) if isinstance(v, str) else v for k, v in fields.items()}


def _log_invalid(turn_id: int, invalid: list[ResolvedReference]) -> None:
    if not invalid:
        return
    problems = "; ".join(f"#{r.position}: {r.problem}" for r in invalid[:_LOGGED_PROBLEMS])
    hidden = len(invalid) - _LOGGED_PROBLEMS
    more = f"; and {hidden} more" if hidden > 0 else ""
    logger.warning(
        "Turn %s: %d invalid reference(s) kept but not shown: %s%s",
        turn_id,
        len(invalid),
        problems,
        more,
    )


def _json(value: Any) -> Any:
    # A JSON null is stored as JSON null, not as a missing value.
    return Value(None, JSONField()) if value is None else value


def _db_int(value: int | None) -> int | None:
    """Return the offset when it fits an IntegerField column, else None (it is kept in data)."""
    return value if value is not None and -(2**31) <= value < 2**31 else None


def db_text(value: str, max_length: int | None = None) -> str:
    """Return text that any database stores: lone surrogates and NUL replaced, cut to the column."""
    value = value.encode("utf-8", "replace").decode().replace("\x00", "\ufffd")
    return value[:max_length] if max_length else value
