"""Reads: chats for a user (who may read one and who may write: `ChatQuerySet`), the visible
branch of a chat, the versions of a question, the event log after a cursor."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, Q, QuerySet
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
    """A turn on the visible branch, with its place among its siblings, the versions of its
    question ("2 / 3")."""

    turn: Turn
    position: int  # 1-based among siblings
    siblings: list[int]  # sibling turn ids in creation order, this one included

    @classmethod
    def among(cls, turn: Turn, siblings: list[int]) -> BranchTurn:
        """The turn placed among its siblings' ids (`turn_versions`, in their order)."""
        return cls(turn, siblings.index(turn.pk) + 1, siblings)

    @property
    def previous_sibling(self) -> int | None:
        return self.siblings[self.position - 2] if self.position > 1 else None

    @property
    def next_sibling(self) -> int | None:
        return self.siblings[self.position] if self.position < len(self.siblings) else None


Tree = dict[int | None, list[Turn]]  # a chat's turns by parent id, each list oldest first

# The order of a question's versions, and of a chat's turns under one parent.
VERSION_ORDER = ("created_at", "id")
FINISHED = tuple(status for status in Turn.Status.values if status != Turn.Status.STREAMING)


def chat_turn_tree(*, chat: Chat) -> Tree:
    """Return children by parent id (None for the first questions), in creation order, each
    turn with its tool calls loaded (the cards show them)."""
    tree: Tree = {}
    turns = Turn.objects.filter(chat=chat).prefetch_related("audit_traces")
    for turn in turns.order_by(*VERSION_ORDER):
        tree.setdefault(turn.parent_id, []).append(turn)
    return tree


def chat_turn_trees(*, chat_ids: list[int]) -> dict[int, Tree]:
    """Return `chat_turn_tree` for each of these chats (chats without turns left out), in one
    query and without the tool calls: what starting a turn reads."""
    return _trees(Turn.objects.filter(chat_id__in=chat_ids).order_by(*VERSION_ORDER))


def _trees(turns: Iterable[Turn]) -> dict[int, Tree]:
    trees: dict[int, Tree] = {}
    for turn in turns:
        trees.setdefault(turn.chat_id, {}).setdefault(turn.parent_id, []).append(turn)
    return trees


def tree_versions(tree: Tree, turn: Turn, *, same_question: bool = False) -> list[Turn]:
    """The versions of `turn`'s question among a chat's turns already read (`tree`), itself
    included when there, oldest first: see `turn_versions`."""
    versions = tree.get(turn.parent_id, [])
    if same_question:
        return [version for version in versions if version.question == turn.question]
    return versions


def turn_versions(
    *,
    turns: Collection[Turn],
    statuses: Collection[str] | None = None,
    asked_by: datetime | None = None,
    same_question: bool = False,
) -> dict[int, list[Turn]]:
    """The versions of each turn's question, by the turn's id, oldest first, in one query.

    A question's versions are the turns of its chat under the same parent: the same place in
    the conversation, asked again by "Edit", "Re-run" or a watch's run (the page's switcher,
    "2 / 3", steps through them). Only those in `statuses` (`FINISHED`: not streaming), made by
    `asked_by` (what a share held when it was made), or asked with the turn's own question
    (`same_question`: a "Re-run" or a watch's run, not an "Edit", which starts another branch).
    """
    trees = _trees(_versions_query(turns, statuses, asked_by).order_by(*VERSION_ORDER))
    return {
        turn.pk: tree_versions(trees.get(turn.chat_id, {}), turn, same_question=same_question)
        for turn in turns
    }


def turn_version_counts(
    *,
    turns: Collection[Turn],
    statuses: Collection[str] | None = None,
    asked_by: datetime | None = None,
    same_question: bool = False,
) -> dict[int, int]:
    """How many versions `turn_versions` finds of each turn's question, counted in one query
    whatever the number of turns (a share's page: its Compare links)."""
    place = ["chat_id", "parent_id", *(["question"] if same_question else [])]
    counts = {
        tuple(row[field] for field in place): row["versions"]
        for row in _versions_query(turns, statuses, asked_by)
        .order_by()
        .values(*place)
        .annotate(versions=Count("id"))
    }
    return {turn.pk: counts.get(tuple(getattr(turn, f) for f in place), 0) for turn in turns}


def _versions_query(
    turns: Collection[Turn], statuses: Collection[str] | None, asked_by: datetime | None
) -> QuerySet[Turn]:
    """The turns of these turns' chats under these turns' parents, by the filters."""
    places = Q(pk__in=[])
    for chat_id in {turn.chat_id for turn in turns}:
        parents = {turn.parent_id for turn in turns if turn.chat_id == chat_id}
        under = Q(parent_id__in=parents - {None})
        if None in parents:
            under |= Q(parent__isnull=True)
        places |= Q(chat_id=chat_id) & under
    query = Turn.objects.filter(places)
    if statuses is not None:
        query = query.filter(status__in=statuses)
    if asked_by is not None:
        query = query.filter(created_at__lte=asked_by)
    return query


def branch_leaf(tree: Tree, turn: Turn) -> Turn:
    """Follow the newest child down from `turn` to a leaf."""
    while tree.get(turn.pk):
        turn = tree[turn.pk][-1]
    return turn


def chat_branch(*, chat: Chat, tree: Tree | None = None) -> list[BranchTurn]:
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
    return [BranchTurn.among(turn, _ids(tree_versions(tree, turn))) for turn in path]


def branch_turn(*, turn: Turn) -> BranchTurn:
    """Return one turn with its siblings, for rendering a single card."""
    return branch_turns(turns=[turn])[0]


def branch_turns(*, turns: Collection[Turn]) -> list[BranchTurn]:
    """Return each turn with its siblings, in order, in one query: cards rendered together."""
    versions = turn_versions(turns=turns)
    return [BranchTurn.among(turn, _ids(versions[turn.pk])) for turn in turns]


def _ids(turns: list[Turn]) -> list[int]:
    return [turn.pk for turn in turns]


def turn_in_chat(*, turn_id: int, chat_id: int) -> bool:
    return Turn.objects.filter(pk=turn_id, chat_id=chat_id).exists()


def chat_turns_to_sync(*, chat_id: int, known: list[int], newer_than: int) -> list[Turn]:
    """Return the chat's turns a page knows (`known`) or has never seen (ids > `newer_than`)."""
    known_turns = Turn.objects.filter(chat_id=chat_id, pk__in=known)
    newer = Turn.objects.filter(chat_id=chat_id, pk__gt=newer_than)
    return list((known_turns | newer).distinct().select_related("chat").order_by("pk"))


def turn_orphan_ids() -> list[int]:
    """The streaming turns whose run stopped renewing its lease (its process died)."""
    return list(Turn.objects.orphaned().values_list("pk", flat=True))


def turn_logged_events(*, turn_id: int) -> list[dict[str, Any]]:
    """The turn's logged events as stored, in order: what a transcript is rebuilt from."""
    rows = TurnEvent.objects.filter(turn_id=turn_id).order_by("seq")
    return list(rows.values_list("data", flat=True))


def turn_events_after(*, turn_id: int, after_seq: int, limit: int = 5000) -> list[EventView]:
    """Return the page's view of the logged events with seq > after_seq, in order."""
    rows = (
        TurnEvent.objects.filter(turn_id=turn_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("seq", "data")[:limit]
    )
    return [stored_event_view(seq, data) for seq, data in rows]
