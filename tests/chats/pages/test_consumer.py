"""The websocket consumer and the run of a turn, end to end against a real stand-in upstream."""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import textwrap
import threading
from types import SimpleNamespace

import pytest
from channels.consumer import AsyncConsumer
from channels.db import database_sync_to_async
from django.contrib.auth.models import AnonymousUser

from chats.live import limits as socket_limits
from chats.models import Chat, OpenSocket, Turn, TurnEvent
from demo_agent.scripted import Drop, Reply, Stall, answer_stream
from tests.chats.conftest import events_of, sse
from tests.chats.live.test_protocol import assert_server_frame
from tests.waiting import wait_until

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


async def test_a_frame_is_answered_while_the_database_thread_is_busy(connect, user, chat):
    """A page's frame does not queue behind the database thread (a burst of answers being
    stored, say) unless handling it needs the database."""
    client = await connect(user, chat)
    await database_sync_to_async(lambda: None)()  # the page's opening is done with the thread
    entered, release = threading.Event(), threading.Event()

    def hold_the_thread() -> None:
        entered.set()
        release.wait(30)

    busy = asyncio.ensure_future(database_sync_to_async(hold_the_thread)())
    try:
        await wait_until(entered.is_set)  # the shared database thread is held now
        await client.communicator.send_to(text_data="not json")
        frame = await client.receive()  # times out if the frame waited for the thread
        assert frame["code"] == "bad_frame"
        assert not busy.done()
    finally:
        release.set()
        await busy


def test_channels_dispatch_is_the_one_chat_consumer_copies():
    """ChatConsumer.dispatch is channels' own without its `aclose_old_connections()`: if a
    channels upgrade changes dispatch, this fails, so that the copy is looked at again."""
    (function,) = ast.parse(textwrap.dedent(inspect.getsource(AsyncConsumer.dispatch))).body
    body = [statement for statement in function.body if not isinstance(statement, ast.Expr)]
    assert [ast.unparse(statement) for statement in body] == [
        "handler = getattr(self, get_handler_name(message), None)",
        "if handler:\n    await aclose_old_connections()\n    await handler(message)\n"
        "else:\n    raise ValueError('No handler for message type %s' % message['type'])",
    ]


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


async def test_a_page_holds_no_frame_once_it_is_written(connect, user, chat, upstream):
    """Its writer waits for the next frame holding none: a page left open after an answer
    would otherwise keep the final card's frame, with the whole answer, for as long."""
    upstream.queue(Reply.events(*answer_stream("word " * 50, pieces=10)))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.receive_until("turn.finished", turn_id=turn_id)
    (writer,) = [task for task in asyncio.all_tasks() if task.get_name().startswith("page-")]
    await wait_until(
        lambda: "item" not in writer.get_coro().cr_frame.f_locals,
        what="the page's writer let its last frame go",
    )


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
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Half an ans"}), Stall()]))
    client = await connect(user, chat)
    turn_id = await ask(client)
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.INTERRUPTED
    assert turn.error_kind == "stalled"
    assert turn.answer_text == "Half an ans"
    assert "partial answer is kept" in frames[-1]["html"]


async def test_a_dropped_connection_interrupts_the_turn(connect, user, chat, upstream):
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Cut"}), Drop()]))
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
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Partial"}), Stall()]))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.receive_until("turn.events", turn_id=turn_id)
    await client.send({"type": "stop", "turn_id": turn_id})
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    assert frames[-1]["status"] == "stopped"
    turn = await get_turn(turn_id)
    assert turn.status == Turn.Status.STOPPED
    assert turn.answer_text == "Partial"


async def test_stopping_one_turn_leaves_the_other_runs_of_its_process_streaming(
    connect, user, chat, upstream
):
    """The process's runs share one stop listener; a request stops only the turn it names."""
    other_chat = await Chat.objects.acreate(owner=user)
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "First"}), Stall()]))
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Second"}), Stall()]))
    client, other_client = await connect(user, chat), await connect(user, other_chat)
    turn_id = await ask(client)
    await client.receive_until("turn.events", turn_id=turn_id)
    other_turn_id = await ask(other_client)
    await other_client.receive_until("turn.events", turn_id=other_turn_id)
    listeners = [t for t in asyncio.all_tasks() if t.get_name() == "turn-stop-listener"]
    assert len(listeners) == 1

    await client.send({"type": "stop", "turn_id": turn_id})
    frames = await client.receive_until("turn.finished", turn_id=turn_id)
    assert frames[-1]["status"] == "stopped"
    assert (await get_turn(other_turn_id)).status == Turn.Status.STREAMING
    await other_client.send({"type": "stop", "turn_id": other_turn_id})
    frames = await other_client.receive_until("turn.finished", turn_id=other_turn_id)
    assert frames[-1]["status"] == "stopped"
    assert (await get_turn(other_turn_id)).answer_text == "Second"


