"""The websocket of a chat shared with a team: members follow it live, read-only; anyone else is
refused; a member who leaves, or whose team no longer has the chat, is closed at once."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from chats.models import Turn
from chats.teams.services import team_chat_unshare, team_member_remove
from demo_agent.scripted import Reply, answer_stream
from tests.chats.conftest import events_of
from tests.chats.pages.test_consumer import ask, expect_refusal

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_member_follows_the_owners_new_answer_live(
    connect, alice, bob, shared_chat, upstream
):
    upstream.queue(Reply.events(*answer_stream("Margins widened to 31%.", checkpoint="ckpt-2")))
    reader = await connect(bob, shared_chat)
    await reader.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    owner = await connect(alice, shared_chat)
    turn_id = await ask(owner, "And margins?")
    frames = await reader.receive_until("turn.finished", turn_id=turn_id)
    assert any(f["type"] == "turn.started" and f["turn_id"] == turn_id for f in frames)
    streamed = "".join(e["content"] for e in events_of(frames, turn_id) if e["type"] == "ANSWER")
    assert streamed == "Margins widened to 31%."
    assert frames[-1]["status"] == "complete"


async def test_a_member_cannot_ask_stop_or_rerun(connect, bob, shared_chat, shared_turn, upstream):
    reader = await connect(bob, shared_chat)
    for frame in (
        {"type": "ask", "message": "Mine?", "research_effort": "standard"},
        {"type": "stop", "turn_id": shared_turn.pk},
        {"type": "rerun", "turn_id": shared_turn.pk},
    ):
        await reader.send(frame)
        refused = await reader.receive()
        assert (refused["type"], refused["code"]) == ("error", "read_only")
    assert await Turn.objects.acount() == 1
    assert upstream.requests == []


async def test_someone_in_no_team_is_closed_with_4404(connect, carol, shared_chat):
    client = await connect(carol, shared_chat)
    await expect_refusal(client, "not_found", 4404)


async def test_removing_a_member_closes_their_page(connect, alice, bob, shared_chat, research):
    reader = await connect(bob, shared_chat)
    owner = await connect(alice, shared_chat)
    await sync_to_async(team_member_remove)(team=research, by=alice, user_id=bob.pk)
    frame = await expect_refusal(reader, "not_found", 4404)
    assert frame["message"] == "This chat is no longer shared with you."
    await owner.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    assert (await owner.receive())["type"] == "turn.started"  # the owner's page stays open


async def test_stopping_sharing_closes_the_members_pages(connect, bob, shared_chat, research):
    reader = await connect(bob, shared_chat)
    await sync_to_async(team_chat_unshare)(chat=shared_chat, team=research)
    await expect_refusal(reader, "not_found", 4404)


async def test_a_team_deleted_in_the_admin_closes_its_members_pages(
    connect, bob, shared_chat, research, django_user_model
):
    from django.test import Client as HttpClient
    from django.urls import reverse

    admin = await django_user_model.objects.acreate_superuser("root", password="pw-root-123")
    reader = await connect(bob, shared_chat)
    http = HttpClient()
    await sync_to_async(http.force_login)(admin)
    url = reverse("admin:chats_team_delete", args=[research.pk])
    response = await sync_to_async(http.post)(url, {"post": "yes"})
    assert response.status_code == 302
    await expect_refusal(reader, "not_found", 4404)


async def test_a_group_gone_from_the_providers_claim_closes_the_members_page(
    connect, bob, shared_chat, research
):
    from chats.teams.models import TeamMembership
    from chats.teams.services import team_memberships_sync

    await TeamMembership.objects.filter(team=research, user=bob).aupdate(from_provider=True)
    reader = await connect(bob, shared_chat)
    await sync_to_async(team_memberships_sync)(user=bob, groups=["another-desk"])
    await expect_refusal(reader, "not_found", 4404)


async def test_sharing_stopped_just_after_the_page_was_let_in_still_closes_it(
    connect, bob, shared_chat, research, monkeypatch
):
    """The access check and the page's joining its user's group are not one step: a share
    withdrawn between them must still reach the page."""
    from chats.pages import consumer

    let_in = consumer._open_pages

    def let_in_then_unshare(opens):
        chats = let_in(opens)
        team_chat_unshare(chat=shared_chat, team=research)  # tells the user's pages at once
        return chats

    monkeypatch.setattr(consumer, "_open_pages", let_in_then_unshare)
    reader = await connect(bob, shared_chat)
    await expect_refusal(reader, "not_found", 4404)
