"""The site's limits on one run: answer size, event count, duration, and time without events.

Each against the real site and a stand-in agent on a real loopback port, with small settings.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from channels.db import database_sync_to_async

from chats.answer.display import duration_text
from chats.models import Turn, TurnEvent
from chats.services import chat_create
from demo_agent.scripted import Reply, ScriptedAgent, Sleep, answer_stream
from tests.chats.conftest import events_of, sse
from tests.servers import serve_asgi

pytestmark = pytest.mark.django_db(transaction=True)

KEEP_ALIVE = ": keep-alive\n"


async def get_turn(turn_id: int) -> Turn:
    return await Turn.objects.aget(pk=turn_id)


async def ask(client) -> int:
    await client.send({"type": "ask", "message": "How did NVIDIA do?"})
    return (await client.receive_until("turn.started"))[-1]["turn_id"]


async def run_turn(connect, user, chat, timeout: float = 15):
    """Ask, wait for the end; return the frames, the stored turn and the seconds it took."""
    client = await connect(user, chat)
    turn_id = await ask(client)
    loop = asyncio.get_running_loop()
    started = loop.time()
    frames = await client.receive_until("turn.finished", turn_id=turn_id, timeout=timeout)
    return frames, await get_turn(turn_id), loop.time() - started


def keep_alives(seconds: float, every: float = 0.05) -> list:
    return [step for _ in range(int(seconds / every)) for step in (KEEP_ALIVE, Sleep(every))]


@pytest.mark.parametrize("pieces", [1, 10], ids=["one event", "many events"])
async def test_an_answer_past_the_limit_is_cut_there_and_interrupted(
    connect, user, chat, upstream, settings, pieces
):
    settings.AGENT_MAX_ANSWER_CHARS = 1000
    text = "".join(f"{i:05d} " for i in range(2000))  # 12,000 characters
    upstream.queue(Reply.events(*answer_stream(text, pieces=pieces)))
    frames, turn, _ = await run_turn(connect, user, chat)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.error_kind == Turn.ErrorKind.LIMIT
    assert "limit of 1,000 characters" in turn.error
    assert turn.answer_text == text[:1000]
    assert frames[-1]["status"] == "interrupted"
    live = [e for e in events_of(frames, turn.pk) if e["type"] == "ANSWER"]
    assert "".join(e["content"] for e in live) == text[:1000]
    assert all(len(str(f)) < 1000 + 2000 for f in frames if f["type"] == "turn.events")
    stored = TurnEvent.objects.filter(turn=turn, type="ANSWER").values_list("data", flat=True)
    assert "".join([d["content"] async for d in stored]) == text[:1000]


async def test_an_answer_exactly_at_the_limit_completes(connect, user, chat, upstream, settings):
    settings.AGENT_MAX_ANSWER_CHARS = 100
    upstream.queue(Reply.events(*answer_stream("x" * 100, pieces=3)))
    _, turn, _ = await run_turn(connect, user, chat)
    assert (turn.status, turn.answer_text) == (Turn.Status.COMPLETE, "x" * 100)


async def test_a_run_past_the_event_limit_is_interrupted(connect, user, chat, upstream, settings):
    settings.AGENT_MAX_EVENTS = 10
    thinking = [{"type": "THINKING", "content": f"step {i}"} for i in range(50)]
    upstream.queue(Reply.events(*thinking))
    frames, turn, _ = await run_turn(connect, user, chat)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.error_kind == Turn.ErrorKind.LIMIT
    assert "limit of 10 events" in turn.error
    assert await TurnEvent.objects.filter(turn=turn).acount() == 10
    assert [e["seq"] for e in events_of(frames, turn.pk)] == list(range(1, 11))


async def test_a_keep_alive_only_stream_ends_at_the_maximum_duration(
    connect, user, chat, upstream, settings
):
    settings.AGENT_MAX_TURN_SECONDS = 1
    settings.AGENT_IDLE_TIMEOUT = 30
    upstream.queue(Reply(body=keep_alives(6)))
    frames, turn, took = await run_turn(connect, user, chat, timeout=5)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.error_kind == Turn.ErrorKind.LIMIT
    assert turn.error == "The answer took longer than 1 second and was stopped."
    assert took < 3
    assert frames[-1]["status"] == "interrupted"


async def test_a_steady_stream_of_events_still_ends_at_the_maximum_duration(
    connect, user, chat, upstream, settings
):
    settings.AGENT_MAX_TURN_SECONDS = 1
    thinking = [{"type": "THINKING", "content": f"step {i}"} for i in range(100)]
    upstream.queue(Reply.events(*thinking, pause=0.05))
    _, turn, took = await run_turn(connect, user, chat, timeout=5)
    assert (turn.status, turn.error_kind) == (Turn.Status.INTERRUPTED, Turn.ErrorKind.LIMIT)
    assert "longer than 1 second" in turn.error
    assert took < 3


async def test_keep_alives_without_events_end_as_stalled(connect, user, chat, upstream, settings):
    settings.AGENT_IDLE_TIMEOUT = 0.5
    body = [sse({"type": "ANSWER", "content": "Half an answer"}), *keep_alives(6)]
    upstream.queue(Reply(body=body))
    _, turn, took = await run_turn(connect, user, chat, timeout=5)
    assert (turn.status, turn.error_kind) == (Turn.Status.INTERRUPTED, "stalled")
    assert turn.error == "The research agent sent nothing for 0.5 s, so the answer was cut off."
    assert turn.answer_text == "Half an answer"
    assert took < 3


async def test_a_stall_names_the_chats_agent(connect, user, settings):
    """An llm-sdk agent that sends keep-alives and no event: the run's idle limit says whose."""
    settings.AGENT_IDLE_TIMEOUT = 0.5
    settings.AGENT_MAX_RETRIES = 0
    stand_in = ScriptedAgent()
    part = {"delta": {"index": 0, "part": {"type": "text", "text": "Half an answer"}}}
    stand_in.queue(Reply(body=[json.dumps(part) + "\n", *keep_alives(6)]))
    with serve_asgi(stand_in) as url:
        settings.LLMSDK_AGENT_URL = f"{url}/agent"
        chat = await database_sync_to_async(chat_create)(owner=user, provider="llm-sdk")
        _, turn, took = await run_turn(connect, user, chat, timeout=5)
    assert (turn.status, turn.error_kind) == (Turn.Status.INTERRUPTED, "stalled")
    assert turn.error == "The llm-sdk agent sent nothing for 0.5 s, so the answer was cut off."
    assert turn.answer_text == "Half an answer"
    assert took < 3


