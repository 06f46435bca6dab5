"""The run of a turn when what the agent sends cannot be stored: only that turn pays for it.

Against the real site (consumer, runner, event log, database) and a stand-in agent on a real
loopback port. Where the database must refuse a write, a trigger in the test database does it.
"""

from __future__ import annotations

import json
import sys

import pytest
from channels.db import database_sync_to_async

from chats.models import Chat, Turn, TurnEvent
from chats.run.storable import REPLACEMENT
from demo_agent.scripted import Reply, Sleep, answer_stream
from tests.chats.conftest import events_of, sse
from tests.chats.refusals import refusals_fixture
from tests.servers import serve_asgi
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

HEALTHY_ANSWER = "Revenue rose 12% on data-centre demand, with margins steady at 73%."


async def get_turn(turn_id: int) -> Turn:
    return await Turn.objects.select_related("chat").aget(pk=turn_id)


async def ask(client, message="How did NVIDIA do?", **extra) -> int:
    await client.send({"type": "ask", "message": message, "research_effort": "standard", **extra})
    return (await client.receive_until("turn.started"))[-1]["turn_id"]


def line(message: str) -> str:
    """One wire line around a message written as raw JSON text (NaN and the like included)."""
    return f'data: {{"chat_id": "chat-up-1", "message": {message}}}\n'


def poisoned_reply(poison_line: str) -> Reply:
    body = []
    for message in [
        sse({"type": "ANSWER", "message_id": "a", "content": "Before the bad event. "}),
        poison_line,
        sse({"type": "ANSWER", "message_id": "a", "content": "After it."}),
        sse({"type": "COMPLETE", "checkpoint_id": "ckpt-p", "consumption": []}),
    ]:
        body += [message, Sleep(0.1)]
    return Reply(body=body)


async def start_two_users(connect, user, other_user, upstream, first_reply: Reply):
    """Ask as `user` (who gets `first_reply`), then as another user on their own chat."""
    upstream.queue(first_reply)
    poisoned_chat = await Chat.objects.acreate(owner=user)
    healthy_chat = await Chat.objects.acreate(owner=other_user)
    poisoned_client = await connect(user, poisoned_chat)
    healthy_client = await connect(other_user, healthy_chat)
    poisoned_id = await ask(poisoned_client)
    await wait_until(lambda: upstream.requests)  # answered in request order: poisoned first
    upstream.queue(Reply.events(*answer_stream(HEALTHY_ANSWER, pieces=10), pause=0.05))
    healthy_id = await ask(healthy_client, "And AMD?")
    return poisoned_client, poisoned_id, healthy_client, healthy_id


async def assert_streamed_whole(client, turn_id: int) -> None:
    frames = await client.receive_until("turn.finished", turn_id=turn_id, timeout=20)
    live = events_of(frames, turn_id)
    expected = len(answer_stream(HEALTHY_ANSWER, pieces=10))
    assert [e["seq"] for e in live] == list(range(1, expected + 1)), "every event, in order"
    assert "".join(e.get("content", "") for e in live if e["type"] == "ANSWER") == HEALTHY_ANSWER
    assert frames[-1]["status"] == "complete"
    turn = await get_turn(turn_id)
    assert (turn.status, turn.answer_text) == (Turn.Status.COMPLETE, HEALTHY_ANSWER)


POISONS = {
    "nan": ('{"type": "STRUCTURED_OUTPUT", "content": {"score": NaN}}', ""),
    "infinity": ('{"type": "STRUCTURED_OUTPUT", "content": {"score": Infinity}}', ""),
    "1e999": ('{"type": "STRUCTURED_OUTPUT", "content": {"score": 1e999}}', ""),
    "nul": ('{"type": "ANSWER", "message_id": "a", "content": "x\\u0000y"}', f"x{REPLACEMENT}y"),
    "lone surrogate": (
        '{"type": "ANSWER", "message_id": "a", "content": "x\\ud800y"}',
        f"x{REPLACEMENT}y",
    ),
    "deep tool arguments": (
        '{"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": "q", "deep": '
        + "[" * 975
        + "]" * 975
        + "}}",
        "",
    ),
}


