"""Reads: the visible branch, one card's siblings, the log after a cursor, what a page syncs."""

from __future__ import annotations

import pytest

from chats.models import Chat, Turn, TurnEvent
from chats.selectors import (
    FINISHED,
    branch_turn,
    chat_branch,
    chat_find_readable,
    chat_list_for_user,
    chat_turns_to_sync,
    turn_events_after,
    turn_in_chat,
    turn_version_counts,
    turn_versions,
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


def test_the_versions_of_a_question_and_their_filters(user, chat):
    other = Chat.objects.create(owner=user)
    elsewhere = Turn.objects.create(chat=other, question="Q?", status=Turn.Status.COMPLETE)
    asked = Turn.objects.create(chat=chat, question="Q?", status=Turn.Status.COMPLETE)
    edit = Turn.objects.create(chat=chat, question="Q, edited?", status=Turn.Status.FAILED)
    rerun = Turn.objects.create(chat=chat, question="Q?", status=Turn.Status.COMPLETE)
    writing = Turn.objects.create(chat=chat, question="Q?")
    follow = Turn.objects.create(chat=chat, parent=asked, question="F?")
    turns = [asked, follow, elsewhere]

    def ids(**filters) -> dict[int, list[int]]:
        found = turn_versions(turns=turns, **filters)
        counts = turn_version_counts(turns=turns, **filters)
        assert counts == {pk: len(versions) for pk, versions in found.items()}
        return {pk: [version.pk for version in versions] for pk, versions in found.items()}

    assert ids() == {
        asked.pk: [asked.pk, edit.pk, rerun.pk, writing.pk],
        follow.pk: [follow.pk],
        elsewhere.pk: [elsewhere.pk],
    }
    assert ids(statuses=FINISHED)[asked.pk] == [asked.pk, edit.pk, rerun.pk]
    assert ids(statuses=FINISHED, same_question=True)[asked.pk] == [asked.pk, rerun.pk]
    assert ids(asked_by=edit.created_at)[asked.pk] == [asked.pk, edit.pk]
    assert ids(statuses=[Turn.Status.COMPLETE], asked_by=follow.created_at)[follow.pk] == []