async def test_waiting_out_a_retry_is_not_a_stall(connect, user, chat, upstream, settings):
    settings.AGENT_IDLE_TIMEOUT = 0.5
    settings.AGENT_MAX_RETRIES = 1
    upstream.queue(
        Reply.error(503, "busy", retry_after=1),
        Reply.events(*answer_stream("After the retry.")),
    )
    _, turn, took = await run_turn(connect, user, chat)
    assert (turn.status, turn.answer_text) == (Turn.Status.COMPLETE, "After the retry.")
    assert took >= 1


async def test_malformed_lines_are_logged_once_per_turn_as_a_count(
    connect, user, chat, upstream, caplog
):
    body = [
        *["data: <html>not json</html>\n"] * 500,
        *answer_stream_lines("Fine after all."),
    ]
    upstream.queue(Reply(body=body))
    with caplog.at_level(logging.WARNING, logger="chats.run.turn_run"):
        _, turn, _ = await run_turn(connect, user, chat)
    assert (turn.status, turn.malformed_lines) == (Turn.Status.COMPLETE, 500)
    summaries = [r for r in caplog.records if r.name == "chats.run.turn_run"]
    assert [r.getMessage() for r in summaries] == [
        f"Turn {turn.pk}: skipped 500 malformed stream lines"
    ]


def answer_stream_lines(text: str) -> list[str]:
    return [sse(message) for message in answer_stream(text)]


def test_durations_are_said_the_way_people_say_them():
    assert [duration_text(s) for s in (1800, 60, 90, 1, 0.5)] == [
        "30 minutes",
        "1 minute",
        "90 seconds",
        "1 second",
        "0.5 seconds",
    ]
