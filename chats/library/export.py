"""Export a chat's visible branch as JSON: each turn with its cited answer, references, sources,
charts and structured output (what the Markdown export holds too), and every other version of its
question (its siblings: "Edit", "Re-run", a watch's runs)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from chats.models import Chat, Turn
from citations.render import render_json
from citations.selectors import cited_answers_for_turns

EXPORT_FORMAT_VERSION = 1


def export_chat_json(*, chat: Chat, turns: list[Turn]) -> dict[str, Any]:
    """Return the turns as JSON-serialisable data, in the `render_stream --format json` shape.

    Each turn has `version` (its place among its versions, from 1) and `versions`: every
    version of it, itself included, oldest first, each in the same shape without `versions`.
    """
    parents = {turn.parent_id for turn in turns}
    siblings: dict[int | None, list[Turn]] = {}
    for sibling in Turn.objects.filter(chat=chat).order_by("created_at", "id"):
        if sibling.parent_id in parents:
            siblings.setdefault(sibling.parent_id, []).append(sibling)
    every = {t.pk: t for group in siblings.values() for t in group} | {t.pk: t for t in turns}
    cited = cited_answers_for_turns(list(every.values()))

    def entry(turn: Turn) -> dict[str, Any]:
        return {
            "id": turn.pk,
            "parent_id": turn.parent_id,
            "question": turn.question,
            "research_effort": turn.research_effort,
            "status": turn.status,
            "error": turn.error,
            "created_at": turn.created_at.isoformat(),
            "finished_at": turn.finished_at.isoformat() if turn.finished_at else None,
            **render_json(cited[turn.pk]),
            "charts": [exported_chart(chart) for chart in turn.charts],
            "structured_output": turn.structured_output,
        }

    exported = []
    for turn in turns:
        versions = siblings.get(turn.parent_id) or [turn]
        ids = [version.pk for version in versions]
        exported.append(
            {
                **entry(turn),
                "version": ids.index(turn.pk) + 1 if turn.pk in ids else 1,
                "versions": [entry(version) for version in versions],
            }
        )
    return {
        "format_version": EXPORT_FORMAT_VERSION,
        "exported_at": timezone.now().isoformat(),
        "chat": {"id": chat.pk, "title": chat.title, "created_at": chat.created_at.isoformat()},
        "turns": exported,
    }


def exported_chart(chart: dict[str, Any]) -> dict[str, Any]:
    """A chart as the turn stores it (its safe spec, or the note saying why it is not drawn, and
    its data table), without `block`, which only places it on the page."""
    return {key: value for key, value in chart.items() if key != "block"}