async def test_closing_the_tab_does_not_stop_the_answer(connect, user, chat, upstream):
    upstream.queue(Reply.events(*answer_stream("Still written after the tab closed."), pause=0.05))
    client = await connect(user, chat)
    turn_id = await ask(client)
    await client.close()

    async def finished() -> bool:
        return (await get_turn(turn_id)).is_finished

    await wait_until(finished)
    turn = await get_turn(turn_id)
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
    await first.receive_until("turn.events", turn_id=turn_id)  # mid-answer
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
    from chats.run.lifespan import lifespan_app

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
    from chats.run.registry import get_registry

    settings.TURN_HEARTBEAT_SECONDS = 0.05
    client = await connect(user, chat)
    await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    orphan = await make_orphan(chat)
    get_registry().ensure_heartbeat()
    frames = await client.receive_until("turn.finished", turn_id=orphan.pk)
    assert frames[-1]["status"] == "interrupted"
    await get_registry().shutdown()


# --- Limits ----------------------------------------------------------------------------------


async def test_sockets_past_the_per_user_cap_are_told_and_closed_with_4429(
    connect, user, other_user, chat, settings
):
    settings.WS_MAX_SOCKETS_PER_USER = 2
    first = await connect(user, chat)
    await connect(user, chat)
    frame = await expect_refusal(await connect(user, chat), "too_many_sockets", 4429)
    assert "2 chat pages open" in frame["message"]
    # Another user is not affected, and a closed socket frees its place.
    await connect(other_user, await Chat.objects.acreate(owner=other_user))
    await first.close()
    third = await connect(user, chat)
    await third.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    assert await third.communicator.receive_nothing(timeout=0.2)
    assert await OpenSocket.objects.filter(user=user).acount() == 2


async def test_pages_opening_together_are_checked_and_counted_together(
    connect, user, other_user, chat
):
    """A burst of pages (a restart's reconnects) takes a few queries, not a few each: the
    first page of a quiet moment goes at once, the rest in one batch."""
    from tests.database_thread import database_thread_queries

    theirs = await Chat.objects.acreate(owner=other_user)
    clients: list = []

    async def open_all() -> None:
        pages = [(user, chat)] * 6 + [(other_user, theirs), (other_user, chat)]
        clients.extend(await asyncio.gather(*(connect(who, which) for who, which in pages)))

    queries = await database_thread_queries(open_all)
    inserts = [sql for sql in queries if sql.startswith('INSERT INTO "chats_opensocket"')]
    assert 1 <= len(inserts) <= 2, queries
    await expect_refusal(clients[-1], "not_found", 4404)  # another user's chat, in the batch
    for client in clients[:-1]:
        await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
        assert await client.communicator.receive_nothing(timeout=0.1)  # open, not refused
    assert await OpenSocket.objects.filter(user=user).acount() == 6
    assert await OpenSocket.objects.filter(user=other_user).acount() == 1


async def test_sockets_of_a_dead_process_stop_counting_when_their_lease_lapses(
    connect, user, chat, settings
):
    from datetime import timedelta

    from django.utils import timezone

    settings.WS_MAX_SOCKETS_PER_USER = 2
    lapsed = timezone.now() - timedelta(seconds=1)
    for name in ("dead-process-1", "dead-process-2"):
        await OpenSocket.objects.acreate(user=user, channel_name=name, lease_expires_at=lapsed)
    client = await connect(user, chat)
    await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    assert await client.communicator.receive_nothing(timeout=0.2)  # admitted
    assert not await OpenSocket.objects.filter(channel_name__startswith="dead").aexists()


async def test_frames_past_the_rate_are_dropped_with_an_error(
    connect, user, chat, settings, monkeypatch
):
    settings.WS_MAX_FRAMES_PER_SECOND = 5
    clock = SimpleNamespace(now=100.0)  # the socket's frame rate reads this clock, not time's
    monkeypatch.setattr(socket_limits, "time", SimpleNamespace(monotonic=lambda: clock.now))
    client = await connect(user, chat)
    for _ in range(10):  # frames the consumer answers (unknown type), in no time at all
        await client.send({"type": "dance"})
    codes = [(await client.receive())["code"] for _ in range(10)]
    assert codes == ["bad_frame"] * 5 + ["rate_limited"] * 5  # a burst of 5, then refused
    assert await client.communicator.receive_nothing(timeout=0.1)  # and the socket stays
    clock.now += 0.2  # a fifth of a second: one frame's worth of the bucket comes back
    await client.send({"type": "dance"})
    await client.send({"type": "dance"})
    assert [(await client.receive())["code"] for _ in range(2)] == ["bad_frame", "rate_limited"]


async def test_sustained_flooding_closes_the_socket(connect, user, chat, settings):
    settings.WS_MAX_FRAMES_PER_SECOND = 5
    client = await connect(user, chat)
    for _ in range(200):
        await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    while True:
        output = await client.communicator.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            break
        frame = json.loads(output["text"])
        assert frame["code"] == "rate_limited"
    assert output["code"] == 4429
    assert "closed" in frame["message"]


