"""Reads: the sidebar's groups, archived chats, shares and what a share shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import QuerySet, prefetch_related_objects
from django.shortcuts import get_object_or_404
from django.utils import timezone

from chats.models import Chat, ChatShare, Turn
from chats.selectors import FINISHED, turn_version_counts, turn_versions

# The sidebar is for recent work; search finds the rest. Keeps the page small at 10,000 chats.
SIDEBAR_MAX_CHATS = 100


@dataclass
class ChatGroup:
    label: str
    chats: list[Chat] = field(default_factory=list)


def chat_sidebar_for_user(*, user, now: datetime | None = None) -> list[ChatGroup]:
    """Return the user's unarchived chats grouped: Pinned, Today, Previous 7 days, Older."""
    now = timezone.localtime(now)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    groups = {
        "pinned": ChatGroup("Pinned"),
        "today": ChatGroup("Today"),
        "week": ChatGroup("Previous 7 days"),
        "older": ChatGroup("Older"),
    }
    chats = (
        Chat.objects.for_user(user)
        .filter(archived_at__isnull=True)
        .order_by("-pinned", "-updated_at", "-id")[:SIDEBAR_MAX_CHATS]
    )
    for chat in chats:
        if chat.pinned:
            key = "pinned"
        elif chat.updated_at >= today:
            key = "today"
        elif chat.updated_at >= today - timedelta(days=7):
            key = "week"
        else:
            key = "older"
        groups[key].chats.append(chat)
    return [group for group in groups.values() if group.chats]


def chat_list_query_for_user(*, user, archived: bool, title_contains: str = "") -> QuerySet[Chat]:
    """The user's chats, archived or not, whose title holds `title_contains`: a query to page
    through (the API's list)."""
    chats = Chat.objects.for_user(user).filter(archived_at__isnull=not archived)
    return chats.filter(title__icontains=title_contains) if title_contains else chats


def chat_archived_for_user(*, user) -> list[Chat]:
    return list(
        Chat.objects.for_user(user).filter(archived_at__isnull=False).order_by("-archived_at")
    )


def chat_share_active(*, chat: Chat) -> ChatShare | None:
    return ChatShare.objects.active().filter(chat=chat).select_related("leaf_turn").first()


def chat_share_get(*, token: str) -> ChatShare:
    """Return the active share with this token or raise Http404 (also once it is revoked)."""
    return get_object_or_404(
        ChatShare.objects.active().select_related("chat", "created_by"), token=token
    )


def chat_share_turns(*, share: ChatShare) -> list[Turn]:
    """Return what the share shows: the path from the first question to its leaf turn."""
    return turn_path(chat=share.chat, leaf_id=share.leaf_turn_id)


def chat_share_page(*, share: ChatShare) -> list[tuple[Turn, int]]:
    """What the share's page shows: each turn of its path with how many versions of its question
    the share holds (`chat_share_versions`), in a number of queries that does not grow with
    the turns."""
    turns = chat_share_turns(share=share)
    counts = turn_version_counts(turns=turns, **_held_by(share))
    return [(turn, counts[turn.pk]) for turn in turns]


def chat_share_versions(*, share: ChatShare, turns: list[Turn]) -> dict[int, list[Turn]]:
    """The versions of each of these turns (of the share's path) that the share holds: asked
    with the turn's own question (a "Re-run", a watch's run: not an "Edit", which asks another
    question on another branch, which a share does not show), finished by the time it was
    shared."""
    return turn_versions(turns=turns, **_held_by(share))


def _held_by(share: ChatShare) -> dict:
    return {"statuses": FINISHED, "asked_by": share.updated_at, "same_question": True}


def turn_path(*, chat: Chat, leaf_id: int) -> list[Turn]:
    """Return the turns from the first question down to `leaf_id`, within this chat only, with
    their tool calls loaded."""
    by_id = Turn.objects.filter(chat=chat).in_bulk()
    path = []
    turn = by_id.get(leaf_id)
    while turn is not None:
        path.append(turn)
        turn = by_id.get(turn.parent_id)
    prefetch_related_objects(path, "audit_traces")
    return path[::-1]
