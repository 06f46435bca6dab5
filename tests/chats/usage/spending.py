"""Usage as the finish records it, made directly: a finished turn and its TurnUsage row."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from django.utils import timezone

from chats.models import Chat, Turn, TurnUsage


def spend(
    user,
    tokens: int,
    *,
    agent: str = "bigdata",
    model: str = "base",
    cost: str | None = None,
    when: datetime | None = None,
    chat: Chat | None = None,
) -> Turn:
    """A finished turn of `user` that used `tokens` (3/4 input, 1/4 output) at `cost` dollars."""
    when = when or timezone.now()
    chat = chat or Chat.objects.create(owner=user, provider=agent, title=f"Chat {tokens}")
    turn = Turn.objects.create(
        chat=chat,
        question="q",
        status=Turn.Status.COMPLETE,
        created_at=when - timedelta(seconds=5),
        finished_at=when,
    )
    TurnUsage.objects.create(
        user=user,
        chat=chat,
        turn=turn,
        agent=agent,
        model=model,
        input_tokens=tokens - tokens // 4,
        output_tokens=tokens // 4,
        tokens=tokens,
        cost=None if cost is None else Decimal(cost),
        created_at=when,
    )
    return turn


def running(user, *, agent: str = "bigdata") -> Turn:
    """A turn of `user` streaming now, in a chat of its own."""
    chat = Chat.objects.create(owner=user, provider=agent)
    return Turn.objects.create(
        chat=chat, question="q", lease_expires_at=timezone.now() + timedelta(minutes=5)
    )
