"""Read cited answers back, rebuilt from the stored raw data by the resolver the live run uses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from django.db.models import QuerySet

from chats.models import Turn

from .models import AuditTrace, Reference, Source
from .resolve import CitedAnswer, resolve_citations


def cited_answer_for_turn(turn: Turn) -> CitedAnswer:
    """Return the turn's cited answer from its answer text, references and traces."""
    return cited_answers_for_turns([turn])[turn.pk]


def cited_answers_for_turns(turns: Sequence[Turn]) -> dict[int, CitedAnswer]:
    """Return each turn's cited answer by pk, in two queries whatever the number of turns."""
    references: dict[int, list] = defaultdict(list)
    traces: dict[int, list] = defaultdict(list)
    turn_ids = [t.pk for t in turns]
    rows = Reference.objects.filter(turn_id__in=turn_ids).order_by("turn_id", "position")
    for turn_id, data in rows.values_list("turn_id", "data"):
        references[turn_id].append(data)
    rows = AuditTrace.objects.filter(turn_id__in=turn_ids).order_by("turn_id", "position")
    for turn_id, data in rows.values_list("turn_id", "data"):
        traces[turn_id].append(data)
    return {
        t.pk: resolve_citations(
            answer=t.answer_text, references=references[t.pk], audit_traces=traces[t.pk]
        )
        for t in turns
    }


def turns_citing_source(source: Source) -> QuerySet[Turn]:
    """Return the turns that show the source as a footnote, each once."""
    return Turn.objects.filter(references__source=source).distinct()