async def test_a_chat_streams_one_turn_at_a_time(connect, user, chat, upstream):
    from chats.run.registry import get_registry

    upstream.queue(*[Reply(body=[sse({"type": "ANSWER", "content": "x"}), Stall()])] * 2)
    client = await connect(user, chat)
    await ask(client)
    other_tab = await connect(user, chat)
    await other_tab.send({"type": "ask", "message": "Me too", "research_effort": "lite"})
    frame = await other_tab.receive()
    assert (frame["type"], frame["code"]) == ("error", "turn_in_progress")
    assert len(upstream.requests) == 1
    assert await Turn.objects.acount() == 1
    await get_registry().shutdown()


@pytest.mark.parametrize("chats", [1, 5])
async def test_twenty_asks_at_once_reach_the_agent_at_most_three_times(
    connect, user, upstream, settings, chats
):
    """20 asks sent together, in one chat or spread over five, start at most 3 runs."""
    from chats.run.registry import get_registry

    assert settings.AGENT_MAX_CONCURRENT_TURNS == 3
    upstream.queue(*[Reply(body=[sse({"type": "ANSWER", "content": "x"}), Stall()])] * 20)
    clients = [await connect(user, await Chat.objects.acreate(owner=user)) for _ in range(chats)]
    frame = {"type": "ask", "message": "Expensive question", "research_effort": "standard"}
    await asyncio.gather(*(clients[i % chats].send(frame) for i in range(20)))
    answers = []
    for client in clients:
        while not await client.communicator.receive_nothing(timeout=0.5):
            answers.append(await client.receive())
    started = {f["turn_id"] for f in answers if f["type"] == "turn.started"}
    refused = [f["code"] for f in answers if f["type"] == "error"]
    assert len(started) == min(chats, 3)
    assert len(refused) == 20 - len(started)
    expected_codes = {"turn_in_progress"} if chats == 1 else {"turn_in_progress", "too_many_turns"}
    assert set(refused) == expected_codes
    await wait_until(lambda: len(upstream.requests) >= len(started))
    assert len(upstream.requests) == len(started)
    await get_registry().shutdown()


def test_turn_start_counts_concurrent_asks_across_database_connections(user, settings):
    """Asks on separate connections at once (as from separate processes) start at most 3."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from chats.errors import TurnStartError
    from chats.services import turn_start

    chats = [Chat.objects.create(owner=user) for _ in range(5)]

    def try_ask(i: int) -> str:
        try:
            turn_start(chat=chats[i % 5], question="q", research_effort="lite")
            return "started"
        except TurnStartError as refused:
            return refused.code
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(try_ask, range(20)))
    assert outcomes.count("started") == 3
    assert Turn.objects.streaming().count() == 3
    assert set(outcomes) == {"started", "turn_in_progress", "too_many_turns"}


# --- Logout ----------------------------------------------------------------------------------


async def signed_in_socket(user, chat):
    """A socket through the real site (session cookie, auth middleware) and its HTTP client."""
    from asgiref.sync import sync_to_async
    from django.test import Client as HttpClient

    from tests.site_sockets import site_socket

    http = HttpClient()
    await sync_to_async(http.force_login)(user)
    communicator = site_socket(f"/ws/chats/{chat.pk}/", http.cookies["sessionid"].value)
    connected, _ = await communicator.connect()
    assert connected
    await communicator.send_json_to({"type": "sync", "cursors": {}, "newest_turn_id": 0})
    assert await communicator.receive_nothing(timeout=0.2)  # signed in, not refused
    return communicator, http


async def test_logging_out_closes_the_users_sockets_with_4401(user, chat):
    from asgiref.sync import sync_to_async
    from django.urls import reverse

    communicator, http = await signed_in_socket(user, chat)
    await sync_to_async(http.post)(reverse("logout"))
    frame = await communicator.receive_json_from(timeout=5)
    assert (frame["type"], frame["code"]) == ("error", "logged_out")
    assert await communicator.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": 4401,
    }
    await communicator.disconnect()


async def test_a_socket_whose_session_ended_cannot_ask(user, chat, upstream):
    """Even when the logout's close never reached it (another process, a lost message)."""
    from django.contrib.sessions.models import Session

    upstream.queue(Reply.events(*answer_stream("should not be asked")))
    communicator, _ = await signed_in_socket(user, chat)
    await Session.objects.all().adelete()  # the session ended elsewhere
    await communicator.send_json_to({"type": "ask", "message": "Still there?"})
    frame = await communicator.receive_json_from(timeout=5)
    assert (frame["type"], frame["code"]) == ("error", "logged_out")
    assert (await communicator.receive_output(timeout=5))["code"] == 4401
    assert await Turn.objects.acount() == 0
    assert upstream.requests == []
    await communicator.disconnect()