@pytest.fixture
def deep_parsing(monkeypatch):
    """Parse 975 levels as a server's shallow stack does (a test's stack is deeper)."""
    monkeypatch.setattr(sys, "getrecursionlimit", sys.getrecursionlimit)  # restored after
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    yield
    sys.setrecursionlimit(previous)


@pytest.mark.parametrize("poison", list(POISONS), ids=list(POISONS))
async def test_a_poisoned_answer_is_stored_repaired_while_another_users_streams(
    connect, user, other_user, upstream, deep_parsing, poison
):
    poison_message, stored_content = POISONS[poison]
    poisoned_client, poisoned_id, healthy_client, healthy_id = await start_two_users(
        connect, user, other_user, upstream, poisoned_reply(line(poison_message))
    )
    await assert_streamed_whole(healthy_client, healthy_id)
    frames = await poisoned_client.receive_until("turn.finished", turn_id=poisoned_id)
    assert frames[-1]["status"] == "complete"
    turn = await get_turn(poisoned_id)
    assert turn.status == Turn.Status.COMPLETE
    assert turn.answer_text == f"Before the bad event. {stored_content}After it."
    assert turn.sanitized_events == 1
    assert await TurnEvent.objects.filter(turn=turn).acount() == 4


async def test_structured_output_nested_too_deep_is_kept_as_its_text(
    connect, user, other_user, upstream, deep_parsing
):
    deep = "[" * 975 + "]" * 975
    poisoned_client, poisoned_id, healthy_client, healthy_id = await start_two_users(
        connect,
        user,
        other_user,
        upstream,
        poisoned_reply(line(f'{{"type": "STRUCTURED_OUTPUT", "content": {deep}}}')),
    )
    await assert_streamed_whole(healthy_client, healthy_id)
    await poisoned_client.receive_until("turn.finished", turn_id=poisoned_id)
    turn = await get_turn(poisoned_id)
    assert (turn.status, turn.sanitized_events) == (Turn.Status.COMPLETE, 1)
    assert turn.structured_output is None
    stored = await TurnEvent.objects.aget(turn=turn, type="STRUCTURED_OUTPUT")
    assert stored.data["unstorable"] is True
    assert deep in stored.data["text"]


# --- The database refuses a write: a trigger in the test database plays the refusal ----------


@pytest.fixture
def refuse_rows():
    """Make the database refuse rows of a table whose column contains a marker."""
    yield from refusals_fixture()


async def test_events_the_database_refuses_fail_only_their_turn_and_stop_its_run(
    connect, user, other_user, upstream, refuse_rows
):
    await database_sync_to_async(refuse_rows)("chats_turnevent", "data", "REFUSE-ME")
    poisoned = Reply(
        body=[
            sse({"type": "ANSWER", "message_id": "a", "content": "Saved part. "}),
            Sleep(0.2),
            sse({"type": "ANSWER", "message_id": "a", "content": "REFUSE-ME"}),
            *[
                step
                for _ in range(50)  # would go on for 5 s if the run were not stopped
                for step in (sse({"type": "THINKING", "content": "..."}), Sleep(0.1))
            ],
            sse({"type": "COMPLETE", "checkpoint_id": "ckpt-p", "consumption": []}),
        ]
    )
    poisoned_client, poisoned_id, healthy_client, healthy_id = await start_two_users(
        connect, user, other_user, upstream, poisoned
    )
    await assert_streamed_whole(healthy_client, healthy_id)
    frames = await poisoned_client.receive_until("turn.finished", turn_id=poisoned_id, timeout=3)
    assert frames[-1]["status"] == "failed"
    assert "Part of this answer could not be saved" in frames[-1]["html"]
    turn = await get_turn(poisoned_id)
    assert turn.status == Turn.Status.FAILED
    assert turn.error_kind == Turn.ErrorKind.UNSAVED
    assert turn.error.startswith("Part of this answer could not be saved")
    assert turn.lease_expires_at is None
    assert await TurnEvent.objects.filter(turn=turn).acount() == 1


