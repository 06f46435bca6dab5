"""Reads: chats for a user (who may read one and who may write: `ChatQuerySet`), the visible
branch of a chat, the event log after a cursor."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists
from django.shortcuts import get_object_or_404

from chats.live.protocol import EventView, stored_event_view
from chats.models import Chat, TeamMembership, Turn, TurnEvent


def chat_list_for_user(*, user) -> list[Chat]:
    return list(Chat.objects.for_user(user).order_by("-updated_at", "-id"))


def chat_get_for_user(*, user, chat_id: int) -> Chat:
    """Return the user's chat or raise Http404: another user's chat does not exist for them."""
    return get_object_or_404(Chat.objects.for_user(user), pk=chat_id)


def turn_get(*, turn_id: int) -> Turn:
    """The turn, with its chat (a caller that has checked whose it is)."""
    return Turn.objects.select_related("chat").get(pk=turn_id)


def turn_get_readable(*, user, turn_id: int) -> Turn:
    """Return a turn of a chat the user may read (theirs, or shared with one of their teams),
    its chat loaded, or raise Http404, as for the chat itself."""
    turns = Turn.objects.select_related("chat").filter(chat__in=Chat.objects.readable_by(user))
    return get_object_or_404(turns, pk=turn_id)


def chat_get_readable(*, user, chat_id: int) -> Chat:
    """Return a chat the user may read (theirs, or shared with one of their teams), or raise
    Http404: a chat they may not read does not exist for them. Writes use `chat_get_for_user`.

    `reader_in_teams` says whether the user is in any team (in the same query): the chat page
    asks nothing about sharing with teams of a user in none."""
    in_teams = Exists(TeamMembership.objects.filter(user=user))
    chats = Chat.objects.readable_by(user).annotate(reader_in_teams=in_teams)
    return get_object_or_404(chats, pk=chat_id)


def chat_find_readable(*, user, chat_id: int) -> Chat | None:
    if not user.is_authenticated:
        return None
    return Chat.objects.readable_by(user).filter(pk=chat_id).first()


def chat_is_readable(*, user_id: int, chat_id: int) -> bool:
    """Whether the user may still read the chat (an open page checks when access changes)."""
    return Chat.objects.readable_by(user_id).filter(pk=chat_id).exists()


@dataclass(frozen=True)
class BranchTurn:
    """A turn on the visible branch, with its place among its siblings ("2 / 3")."""

    turn: Turn
    position: int  # 1-based among siblings
    siblings: list[int]  # sibling turn ids in creation order, this one included

    @property
    def previous_sibling(self) -> int | None:
        return self.siblings[self.position - 2] if self.position > 1 else None

    @property
    def next_sibling(self) -> int | None:
        return self.siblings[self.position] if self.position < len(self.siblings) else None


def chat_turn_tree(*, chat: Chat) -> dict[int | None, list[Turn]]:
    """Return children by parent id (None for the first questions), in creation order, each
    turn with its tool calls loaded (the cards show them)."""
    tree: dict[int | None, list[Turn]] = {}
    turns = Turn.objects.filter(chat=chat).prefetch_related("audit_traces")
    for turn in turns.order_by("created_at", "id"):
        tree.setdefault(turn.parent_id, []).append(turn)
    return tree


def chat_turn_trees(*, chat_ids: list[int]) -> dict[int, dict[int | None, list[Turn]]]:
    """Return `chat_turn_tree` for each of these chats (chats without turns left out), in one
    query and without the tool calls: what starting a turn reads."""
    trees: dict[int, dict[int | None, list[Turn]]] = {}
    for turn in Turn.objects.filter(chat_id__in=chat_ids).order_by("created_at", "id"):
        trees.setdefault(turn.chat_id, {}).setdefault(turn.parent_id, []).append(turn)
    return trees


def branch_leaf(tree: dict[int | None, list[Turn]], turn: Turn) -> Turn:
    """Follow the newest child down from `turn` to a leaf."""
    while tree.get(turn.pk):
        turn = tree[turn.pk][-1]
    return turn


def chat_branch(
    *, chat: Chat, tree: dict[int | None, list[Turn]] | None = None
) -> list[BranchTurn]:
    """Return the visible branch, root first: the path to the chat's active turn.

    The page, its Markdown download and `export_chat` all show this branch.
    """
    tree = tree if tree is not None else chat_turn_tree(chat=chat)
    by_id = {t.pk: t for children in tree.values() for t in children}
    leaf = by_id.get(chat.active_turn_id)
    if leaf is None:  # no choice made yet: the branch of the newest turn
        if not by_id:
            return []
        leaf = max(by_id.values(), key=lambda t: (t.created_at, t.pk))
    path = []
    turn: Turn | None = leaf
    while turn is not None:
        path.append(turn)
        turn = by_id.get(turn.parent_id)
    path.reverse()
    branch = []
    for turn in path:
        siblings = [t.pk for t in tree[turn.parent_id]]
        branch.append(BranchTurn(turn, siblings.index(turn.pk) + 1, siblings))
    return branch


def branch_turn(*, turn: Turn) -> BranchTurn:
    """Return one turn with its siblings, for rendering a single card."""
    siblings = list(
        Turn.objects.filter(chat_id=turn.chat_id, parent_id=turn.parent_id)
        .order_by("created_at", "id")
        .values_list("pk", flat=True)
    )
    return BranchTurn(turn, siblings.index(turn.pk) + 1, siblings)


def turn_in_chat(*, turn_id: int, chat_id: int) -> bool:
    return Turn.objects.filter(pk=turn_id, chat_id=chat_id).exists()


def chat_turns_to_sync(*, chat_id: int, known: list[int], newer_than: int) -> list[Turn]:
    """Return the chat's turns a page knows (`known`) or has never seen (ids > `newer_than`)."""
    known_turns = Turn.objects.filter(chat_id=chat_id, pk__in=known)
    newer = Turn.objects.filter(chat_id=chat_id, pk__gt=newer_than)
    return list((known_turns | newer).distinct().select_related("chat").order_by("pk"))


def turn_events_after(*, turn_id: int, after_seq: int, limit: int = 5000) -> list[EventView]:
    """Return the page's view of the logged events with seq > after_seq, in order."""
    rows = (
        TurnEvent.objects.filter(turn_id=turn_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("seq", "data")[:limit]
    )
    return [stored_event_view(seq, data) for seq, data in rows]
