"""Reads: the visible branch, one card's siblings, the log after a cursor, what a page syncs."""

from __future__ import annotations

import pytest

from chats.models import Chat, Turn, TurnEvent
from chats.selectors import (
    branch_turn,
    chat_branch,
    chat_find_readable,
    chat_list_for_user,
    chat_turns_to_sync,
    turn_events_after,
    turn_in_chat,
)

pytestmark = pytest.mark.django_db


def test_chats_are_the_owners_only(user, other_user, chat):
    theirs = Chat.objects.create(owner=other_user)
    assert chat_list_for_user(user=user) == [chat]
    assert chat_find_readable(user=user, chat_id=theirs.pk) is None
    assert chat_find_readable(user=user, chat_id=chat.pk) == chat


def test_the_branch_follows_the_active_turn_and_counts_siblings(chat):
    first = Turn.objects.create(chat=chat, question="v1")
    second = Turn.objects.create(chat=chat, question="v2")
    follow = Turn.objects.create(chat=chat, parent=first, question="follow-up")
    assert [b.turn for b in chat_branch(chat=chat)] == [first, follow]  # the newest turn's
    chat.active_turn = second
    chat.save()
    (only,) = chat_branch(chat=chat)
    assert (only.turn, only.position, only.siblings) == (second, 2, [first.pk, second.pk])
    assert (only.previous_sibling, only.next_sibling) == (first.pk, None)
    card = branch_turn(turn=first)
    assert (card.position, card.next_sibling) == (1, second.pk)


def test_events_after_a_cursor_are_the_pages_views_in_order(chat):
    turn = Turn.objects.create(chat=chat, question="q")
    TurnEvent.objects.bulk_create(
        TurnEvent(turn=turn, seq=seq, type="ANSWER", data={"type": "ANSWER", "content": str(seq)})
        for seq in (3, 1, 2)
    )
    views = turn_events_after(turn_id=turn.pk, after_seq=1)
    assert [(v["seq"], v["content"]) for v in views] == [(2, "2"), (3, "3")]
    assert len(turn_events_after(turn_id=turn.pk, after_seq=0, limit=2)) == 2


def test_sync_returns_known_and_newer_turns_of_this_chat_only(chat, other_user):
    old, known, newer = (Turn.objects.create(chat=chat, question=q) for q in "abc")
    foreign = Turn.objects.create(chat=Chat.objects.create(owner=other_user), question="x")
    turns = chat_turns_to_sync(chat_id=chat.pk, known=[known.pk, foreign.pk], newer_than=known.pk)
    assert turns == [known, newer]
    assert old not in turns
    assert turn_in_chat(turn_id=known.pk, chat_id=chat.pk)
    assert not turn_in_chat(turn_id=foreign.pk, chat_id=chat.pk)
