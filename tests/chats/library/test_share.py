"""Sharing a chat: a read-only snapshot of its visible branch behind an unguessable link."""

from __future__ import annotations

import re
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.library.services import chat_share
from chats.models import Chat, ChatShare, Turn
from tests.chats.library_factories import bigdata_source, finished_turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def analyst(django_user_model):
    return django_user_model.objects.create_user("analyst", password="pw-analyst-123")


@pytest.fixture
def colleague(django_user_model):
    return django_user_model.objects.create_user("colleague", password="pw-colleague-123")


@pytest.fixture
def chat(analyst):
    chat = Chat.objects.create(owner=analyst, title="Nickel supply")
    finished_turn(
        chat,
        "Is nickel supply tight?",
        "Supply is tight this year.",
        sources=[bigdata_source("ni-1", name="Metal Bulletin", headline="Nickel mines idle")],
    )
    return chat


def share_url(client, chat) -> str:
    """Press Share on the chat page and return what the "Share link" field holds."""
    response = client.post(reverse("chat_share", args=[chat.pk]), follow=True)
    page = response.content.decode()
    assert '<label for="share-link">Share link</label>' in page
    return re.search(r'id="share-link" value="([^"]+)"', page).group(1)


def test_share_shows_a_link_with_an_unguessable_token(client, analyst, chat):
    client.force_login(analyst)

    url = share_url(client, chat)

    share = ChatShare.objects.get(chat=chat)
    assert url == f"http://testserver/shared/{share.token}/"
    assert len(share.token) >= 32
    page = client.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "Stop sharing" in page and ">Share</button>" not in page


def test_another_signed_in_user_reads_the_cited_answer_without_any_actions(
    client, analyst, colleague, chat
):
    client.force_login(analyst)
    url = share_url(client, chat)
    client.force_login(colleague)

    response = client.get(url)

    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    turn = chat.turns.get()
    assert "Is nickel supply tight?" in page
    assert turn.answer_html in page  # the stored cited answer: footnotes and its Sources
    assert "Metal Bulletin" in page and 'title="Nickel mines idle"' in page
    assert "Shared by analyst" in page
    for absent in ['id="message"', "<textarea", "Continue from here", "data-action", "chat.js"]:
        assert absent not in page, absent
    assert "<form" not in page.split("</header>", 1)[1]  # none but the header's Log out
    assert response["Referrer-Policy"] == "no-referrer"


def test_signed_out_visitors_are_sent_to_log_in(client, analyst, chat):
    share = chat_share(chat=chat, user=analyst)

    response = client.get(reverse("chat_shared", args=[share.token]))

    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"].startswith(reverse("login"))


def test_stop_sharing_makes_the_link_404_and_sharing_again_makes_a_new_one(
    client, analyst, colleague, chat
):
    client.force_login(analyst)
    first = share_url(client, chat)
    client.post(reverse("chat_unshare", args=[chat.pk]))
    page = client.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "Share link" not in page

    client.force_login(colleague)
    assert client.get(first).status_code == HTTPStatus.NOT_FOUND

    client.force_login(analyst)
    second = share_url(client, chat)
    assert second != first
    client.force_login(colleague)
    assert client.get(first).status_code == HTTPStatus.NOT_FOUND
    assert client.get(second).status_code == HTTPStatus.OK


def test_a_share_is_a_snapshot_that_sharing_again_updates_under_the_same_link(
    client, analyst, colleague, chat
):
    client.force_login(analyst)
    url = share_url(client, chat)
    finished_turn(chat, "And cobalt?", "Cobalt is plentiful.")

    client.force_login(colleague)
    assert "Cobalt is plentiful" not in client.get(url).content.decode()

    client.force_login(analyst)
    page = client.get(reverse("chat_detail", args=[chat.pk])).content.decode()
    assert "Update the shared copy" in page
    assert share_url(client, chat) == url
    client.force_login(colleague)
    assert "Cobalt is plentiful" in client.get(url).content.decode()


def test_the_title_is_part_of_the_snapshot_until_shared_again(client, analyst, colleague, chat):
    client.force_login(analyst)
    url = share_url(client, chat)
    client.post(reverse("chat_rename", args=[chat.pk]), {"title": "Cobalt glut"})

    client.force_login(colleague)
    page = client.get(url).content.decode()
    assert "<h1>Nickel supply</h1>" in page and "Cobalt glut" not in page

    client.force_login(analyst)
    share_url(client, chat)  # "Update the shared copy"
    client.force_login(colleague)
    page = client.get(url).content.decode()
    assert "<h1>Cobalt glut</h1>" in page and "Nickel supply" not in page


def test_only_the_visible_branch_and_nothing_else_of_the_sharer(client, analyst, colleague, chat):
    first = chat.turns.get()
    finished_turn(chat, "Edited: is nickel scarce?", "An answer on another branch.", parent=None)
    Chat.objects.filter(pk=chat.pk).update(active_turn=first)  # back on the first branch
    secret = Chat.objects.create(owner=analyst, title="Private strategy")
    finished_turn(secret, "Private question", "Private answer.")
    share = chat_share(chat=Chat.objects.get(pk=chat.pk), user=analyst)
    client.force_login(colleague)

    page = client.get(reverse("chat_shared", args=[share.token])).content.decode()

    assert "Supply is tight this year." in page
    assert "another branch" not in page
    assert "Private" not in page and reverse("chat_detail", args=[secret.pk]) not in page
    assert client.get(reverse("chat_detail", args=[chat.pk])).status_code == HTTPStatus.NOT_FOUND


def test_a_streaming_last_turn_is_left_out_of_the_snapshot(analyst, chat):
    first = chat.turns.get()
    Turn.objects.create(chat=chat, parent=first, question="Still thinking?")

    share = chat_share(chat=chat, user=analyst)

    assert share.leaf_turn == first


def test_nothing_to_share_before_an_answer_has_finished(client, analyst):
    chat = Chat.objects.create(owner=analyst)
    client.force_login(analyst)

    response = client.post(reverse("chat_share", args=[chat.pk]))

    assert response.status_code == HTTPStatus.CONFLICT
    assert not ChatShare.objects.exists()


def test_unknown_tokens_are_404(client, colleague):
    client.force_login(colleague)
    assert client.get(reverse("chat_shared", args=["nope"])).status_code == 404


def test_deleting_the_chat_ends_its_share(client, analyst, colleague, chat):
    share = chat_share(chat=chat, user=analyst)
    chat.delete()
    client.force_login(colleague)
    assert client.get(reverse("chat_shared", args=[share.token])).status_code == 404


def test_admin_lists_shares_without_their_full_token(admin_client, analyst, chat):
    share = chat_share(chat=chat, user=analyst)

    response = admin_client.get(reverse("admin:chats_chatshare_changelist"))

    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    assert "Nickel supply" in page and f"/shared/{share.token[:6]}…" in page
    assert share.token not in page
    detail = admin_client.get(reverse("admin:chats_chatshare_change", args=[share.pk]))
    assert share.token not in detail.content.decode()
