"""Who reads a chat shared with a team, and who writes to it: every reader of a chat answers its
owner and the team's members, and 404 to anyone else; every writer answers its owner only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chats.library.search import chat_search_index_update
from chats.models import Chat, Turn
from chats.teams.services import team_chat_unshare, team_member_remove
from tests.chats.teams.conftest import browser_of

pytestmark = pytest.mark.django_db


def reader_urls(chat: Chat, turn: Turn) -> list[str]:
    """Every page and download that shows a chat."""
    turn_args = [chat.pk, turn.pk]
    return [
        reverse("chat_detail", args=[chat.pk]),
        reverse("chat_export", args=[chat.pk]),
        reverse("chat_export_json", args=[chat.pk]),
        reverse("chat_print", args=[chat.pk]),
        reverse("turn_compare", args=turn_args),
        reverse("turn_markdown", args=turn_args),
        reverse("turn_structured_output", args=[*turn_args, "csv"]),
    ]


def writer_posts(chat: Chat, turn: Turn, team_id: int) -> list[tuple[str, dict]]:
    """Every action that changes a chat: its owner's alone."""
    return [
        (reverse("chat_rename", args=[chat.pk]), {"title": "Mine now"}),
        (reverse("chat_pin", args=[chat.pk]), {"pinned": "1"}),
        (reverse("chat_archive", args=[chat.pk]), {"archived": "1"}),
        (reverse("chat_share", args=[chat.pk]), {}),
        (reverse("chat_unshare", args=[chat.pk]), {}),
        (reverse("chat_branch_select", args=[chat.pk]), {"turn_id": turn.pk}),
        (reverse("watch_new", args=[chat.pk, turn.pk]), {"every": "day", "time_of_day": "09:00"}),
        (reverse("chat_team_share", args=[chat.pk]), {"team_id": team_id}),
        (reverse("chat_team_unshare", args=[chat.pk]), {"team_id": team_id}),
        (reverse("chat_delete", args=[chat.pk]), {}),
    ]


def with_structured_output(turn: Turn) -> Turn:
    Turn.objects.filter(pk=turn.pk).update(structured_output=[{"company": "Acme", "growth": 12}])
    return turn


def test_a_member_reads_every_page_of_the_teams_chat(bob, shared_chat, shared_turn):
    browser = browser_of(bob)
    for url in reader_urls(shared_chat, with_structured_output(shared_turn)):
        assert browser.get(url).status_code == 200, url


def test_the_chat_page_is_read_only_for_a_member(bob, shared_chat):
    page = browser_of(bob).get(reverse("chat_detail", args=[shared_chat.pk])).content.decode()
    assert 'class="chat read-only"' in page
    assert '<form id="composer" class="composer" autocomplete="off" hidden>' in page
    assert "Shared with <strong>research</strong> by alice" in page
    assert "Continue in my chats" in page
    for owner_action in ("Rename", "Delete chat", "Share with team", "Stop sharing"):
        assert owner_action not in page


def test_someone_in_no_team_gets_404_on_every_page(carol, shared_chat, shared_turn):
    browser = browser_of(carol)
    for url in reader_urls(shared_chat, with_structured_output(shared_turn)):
        assert browser.get(url).status_code == 404, url


def test_a_member_changes_nothing_of_the_chat(bob, shared_chat, shared_turn, research):
    browser = browser_of(bob)
    for url, data in writer_posts(shared_chat, shared_turn, research.pk):
        assert browser.post(url, data).status_code == 404, url
    shared_chat.refresh_from_db()
    assert (shared_chat.title, shared_chat.pinned, shared_chat.archived_at) == (
        "Revenue at Acme",
        False,
        None,
    )
    assert not shared_chat.shares.exists()
    assert shared_chat.team_shares.filter(team=research).exists()


def test_the_owner_still_does_everything(alice, shared_chat, shared_turn, research):
    browser = browser_of(alice)
    for url in reader_urls(shared_chat, with_structured_output(shared_turn)):
        assert browser.get(url).status_code == 200, url
    page = browser.get(reverse("chat_detail", args=[shared_chat.pk])).content.decode()
    assert "read-only" not in page
    assert "Stop sharing with research" in page


def test_leaving_the_team_or_an_unshare_ends_access(bob, alice, shared_chat, research):
    url = reverse("chat_detail", args=[shared_chat.pk])
    browser = browser_of(bob)
    assert browser.get(url).status_code == 200
    team_chat_unshare(chat=shared_chat, team=research)
    assert browser.get(url).status_code == 404

    from chats.teams.services import team_chat_share

    team_chat_share(chat=shared_chat, team=research, user=alice)
    assert browser.get(url).status_code == 200
    team_member_remove(team=research, by=bob, user_id=bob.pk)  # bob leaves
    assert browser.get(url).status_code == 404


def test_search_finds_the_teams_chat_marked_for_members_only(bob, carol, shared_chat):
    chat_search_index_update(chat_id=shared_chat.pk)
    search = reverse("chat_search")
    found = browser_of(bob).get(search, {"q": "revenue"}).content.decode()
    assert f'href="{reverse("chat_detail", args=[shared_chat.pk])}"' in found
    assert "Team: research" in found
    nothing = browser_of(carol).get(search, {"q": "revenue", "fragment": "1"}).content.decode()
    assert "No chats match" in nothing
    assert reverse("chat_detail", args=[shared_chat.pk]) not in nothing


def test_the_admin_shows_no_chat_to_a_member_who_is_not_staff(bob, shared_chat):
    response = browser_of(bob).get(reverse("admin:chats_chat_change", args=[shared_chat.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_readers_of_many_chats_at_once_are_the_readers_of_each(
    alice, bob, carol, research, shared_chat
):
    """`readable_pairs` (pages opening together) answers as `readable_by` does, pair by pair:
    the owner, a member of a team it is shared with, not one outside it, nothing for a chat
    that is gone, and a chat of a team that shares none of it."""
    from chats.teams.models import Team, TeamMembership

    others = Team.objects.create(name="others")
    TeamMembership.objects.create(team=others, user=carol)
    private = Chat.objects.create(owner=alice, title="not shared")
    carols = Chat.objects.create(owner=carol)
    users, chats = [alice, bob, carol], [shared_chat, private, carols]
    pairs = [(user.pk, chat.pk) for user in users for chat in chats] + [(alice.pk, 10**9)]
    expected = {
        (user.pk, chat.pk): chat
        for user in users
        for chat in Chat.objects.readable_by(user).filter(pk__in=[c.pk for c in chats])
    }
    assert Chat.objects.readable_pairs(pairs) == expected
    assert set(expected) == {
        (alice.pk, shared_chat.pk),
        (alice.pk, private.pk),
        (bob.pk, shared_chat.pk),
        (carol.pk, carols.pk),
    }
    team_member_remove(team=research, by=alice, user_id=bob.pk)
    assert (bob.pk, shared_chat.pk) not in Chat.objects.readable_pairs(pairs)
