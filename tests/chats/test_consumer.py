"""The websocket consumer and the run of a turn, end to end against a real stand-in upstream."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from chats.models import Turn, TurnEvent
from tests.chats.conftest import events_of, sse
from tests.chats.test_protocol import assert_server_frame
from tests.upstream import Reply, answer_stream

pytestmark = pytest.mark.django_db(transaction=True)


async def get_turn(turn_id: int) -> Turn:
    return await Turn.objects.select_related("chat").aget(pk=turn_id)


async def ask(client, message="How did NVIDIA do?", **extra):
    await client.send({"type": "ask", "message": message, "research_effort": "standard", **extra})
    started = (await client.receive_until("turn.started"))[-1]
    return started["turn_id"]


# --- Access --------------------------------------------------------------------------------


async def expect_refusal(client, code: str, close_code: int) -> dict:
    """The server says why in an error frame, then closes with `close_code`."""
    frame = await client.receive()
    assert_server_frame(frame)
    assert (frame["type"], frame["code"]) == ("error", code)
    assert await client.communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": close_code,
    }
    return frame


async def test_anonymous_users_are_told_and_closed_with_4401(connect, chat):
    client = await connect(AnonymousUser(), chat)
    frame = await expect_refusal(client, "unauthenticated", 4401)
    assert "log in" in frame["message"]


async def test_another_users_chat_is_closed_with_4404(connect, chat, other_user):
    client = await connect(other_user, chat)
    await expect_refusal(client, "not_found", 4404)


async def test_websocket_origin_is_checked(chat, user):
    from channels.testing import WebsocketCommunicator

    from researchsite.asgi import application

    communicator = WebsocketCommunicator(
        application,
        f"/ws/chats/{chat.pk}/",
        headers=[(b"origin", b"https://evil.example"), (b"host", b"127.0.0.1")],
    )
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


# --- Bad frames ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("not json", "must be JSON"),
        ("[1, 2]", "JSON object"),
        ('{"type": "dance"}', "Unknown frame type"),
        ('{"type": "ask", "message": "   "}', "Write a question"),
        ('{"type": "ask", "message": "q", "research_effort": "max"}', "research_effort"),
        ('{"type": "ask", "message": "q", "parent_turn_id": "7"}', "parent_turn_id"),
        ('{"type": "stop"}', "turn_id"),
        ('{"type": "stop", "turn_id": true}', "turn_id"),
        ('{"type": "sync", "cursors": {"x": 1}}', "cursors"),
        ('{"type": "sync", "cursors": {"1": -1}}', "cursors"),
        ("[" * 5000 + "]" * 5000, "must be JSON"),  # nested too deep for the parser
        # JSON escapes what no database stores: refused, not a crashed socket (close 1006).
        ('{"type": "ask", "message": "a\\ud800b"}', "cannot be sent"),
        ('{"type": "ask", "message": "a\\u0000b"}', "cannot be sent"),
    ],
)
async def test_bad_frames_get_an_error_frame_and_the_connection_stays(
    connect, user, chat, raw, expected
):
    client = await connect(user, chat)
    await client.communicator.send_to(text_data=raw)
    frame = await client.receive()
    assert frame["type"] == "error"
    assert frame["code"] == "bad_frame"
    assert expected in frame["message"]
    await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    assert await client.communicator.receive_nothing(timeout=0.2)


async def test_oversized_and_binary_frames_are_refused(connect, user, chat):
    client = await connect(user, chat)
    await client.communicator.send_to(
        text_data='{"type": "ask", "message": "' + "x" * 20_000 + '"}'
    )
    assert "limited to" in (await client.receive())["message"]
    await client.communicator.send_to(bytes_data=b"\x00\x01")
    assert "JSON text" in (await client.receive())["message"]
    assert await Turn.objects.acount() == 0


async def test_stopping_another_chats_turn_is_refused(connect, user, chat, other_user):
    from chats.models import Chat

    foreign_chat = await Chat.objects.acreate(owner=other_user)
    foreign_turn = await Turn.objects.acreate(chat=foreign_chat, question="theirs")
    client = await connect(user, chat)
    await client.send({"type": "stop", "turn_id": foreign_turn.pk})
    assert (await client.receive())["type"] == "error"


# --- A whole turn ------------------------------------------------------------------------------


async def test_a_question_streams_live_and_is_stored(
    connect, user, chat, upstream, stream_fixtures_dir
):
    upstream.queue(Reply.capture(stream_fixtures_dir / "lifecycle.sse"))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)

    events = events_of(frames, turn_id)
    assert [e["seq"] for e in events] == list(range(1, 37))
    assert events[0]["type"] == "PLANNING"
    assert (
        'Find the latest filing <span class="step-status">in progress</span>'
        in (events[0]["plan_html"])
    )
    assert any(
        e.get("activity", {}).get("text") == "Searching: NVIDIA Q2 FY26 earnings" for e in events
    )
    answer = "".join(e["content"] for e in events if e["type"] == "ANSWER")
    for frame in client.frames:
        assert_server_frame(frame)
    assert client.frames[0]["chat_title"] == "How did NVIDIA do?"  # titled by the server
    finished = frames[-1]
    assert finished["status"] == "complete"
    assert "Sources" in finished["html"]

    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.COMPLETE
    assert turn.answer_text == answer
    assert turn.checkpoint_id == "ckpt-h1"
    assert turn.upstream_chat_id == "chat-h1"
    assert turn.chat.upstream_chat_id == "chat-h1"
    assert turn.consumption[0]["type"] == "base"
    assert turn.structured_output == {"company": "NVIDIA", "revenue_q2_fy26": 46.74}
    assert turn.plan["steps"][0] == {"description": "Find the latest filing", "status": "COMPLETED"}
    assert "www.sec.gov/example-10q" in turn.answer_html
    assert await TurnEvent.objects.filter(turn=turn).acount() == 36
    assert await turn.references.acount() == 3


async def test_frames_are_coalesced_not_one_per_event(connect, user, chat, upstream, settings):
    settings.EVENT_FLUSH_INTERVAL = 0.05
    upstream.queue(Reply.events(*answer_stream("word " * 200, pieces=200)))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    event_frames = [f for f in frames if f["type"] == "turn.events"]
    assert len(events_of(frames)) == 203
    assert len(event_frames) < 20


async def test_an_error_event_fails_the_turn_and_keeps_the_partial_answer(
    connect, user, chat, upstream, stream_fixtures_dir
):
    upstream.queue(Reply.capture(stream_fixtures_dir / "error.sse"))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    assert frames[-1]["status"] == "failed"
    turn = await get_turn(turn_id)
    assert turn.error == "Request failed: upstream model unavailable"
    assert turn.answer_text == "Sales grew 3% in the quarter. Inventory"
    assert "Request failed: upstream model unavailable" in frames[-1]["html"]


async def test_an_http_error_fails_the_turn_with_its_detail(connect, user, chat, upstream):
    upstream.queue(Reply.error(403, "model tier pro not entitled"))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.FAILED
    assert "not entitled" in turn.error
    assert "Retry" in frames[-1]["html"]
    assert "test-key-not-a-secret" not in str(frames)


# --- Faults ------------------------------------------------------------------------------------


async def test_a_stalled_upstream_interrupts_the_turn(connect, user, chat, upstream, settings):
    settings.AGENT_IDLE_TIMEOUT = 0.5
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Half an ans"}), "stall"]))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.error_kind == "stalled"
    assert turn.answer_text == "Half an ans"
    assert "partial answer is kept" in frames[-1]["html"]


async def test_a_dropped_connection_interrupts_the_turn(connect, user, chat, upstream):
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Cut"}), "drop"]))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.receive_until("turn.finished", turn_id=turn_id)
    turn = await get_turn(turn_id)
    assert (turn.status, turn.error_kind, turn.answer_text) == ("interrupted", "dropped", "Cut")


async def test_garbage_from_upstream_interrupts_with_a_clear_message(connect, user, chat, upstream):
    upstream.queue(
        Reply(
            body=["data: <html>oops</html>\n", "data: {\n", sse({"type": "ANSWER", "content": "x"})]
        )
    )
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.receive_until("turn.finished", turn_id=turn_id)
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.malformed_lines == 2
    assert "ended before the answer was complete" in turn.error
    assert "2 unreadable lines" in turn.error


async def test_stop_closes_upstream_and_keeps_the_partial_answer(connect, user, chat, upstream):
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Partial"}), "stall"]))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.receive_until("turn.events", turn_id=turn_id)
    await client.send({"type": "stop", "turn_id": turn_id})
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    assert frames[-1]["status"] == "stopped"
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.STOPPED
    assert turn.answer_text == "Partial"


async def test_closing_the_tab_does_not_stop_the_answer(connect, user, chat, upstream):
    upstream.queue(Reply.events(*answer_stream("Still written after the tab closed."), pause=0.05))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.close()
    for _ in range(100):
        turn = await get_turn(turn_id)
        if turn.is_finished:
            break
        await asyncio.sleep(0.05)
    assert turn.status == Turn.Status.COMPLETE
    assert turn.answer_text == "Still written after the tab closed."


# --- Resume and several tabs -----------------------------------------------------------------


async def test_reconnecting_with_a_cursor_gets_exactly_the_missing_events(
    connect, user, chat, upstream
):
    upstream.queue(
        Reply.events(
            *answer_stream("one two three four five six seven eight", pieces=8), pause=0.05
        )
    )
    first = await connect(user, chat)
    turn_id = await ask(first)
    frames = []
    while len(events_of(frames, turn_id)) < 3:
        frames.append(await first.receive())
    have = events_of(frames, turn_id)
    cursor = have[-1]["seq"]
    await first.close()

    second = await connect(user, chat)
    await second.send(
        {"type": "sync", "cursors": {str(turn_id): cursor}, "newest_turn_id": turn_id}
    )
    later = await second.receive_until("turn.finished", turn_id=turn_id)
    rest = events_of(later, turn_id)
    seqs = [e["seq"] for e in have + rest]
    assert seqs == list(range(1, len(seqs) + 1)), "a gap or a duplicate"
    assert rest[0]["seq"] == cursor + 1
    total = await TurnEvent.objects.filter(turn_id=turn_id).acount()
    assert seqs[-1] == total


async def test_a_late_page_replays_from_zero_then_follows_live(connect, user, chat, upstream):
    upstream.queue(Reply.events(*answer_stream("alpha beta gamma delta", pieces=6), pause=0.05))
    first = await connect(user, chat)
    turn_id = await ask(first)
    await asyncio.sleep(0.15)
    late = await connect(user, chat)
    await late.send({"type": "sync", "cursors": {str(turn_id): 0}, "newest_turn_id": turn_id})
    frames = await late.receive_until("turn.finished", turn_id=turn_id)
    seqs = [e["seq"] for e in events_of(frames, turn_id)]
    assert seqs == list(range(1, await TurnEvent.objects.filter(turn_id=turn_id).acount() + 1))
    assert (
        "".join(e.get("content", "") for e in events_of(frames) if e["type"] == "ANSWER")
        == "alpha beta gamma delta"
    )


async def test_two_tabs_both_follow_live(connect, user, chat, upstream):
    upstream.queue(Reply.events(*answer_stream("shared answer"), pause=0.02))
    tab_a = await connect(user, chat)
    tab_b = await connect(user, chat)
    await tab_b.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    turn_id = await ask(tab_a)
    frames_a = await tab_a.receive_until("turn.finished", turn_id=turn_id)
    frames_b = await tab_b.receive_until("turn.finished", turn_id=turn_id)
    assert events_of(frames_a) == events_of(frames_b)
    assert [f["type"] for f in frames_b if f["type"] == "turn.started"] == ["turn.started"]


async def test_sync_reports_turns_that_finished_while_away(connect, user, chat, upstream):
    upstream.queue(Reply.events(*answer_stream("done while away")))
    first = await connect(user, chat)
    turn_id = await ask(first)
    await first.receive_until("turn.finished", turn_id=turn_id)
    back = await connect(user, chat)
    await back.send({"type": "sync", "cursors": {str(turn_id): 2}, "newest_turn_id": turn_id})
    frame = await back.receive()
    assert (frame["type"], frame["turn_id"], frame["status"]) == (
        "turn.finished",
        turn_id,
        "complete",
    )


# --- Orphans ------------------------------------------------------------------------------------


@database_sync_to_async
def make_orphan(chat):
    from datetime import timedelta

    from django.utils import timezone

    turn = Turn.objects.create(
        chat=chat, question="q", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    TurnEvent.objects.bulk_create(
        [
            TurnEvent(
                turn=turn,
                seq=1,
                type="ANSWER",
                data={"type": "ANSWER", "content": "Written before "},
            ),
            TurnEvent(
                turn=turn, seq=2, type="ANSWER", data={"type": "ANSWER", "content": "the crash"}
            ),
        ]
    )
    return turn


async def test_orphaned_turns_are_interrupted_at_start_up(chat):
    from chats.lifespan import lifespan_app

    orphan = await make_orphan(chat)
    alive = await Turn.objects.acreate(
        chat=chat, question="still running elsewhere"
    )  # no lease yet?
    from datetime import timedelta

    from django.utils import timezone

    alive.lease_expires_at = timezone.now() + timedelta(minutes=5)
    await alive.asave()

    sent = []
    queue = asyncio.Queue()
    await queue.put({"type": "lifespan.startup"})
    await queue.put({"type": "lifespan.shutdown"})

    async def send(message):
        sent.append(message)

    await lifespan_app({"type": "lifespan"}, queue.get, send)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    orphan = await get_turn(orphan.pk)
    assert orphan.status == Turn.Status.INTERRUPTED
    assert orphan.answer_text == "Written before the crash"
    assert "server stopped" in orphan.error
    assert (await get_turn(alive.pk)).status == Turn.Status.STREAMING


async def test_a_lapsed_lease_is_swept_while_running(connect, user, chat, settings):
    from chats.runner import get_registry

    settings.TURN_HEARTBEAT_SECONDS = 0.05
    client = await connect(user, chat)
    await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    orphan = await make_orphan(chat)
    get_registry().ensure_heartbeat()
    frames = await client.receive_until("turn.finished", turn_id=orphan.pk)
    assert frames[-1]["status"] == "interrupted"
    await get_registry().shutdown()
