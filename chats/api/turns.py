"""What the API says of a chat and a turn: the stored turn, its cited answer as the page reads
it back (`citations.selectors`), and its Markdown as "Export Markdown" writes it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from chats.answer.export import export_turns_markdown
from chats.library.export import exported_chart
from chats.models import Chat, Turn
from chats.selectors import chat_branch, chat_turn_tree
from chats.usage.tokens import turn_tokens
from citations.evidence import checks_summary
from citations.resolve import CitedAnswer, resolve_citations
from citations.selectors import cited_answer_for_turn


def chat_json(request: HttpRequest, chat: Chat) -> dict[str, Any]:
    return {
        "id": chat.pk,
        "title": chat.title,
        "agent": chat.provider,
        "pinned": chat.pinned,
        "archived": chat.archived_at is not None,
        "created_at": chat.created_at,
        "updated_at": chat.updated_at,
        "url": request.build_absolute_uri(reverse("chat_detail", args=[chat.pk])),
    }


def chat_detail_json(request: HttpRequest, chat: Chat) -> dict[str, Any]:
    """The chat, every turn of it (oldest first) and the branch the page shows (database)."""
    tree = chat_turn_tree(chat=chat)
    turns = sorted((t for children in tree.values() for t in children), key=_created)
    return {
        **chat_json(request, chat),
        "turns": [turn_summary_json(request, turn) for turn in turns],
        "branch": [item.turn.pk for item in chat_branch(chat=chat, tree=tree)],
    }


def _created(turn: Turn) -> tuple:
    return (turn.created_at, turn.pk)


def turn_summary_json(request: HttpRequest, turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.pk,
        "parent_turn_id": turn.parent_id,
        "question": turn.question,
        "status": turn.status,
        "created_at": turn.created_at,
        "finished_at": turn.finished_at,
        "url": turn_url(request, turn.pk),
    }


def turn_url(request: HttpRequest, turn_id: int) -> str:
    return request.build_absolute_uri(f"/api/v1/turns/{turn_id}")


def turn_json(request: HttpRequest, turn: Turn) -> dict[str, Any]:
    """Everything the API says of one turn (database: its references and tool calls, once it
    has ended: a streaming turn has none stored yet)."""
    cited = (
        cited_answer_for_turn(turn)
        if turn.is_finished
        else resolve_citations(answer=turn.answer_text, citations=[])
    )
    return {
        **turn_summary_json(request, turn),
        "chat_id": turn.chat_id,
        "research_effort": turn.research_effort,
        "error": turn.error,
        "answer_text": turn.answer_text,
        "answer_markdown": export_turns_markdown([turn]) if turn.is_finished else "",
        "checks_summary": checks_summary(cited),
        "citations": citations_json(cited),
        "sources": sources_json(cited),
        "charts": [exported_chart(chart) for chart in turn.charts],
        "structured_output": turn.structured_output,
        "usage": [
            {
                "model": tokens.model,
                "input_tokens": tokens.input,
                "cached_tokens": tokens.cached,
                "output_tokens": tokens.output,
            }
            for tokens in turn_tokens(turn.consumption)
        ],
        "options": turn.options,
        "events_url": turn_url(request, turn.pk) + "/events",
    }


def citations_json(cited: CitedAnswer) -> list[dict[str, Any]]:
    """One entry per claim and footnote: the claim's text and offsets, the footnote's source,
    and the claim's figure check."""
    keys = {source.number: source.key for source in cited.sources}
    return [
        {
            "text": cited.answer[claim.start : claim.end],
            "start": claim.start,
            "end": claim.end,
            "footnote": number,
            "source_id": keys.get(number, ""),
            "check": (
                {"status": claim.check.status, "message": claim.check.message}
                if claim.check
                else None
            ),
        }
        for claim in cited.claims
        for number in claim.footnotes
    ]


def sources_json(cited: CitedAnswer) -> list[dict[str, Any]]:
    return [
        {
            "id": source.key,
            "footnote": source.number,
            "title": source.headline or source.label,
            "label": source.label,
            "url": source.url,
            "publisher": source.name,
            "published_on": source.published_on.isoformat() if source.published_on else None,
            "placed": source.placed,
        }
        for source in cited.sources
    ]
