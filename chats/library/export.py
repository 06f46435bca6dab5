"""Export a chat's visible branch as JSON: each turn with its cited answer, references, sources,
charts and structured output (what the Markdown export holds too), and every other version of its
question (its siblings: "Edit", "Re-run", a watch's runs)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from chats.models import Chat, Turn
from chats.selectors import chat_branch, chat_turn_trees, tree_versions
from citations.render import render_json
from citations.selectors import cited_answers_for_turns

EXPORT_FORMAT_VERSION = 1


def export_chat_json(*, chat: Chat) -> dict[str, Any]:
    """Return the chat's visible branch as JSON-serialisable data, in the `render_stream
    --format json` shape, reading the chat's turns once.

    Each turn has `version` (its place among its versions, from 1) and `versions`: every
    version of it, itself included, oldest first, each in the same shape without `versions`.
    """
    tree = chat_turn_trees(chat_ids=[chat.pk]).get(chat.pk, {})
    branch = chat_branch(chat=chat, tree=tree)
    versions = {item.turn.pk: tree_versions(tree, item.turn) for item in branch}
    cited = cited_answers_for_turns([turn for group in versions.values() for turn in group])

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

    exported = [
        {
            **entry(item.turn),
            "version": item.position,
            "versions": [entry(version) for version in versions[item.turn.pk]],
        }
        for item in branch
    ]
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