async def test_an_answer_the_database_refuses_ends_failed_not_streaming(
    connect, user, chat, upstream, refuse_rows
):
    await database_sync_to_async(refuse_rows)("chats_turn", "answer_text", "REFUSE-ME", "UPDATE")
    events = answer_stream("An answer with REFUSE-ME in it.")
    upstream.queue(Reply.events(*events))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    assert frames[-1]["status"] == "failed"
    turn = await get_turn(turn_id)
    assert (turn.status, turn.error_kind) == (Turn.Status.FAILED, Turn.ErrorKind.UNSAVED)
    assert turn.error.startswith("This answer could not be saved")
    assert turn.finished_at is not None and turn.lease_expires_at is None
    # The events were stored: the answer can still be read in the event log.
    assert await TurnEvent.objects.filter(turn=turn).acount() == len(events)


# --- Ids of any length ---------------------------------------------------------------------------


async def test_checkpoint_and_chat_ids_of_any_length_are_kept_and_sent_back(
    connect, user, chat, upstream
):
    checkpoint, chat_id = "c" * 5000, "u" * 3000
    upstream.queue(
        Reply.events(*answer_stream("First.", checkpoint=checkpoint), chat_id=chat_id),
        Reply.events(*answer_stream("Second.")),
    )
    client = await connect(user, chat)
    first = await ask(client)
    await client.receive_until("turn.finished", turn_id=first)
    turn = await get_turn(first)
    assert (turn.status, turn.checkpoint_id, turn.upstream_chat_id) == (
        Turn.Status.COMPLETE,
        checkpoint,
        chat_id,
    )
    assert turn.chat.upstream_chat_id == chat_id
    second = await ask(client, "And then?")
    await client.receive_until("turn.finished", turn_id=second)
    assert upstream.payloads[1]["from_checkpoint_id"] == checkpoint
    assert upstream.payloads[1]["chat_id"] == chat_id
    assert (await get_turn(second)).from_checkpoint_id == checkpoint


def test_the_raw_json_of_the_poisons_is_what_the_issue_describes():
    """Guard the fixtures: each poison parses, as the agent's line would, to the bad value."""
    nan = json.loads(POISONS["nan"][0])["content"]["score"]
    assert nan != nan
    assert json.loads(POISONS["1e999"][0])["content"]["score"] == float("inf")
    assert "\x00" in json.loads(POISONS["nul"][0])["content"]


async def test_the_demo_agent_answers_five_follow_ups_in_one_chat(connect, user, chat, settings):
    """The third follow-up overflowed the 500-character checkpoint column."""
    from demo_agent import DemoAgentApp

    questions = [
        "Tell me about Apple's latest quarter, its services revenue and its margins.",
        "How does that compare with Microsoft over the same period?",
        "And what did NVIDIA report for its data-centre business?",
        "Which of the three grew fastest, and why?",
        "Summarise the risks each company named in its filings.",
    ]
    with serve_asgi(DemoAgentApp("test-demo-agent-secret", pace=0)) as url:
        settings.RESEARCH_AGENT_URL = f"{url}/v1/research-agent"
        settings.EVENT_FLUSH_INTERVAL = 0.01
        client = await connect(user, chat)
        for question in questions:
            turn_id = await ask(client, question)
            frames = await client.receive_until("turn.finished", turn_id=turn_id, timeout=30)
            assert frames[-1]["status"] == "complete", (await get_turn(turn_id)).error
    turns = [t async for t in Turn.objects.filter(chat=chat).order_by("pk")]
    assert [t.status for t in turns] == [Turn.Status.COMPLETE] * 5
    assert [t.from_checkpoint_id for t in turns[1:]] == [t.checkpoint_id for t in turns[:-1]]
