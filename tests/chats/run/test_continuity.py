"""Continue and branch: the exact payloads sent upstream, and the refusals the agent can give."""

from __future__ import annotations

import pytest

from chats.models import Chat, Turn
from chats.selectors import chat_branch
from chats.services import chat_select_branch
from demo_agent.scripted import Reply, answer_stream

pytestmark = pytest.mark.django_db(transaction=True)


def reply(text, checkpoint, chat_id="chat-up-1"):
    return Reply.events(*answer_stream(text, checkpoint=checkpoint), chat_id=chat_id)


async def run(client, message, **extra):
    await client.send({"type": "ask", "message": message, "research_effort": "lite", **extra})
    started = (await client.receive_until("turn.started"))[-1]
    finished = (await client.receive_until("turn.finished", turn_id=started["turn_id"]))[-1]
    return started["turn_id"], finished


async def test_first_question_follow_up_and_branch_payloads(connect, user, chat, upstream):
    upstream.queue(
        reply("A1", "ckpt-1"), reply("A2", "ckpt-2"), reply("A3", "ckpt-3"), reply("A4", "ckpt-4")
    )
    client = await connect(user, chat)

    first, _ = await run(client, "About NVIDIA")
    second, _ = await run(client, "What about its margins?")
    branch, _ = await run(client, "And its debt?", parent_turn_id=first)  # "Continue from here"
    edited, _ = await run(client, "About Microsoft", parent_turn_id=None)  # edit the first question

    assert upstream.payloads == [
        {"message": "About NVIDIA", "research_effort": "lite", "persistence_mode": "enabled"},
        {
            "message": "What about its margins?",
            "research_effort": "lite",
            "chat_id": "chat-up-1",
            "from_checkpoint_id": "ckpt-1",
            "persistence_mode": "enabled",
        },
        {
            "message": "And its debt?",
            "research_effort": "lite",
            "chat_id": "chat-up-1",
            "from_checkpoint_id": "ckpt-1",
            "persistence_mode": "enabled",
        },
        {
            "message": "About Microsoft",
            "research_effort": "lite",
            "chat_id": "chat-up-1",
            "from_checkpoint_id": "INITIAL",
            "persistence_mode": "enabled",
        },
    ]
    turns = {t.pk: t async for t in Turn.objects.all()}
    assert turns[second].parent_id == first
    assert turns[branch].parent_id == first  # a sibling of `second`
    assert turns[edited].parent_id is None  # a sibling of `first`
    assert turns[second].checkpoint_id == "ckpt-2"
    assert turns[branch].from_checkpoint_id == "ckpt-1"


async def test_a_follow_up_after_a_failed_turn_continues_from_the_last_completed_one(
    connect, user, chat, upstream
):
    upstream.queue(reply("A1", "ckpt-1"), Reply.error(503, "busy"), reply("A3", "ckpt-3"))
    client = await connect(user, chat)
    await run(client, "First")
    _, frame = await run(client, "Second")
    assert frame["status"] == "failed"
    await run(client, "Third")
    assert upstream.payloads[2]["from_checkpoint_id"] == "ckpt-1"


async def test_retry_is_a_new_version_of_the_same_question(connect, user, chat, upstream):
    upstream.queue(Reply.error(500, "boom"), reply("Better", "ckpt-9"))
    client = await connect(user, chat)
    await run(client, "Try me")
    _, frame = await run(client, "Try me", parent_turn_id=None)
    assert frame["status"] == "complete"
    assert "1 / 2" not in frame["html"] and "2 / 2" in frame["html"]


@pytest.mark.parametrize(
    ("status", "detail"),
    [(404, "Cannot follow up: chat expired"), (400, "persistence_mode mismatch")],
)
async def test_cannot_continue_offers_a_fresh_conversation_and_keeps_history(
    connect, user, chat, upstream, status, detail
):
    upstream.queue(
        reply("A1", "ckpt-1"),
        Reply.error(status, detail),
        reply("Fresh", "ckpt-n", chat_id="chat-up-2"),
    )
    client = await connect(user, chat)
    first, _ = await run(client, "First")
    refused, frame = await run(client, "Follow-up")
    turn = await Turn.objects.aget(pk=refused)
    assert turn.status == Turn.Status.FAILED
    assert turn.error_kind == "cannot_continue"
    assert detail in turn.error
    assert "Start a fresh agent conversation" in frame["html"]

    restarted, frame = await run(client, "Follow-up", parent_turn_id=first, restart=True)
    assert upstream.payloads[-1] == {
        "message": "Follow-up",
        "research_effort": "lite",
        "persistence_mode": "enabled",
    }
    turn = await Turn.objects.aget(pk=restarted)
    assert turn.is_restart
    assert turn.parent_id == first  # the local history stays
    chat_row = await Chat.objects.aget(pk=chat.pk)
    assert chat_row.upstream_chat_id == "chat-up-2"
    assert "fresh agent conversation" in frame["html"]

    upstream.queue(reply("Next", "ckpt-n2", chat_id="chat-up-2"))
    await run(client, "Next one")
    assert upstream.payloads[-1]["chat_id"] == "chat-up-2"
    assert upstream.payloads[-1]["from_checkpoint_id"] == "ckpt-n"


def test_the_visible_branch_follows_the_chosen_version(user):
    chat = Chat.objects.create(owner=user)
    one = Turn.objects.create(chat=chat, question="1", status="complete")
    two_a = Turn.objects.create(chat=chat, parent=one, question="2a", status="complete")
    three = Turn.objects.create(chat=chat, parent=two_a, question="3", status="complete")
    two_b = Turn.objects.create(chat=chat, parent=one, question="2b", status="complete")
    chat.active_turn = two_b
    chat.save()
    branch = chat_branch(chat=chat)
    assert [b.turn.question for b in branch] == ["1", "2b"]
    assert (branch[1].position, branch[1].siblings) == (2, [two_a.pk, two_b.pk])

    chat_select_branch(chat=chat, turn_id=two_a.pk)
    chat.refresh_from_db()
    assert chat.active_turn_id == three.pk
    assert [b.turn.question for b in chat_branch(chat=chat)] == ["1", "2a", "3"]
