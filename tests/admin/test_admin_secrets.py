"""Admin lists filter a secret by its exact value only: no prefix or range oracle on a token."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.models import Chat, ChatShare
from tests.chats.library_factories import finished_turn

pytestmark = pytest.mark.django_db

TOKEN = "aB3-share-token-of-thirty-two-chars"


@pytest.fixture
def share(django_user_model):
    owner = django_user_model.objects.create_user("owner", password="pw-owner-123")
    chat = Chat.objects.create(owner=owner, title="Nickel")
    turn = finished_turn(chat, "Is nickel tight?", "Yes.")
    return ChatShare.objects.create(chat=chat, leaf_turn=turn, created_by=owner, token=TOKEN)


@pytest.fixture
def superuser_client(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-123"))
    return client


SHARES = reverse("admin:chats_chatshare_changelist")


@pytest.mark.parametrize(
    "query",
    ["token__startswith=a", "token__gte=a", "token__contains=share", "token__in=" + TOKEN],
)
def test_a_share_token_cannot_be_filtered_by_part_or_range(superuser_client, share, query):
    response = superuser_client.get(f"{SHARES}?{query}")
    assert response.status_code == HTTPStatus.BAD_REQUEST


def test_a_share_is_found_by_its_whole_token(superuser_client, share):
    for query in (f"token={TOKEN}", f"token__exact={TOKEN}"):
        response = superuser_client.get(f"{SHARES}?{query}")
        assert response.status_code == HTTPStatus.OK
        assert [s.pk for s in response.context["cl"].result_list] == [share.pk]
    missing = superuser_client.get(f"{SHARES}?token=aB3")
    assert list(missing.context["cl"].result_list) == []
