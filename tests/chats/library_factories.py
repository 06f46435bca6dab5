"""Finished turns made straight through the ORM and the citation services, for library tests."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from chats.agent.providers import bigdata as bigdata_adapter
from chats.library.search import chat_search_index_update
from chats.models import Chat, Turn
from citations.render_html import render_html
from citations.services import citations_store_for_turn


def bigdata_source(doc_id: str, *, name: str = "Reuters", headline: str = "") -> dict:
    return {
        "type": "BIGDATA",
        "id": doc_id,
        "hd": headline or f"Headline {doc_id}",
        "src_name": name,
        "ts": "2026-04-16T09:30:00Z",
        "url": f"https://news.example/{doc_id}",
    }


@transaction.atomic
def finished_turn(
    chat: Chat,
    question: str,
    answer: str,
    *,
    sources: list[dict] = (),
    parent: Turn | str | None = "latest",
    at: datetime | None = None,
) -> Turn:
    """Store a complete turn whose whole answer cites each source, as `finish_turn` would.

    It follows the chat's newest turn unless `parent` is given (None: a new first question).
    """
    now = at or timezone.now()
    turn = Turn.objects.create(
        chat=chat,
        parent=chat.turns.order_by("-created_at", "-pk").first() if parent == "latest" else parent,
        question=question,
        status=Turn.Status.COMPLETE,
        answer_text=answer,
        created_at=now,
        finished_at=now,
    )
    references = [
        {"start": 0, "end": len(answer), "tool_name": "search", "audit_id": "a-1", "source": s}
        for s in sources
    ]
    cited = citations_store_for_turn(
        turn_id=turn.pk,
        answer=answer,
        citations=[bigdata_adapter.citation(r) for r in references],
    )
    turn.answer_html = render_html(cited, doc_id=f"t{turn.pk}")
    turn.save(update_fields=["answer_html"])
    chat.active_turn = turn
    chat.title = chat.title or question[:80]
    chat.updated_at = now
    chat.save(update_fields=["active_turn", "title", "updated_at"])
    chat_search_index_update(chat_id=chat.pk)
    return turn
