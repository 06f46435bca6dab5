"""Sharing a chat: a read-only snapshot of its visible branch behind an unguessable link."""

from __future__ import annotations

import re
from http import HTTPStatus

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
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


def chat_of_rerun_turns(owner, turns: int) -> Chat:
    """A chat of `turns` follow-ups, each asked twice (a "Re-run"): its branch is the re-runs."""
    chat = Chat.objects.create(owner=owner)
    for number in range(turns):
        asked = finished_turn(chat, f"Question {number}?", f"Answer {number}.")
        finished_turn(chat, asked.question, f"Answer {number} again.", parent=asked.parent)
    return chat


def test_the_shared_page_reads_as_many_queries_for_8_turns_as_for_2(client, analyst, colleague):
    client.force_login(colleague)
    client.get(reverse("usage"))  # the session's first request saves it: not the page's reads
    queries = []
    for turns in (2, 8):
        share = chat_share(chat=chat_of_rerun_turns(analyst, turns), user=analyst)
        with CaptureQueriesContext(connection) as read:
            page = client.get(reverse("chat_shared", args=[share.token])).content.decode()
        assert page.count("the 2 versions of this question") == turns
        queries.append(len(read.captured_queries))
    assert queries[0] == queries[1]


def test_a_shares_compare_holds_no_question_an_edit_replaced(client, analyst, colleague):
    """A share shows one branch: an "Edit" asked another question, on another branch."""
    chat = Chat.objects.create(owner=analyst, title="Revenue")
    replaced = finished_turn(chat, "How did revenue do?", "Revenue rose 12%.", parent=None)
    edited = finished_turn(chat, "How did revenue do in 2025?", "It rose 14%.", parent=None)
    rerun = finished_turn(chat, edited.question, "It rose 15%.", parent=None)
    share = chat_share(chat=chat, user=analyst)
    Chat.objects.filter(pk=chat.pk).update(title="Renamed since")
    client.force_login(colleague)

    shared = client.get(reverse("chat_shared", args=[share.token])).content.decode()
    assert "the 2 versions of this question" in shared
    compare_url = reverse("shared_turn_compare", args=[share.token, rerun.pk])
    for asked in (compare_url, f"{compare_url}?a={replaced.pk}", f"{compare_url}?b={replaced.pk}"):
        page = client.get(asked).content.decode()
        assert "<del>14%</del> → <ins>15%</ins>" in page
        assert "How did revenue do?" not in page and "12%" not in page
        assert "Compare versions · Revenue<" in page  # the share's title, not the chat's now
        assert f'value="{replaced.pk}"' not in page
    versions = [str(edited.pk), str(rerun.pk)]
    assert re.findall(r'<option value="(\d+)"', page) == versions * 2  # Older, Newer
