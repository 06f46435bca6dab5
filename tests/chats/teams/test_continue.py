""" "Continue in my chats": a member's own chat that goes on from a shared answer, through the one
way into a turn (`turn_start_many`), leaving the shared chat as it was."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chats.agent.request import ConversationTurn
from chats.models import Chat, Turn
from chats.services import turn_start
from tests.chats.teams.conftest import browser_of

pytestmark = pytest.mark.django_db


def continue_in_my_chats(user, turn: Turn) -> Chat:
    response = browser_of(user).post(
        reverse("chat_continue", args=[turn.chat_id, turn.pk]), HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 200
    return Chat.objects.get(pk=int(response.json()["url"].strip("/").split("/")[-1]))


def test_the_first_question_is_sent_with_the_shared_answers_checkpoint(bob, shared_turn):
    mine = continue_in_my_chats(bob, shared_turn)
    assert (mine.owner, mine.continued_from, mine.title) == (bob, shared_turn, "Revenue at Acme")

    started = turn_start(chat=mine, question="And margins?", research_effort="standard")
    request = started.request
    assert (request.chat_id, request.from_checkpoint_id) == ("agent-chat-of-alice", "ckpt-1")
    assert started.turn.parent is None  # the member's chat holds only their own turns
    assert list(shared_turn.chat.turns.values_list("pk", flat=True)) == [shared_turn.pk]


def test_other_agents_are_sent_the_shared_branch(bob, alice, shared_turn, settings):
    settings.LLMSDK_AGENT_URL = "http://127.0.0.1:9/agent"  # offered; never called here
    Chat.objects.filter(pk=shared_turn.chat_id).update(provider="llm-sdk")
    mine = continue_in_my_chats(bob, Turn.objects.select_related("chat").get(pk=shared_turn.pk))
    assert mine.provider == "llm-sdk"

    started = turn_start(chat=mine, question="And margins?", research_effort="standard")
    assert started.request.history == (
        ConversationTurn(question="How did revenue do?", answer=shared_turn.answer_text),
    )


def test_only_a_reader_continues_and_only_from_a_finished_answer(carol, bob, shared_turn):
    url = reverse("chat_continue", args=[shared_turn.chat_id, shared_turn.pk])
    assert browser_of(carol).post(url).status_code == 404
    Turn.objects.filter(pk=shared_turn.pk).update(status=Turn.Status.FAILED)
    assert browser_of(bob).post(url).status_code == 404
    assert not Chat.objects.filter(owner__in=[bob, carol]).exists()
