"""A team "research" of alice (its owner) and bob, a chat of alice's shared with it, and carol,
who is in no team."""

from __future__ import annotations

import pytest
from django.test import Client as HttpClient

from chats.models import Chat, Turn
from chats.teams.models import Team, TeamMembership
from chats.teams.services import team_chat_share
from tests.chats.watch.answers import answered_turn


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="pw-carol-123")


@pytest.fixture
def research(alice, bob):
    team = Team.objects.create(name="research")
    TeamMembership.objects.create(team=team, user=alice, role=TeamMembership.Role.OWNER)
    TeamMembership.objects.create(team=team, user=bob)
    return team


@pytest.fixture
def shared_chat(alice, research) -> Chat:
    """alice's chat with one finished answer (the Research Agent's, with a checkpoint),
    shared with "research"."""
    chat = Chat.objects.create(owner=alice, title="Revenue at Acme")
    turn = answered_turn(chat)
    Turn.objects.filter(pk=turn.pk).update(upstream_chat_id="agent-chat-of-alice")
    team_chat_share(chat=chat, team=research, user=alice)
    return chat


@pytest.fixture
def shared_turn(shared_chat) -> Turn:
    return shared_chat.turns.get()


def browser_of(user) -> HttpClient:
    client = HttpClient()
    client.force_login(user)
    return client
