"""Asks started together: one transaction for a burst, each ask's refusal its own."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils.functional import LazyObject

from chats.errors import ErrorCode, TurnStartError
from chats.models import Chat, Turn
from chats.run.asks import Asked, SessionCheck, Started, _start_asks, ask_start, get_ask_batches
from chats.services import TurnAsk, turn_start, turn_start_many
from demo_agent.scripted import Reply
from tests.chats.conftest import events_of
from tests.chats.refusals import refusals_fixture

pytestmark = pytest.mark.django_db(transaction=True)


def asks_for(chats: list[Chat], question: str = "How did NVIDIA do?") -> list[TurnAsk]:
    return [TurnAsk(chat=chat, question=question, research_effort="standard") for chat in chats]


def outcome_codes(outcomes: list) -> list[str]:
    return [o.code if isinstance(o, TurnStartError) else "started" for o in outcomes]


@pytest.fixture
def analysts(django_user_model):
    return [django_user_model.objects.create_user(f"analyst{i}", password="pw") for i in range(12)]


def test_a_burst_of_asks_costs_the_queries_of_a_few(analysts):
    few = [Chat.objects.create(owner=user) for user in analysts[:3]]
    many = [Chat.objects.create(owner=user) for user in analysts[3:]]
    with CaptureQueriesContext(connection) as three:
        assert outcome_codes(turn_start_many(asks_for(few))) == ["started"] * 3
    with CaptureQueriesContext(connection) as nine:
        assert outcome_codes(turn_start_many(asks_for(many))) == ["started"] * 9
    # The checks, locks, inserts and the chats' UPDATE are shared.
    assert len(nine.captured_queries) == len(three.captured_queries)
    assert Turn.objects.streaming().count() == 12
    for chat in few + many:
        chat.refresh_from_db()
        assert chat.active_turn.question == "How did NVIDIA do?"
        assert chat.title  # named after its first question, as one ask names it


def test_each_ask_in_a_batch_keeps_its_own_chat_and_request(analysts):
    chats = [Chat.objects.create(owner=user) for user in analysts[:3]]
    asks = [
        TurnAsk(chat=chat, question=f"Question {i}", research_effort="lite")
        for i, chat in enumerate(chats)
    ]
    started = turn_start_many(asks)
    for i, (chat, outcome) in enumerate(zip(chats, started, strict=True)):
        assert outcome.turn.chat_id == chat.pk
        assert outcome.request.message == f"Question {i}"
        assert outcome.siblings == [outcome.turn.pk]


def test_two_asks_of_one_chat_in_a_batch_start_one_turn(analysts):
    chat = Chat.objects.create(owner=analysts[0])
    outcomes = turn_start_many(asks_for([chat, chat]))
    assert outcome_codes(outcomes) == ["started", ErrorCode.TURN_IN_PROGRESS]
    assert Turn.objects.filter(chat=chat).count() == 1


def test_an_owners_limit_counts_the_asks_before_it_in_the_same_batch(analysts, settings):
    settings.AGENT_MAX_CONCURRENT_TURNS = 3
    mine = [Chat.objects.create(owner=analysts[0]) for _ in range(5)]
    theirs = Chat.objects.create(owner=analysts[1])
    turn_start(chat=mine[0], question="Already running", research_effort="lite")
    outcomes = turn_start_many(asks_for([*mine[1:], theirs]))
    assert outcome_codes(outcomes) == [
        "started",
        "started",
        ErrorCode.TOO_MANY_TURNS,
        ErrorCode.TOO_MANY_TURNS,
        "started",  # another analyst's ask is not counted against the first one's limit
    ]
    assert Turn.objects.streaming().filter(chat__owner=analysts[0]).count() == 3


def test_an_ask_for_a_turn_elsewhere_is_refused_alone(analysts):
    chats = [Chat.objects.create(owner=user) for user in analysts[:2]]
    elsewhere = turn_start(chat=chats[1], question="Theirs", research_effort="lite").turn
    Turn.objects.filter(pk=elsewhere.pk).update(status=Turn.Status.COMPLETE)
    asks = [
        TurnAsk(chat=chats[0], question="Follow up", research_effort="lite", parent_turn_id=9999),
        *asks_for([chats[0]]),
    ]
    outcomes = turn_start_many(asks)
    assert isinstance(outcomes[0], TurnStartError)
    assert "not in this chat" in str(outcomes[0])
    assert outcomes[1].turn.chat_id == chats[0].pk


def test_the_sessions_of_asks_started_together_are_looked_up_in_one_query(analysts):
    chats = [Chat.objects.create(owner=user) for user in analysts[:4]]
    sessions = [SessionStore() for _ in chats]
    for session in sessions:
        session.create()
    sessions[1].delete()  # signed out in another tab as the page asked
    sessions[3] = LazyObject()  # a websocket's session, as channels' middleware gives it
    sessions[3]._wrapped = SessionStore(session_key=sessions[0].session_key)

    def broken() -> bool:
        raise ConnectionError("the token store is down")

    checks = [
        SessionCheck(sessions[0]),
        SessionCheck(sessions[1]),
        broken,
        SessionCheck(sessions[3]),
    ]
    batch = [Asked(ask, check) for ask, check in zip(asks_for(chats), checks, strict=True)]
    with CaptureQueriesContext(connection) as queries:
        outcomes = _start_asks(batch)
    assert len([q for q in queries.captured_queries if "django_session" in q["sql"]]) == 1
    assert [type(o).__name__ for o in outcomes] == [
        "Started",
        "NoneType",
        "ConnectionError",
        "Started",
    ]
    started = {o.turn.turn.chat_id for o in outcomes if isinstance(o, Started)}
    assert started == {chats[0].pk, chats[3].pk}
    assert Turn.objects.count() == 2


# --- Through the queue and the websocket -----------------------------------------------------


@pytest.fixture
def refuse_rows():
    yield from refusals_fixture()


async def test_pages_asking_at_once_each_get_their_own_answer(connect, analysts, upstream):
    """Ten pages of ten analysts ask together; they start in a batch or two."""
    from demo_agent.scripted import answer_stream

    chats = [await Chat.objects.acreate(owner=user) for user in analysts[:10]]
    upstream.queue(*[Reply.events(*answer_stream("Shared answer.")) for _ in chats])
    clients = [await connect(user, chat) for user, chat in zip(analysts, chats, strict=False)]
    await asyncio.gather(
        *(
            c.send({"type": "ask", "message": f"Q{i}", "research_effort": "lite"})
            for i, c in enumerate(clients)
        )
    )
    for chat, client in zip(chats, clients, strict=True):
        frames = await client.receive_until("turn.finished")
        (started,) = [f for f in frames if f["type"] == "turn.started"]
        turn = await Turn.objects.aget(pk=started["turn_id"])
        assert turn.chat_id == chat.pk
        assert frames[-1]["status"] == "complete"
        assert "".join(e["content"] for e in events_of(frames) if e["type"] == "ANSWER") == (
            "Shared answer."
        )
    assert sorted(p["message"] for p in upstream.payloads) == sorted(f"Q{i}" for i in range(10))


async def test_an_ask_the_database_refuses_fails_alone_in_its_batch(
    connect, analysts, upstream, refuse_rows
):
    from demo_agent.scripted import answer_stream

    await database_sync_to_async(refuse_rows)("chats_turn", "question", "REFUSE-ME")
    chats = [await Chat.objects.acreate(owner=user) for user in analysts[:4]]
    upstream.queue(*[Reply.events(*answer_stream("Fine.")) for _ in range(3)])
    clients = [await connect(user, chat) for user, chat in zip(analysts, chats, strict=False)]
    questions = ["Q0", "Q1 REFUSE-ME", "Q2", "Q3"]
    await asyncio.gather(
        *(
            c.send({"type": "ask", "message": q, "research_effort": "lite"})
            for c, q in zip(clients, questions, strict=True)
        )
    )
    refused = await clients[1].receive()
    assert (refused["type"], refused["code"]) == ("error", "server_error")
    for client in (clients[0], clients[2], clients[3]):
        frames = await client.receive_until("turn.finished")
        assert frames[-1]["status"] == "complete"
    assert await Turn.objects.acount() == 3
    assert not await Turn.objects.filter(question__contains="REFUSE-ME").aexists()


async def test_a_turn_runs_to_its_end_when_its_page_leaves_mid_ask(analysts, upstream):
    from chats.run.registry import get_registry
    from demo_agent.scripted import answer_stream

    chat = await Chat.objects.acreate(owner=analysts[0])
    upstream.queue(Reply.events(*answer_stream("Kept.")))
    asking = asyncio.create_task(ask_start(asks_for([chat])[0], lambda: True))
    await asyncio.sleep(0)  # the ask is queued; the page goes before it is answered
    asking.cancel()
    await get_ask_batches().close()  # the batch it was in is started all the same
    turn = await Turn.objects.aget(chat=chat)
    run = get_registry().runs.get(turn.pk)
    if run is not None:
        await asyncio.wait_for(asyncio.shield(run.task), 10)
    await turn.arefresh_from_db()
    assert (turn.status, turn.answer_text) == (Turn.Status.COMPLETE, "Kept.")


async def test_a_closed_queue_refuses_asks_while_the_server_shuts_down(analysts):
    chat = await Chat.objects.acreate(owner=analysts[0])
    await get_ask_batches().close()
    with pytest.raises(TurnStartError) as refused:
        await ask_start(asks_for([chat])[0], lambda: True)
    assert refused.value.code == ErrorCode.SERVER_ERROR
    assert not await Turn.objects.aexists()


def test_an_ask_for_a_chat_deleted_meanwhile_is_refused_alone(analysts):
    chats = [Chat.objects.create(owner=user) for user in analysts[:3]]
    asks = asks_for(chats)
    Chat.objects.filter(pk=chats[1].pk).delete()
    outcomes = turn_start_many(asks)
    assert outcome_codes(outcomes) == ["started", ErrorCode.NOT_FOUND, "started"]


async def test_a_run_started_as_the_server_stops_ends_interrupted_not_streaming(analysts, upstream):
    """Its task is cancelled before it takes a step: the turn must not stay "streaming"."""
    from chats.run.registry import get_registry
    from demo_agent.scripted import answer_stream

    chat = await Chat.objects.acreate(owner=analysts[0])
    upstream.queue(Reply.events(*answer_stream("Never read.")))
    started = await database_sync_to_async(turn_start)(
        chat=chat, question="Q", research_effort="lite"
    )
    registry = get_registry()
    await registry.start(started.turn, started.request)
    await registry.shutdown()
    turn = await Turn.objects.aget(pk=started.turn.pk)
    assert (turn.status, turn.error_kind) == (Turn.Status.INTERRUPTED, Turn.ErrorKind.SERVER)
    assert turn.lease_expires_at is None
    assert not registry.runs


async def test_cards_that_render_are_announced_when_another_in_the_batch_cannot_be(analysts):
    from chats.live.relay import get_relay
    from chats.run.cards import publish_turn_cards

    chat = await Chat.objects.acreate(owner=analysts[0])
    started = await database_sync_to_async(turn_start)(
        chat=chat, question="Q", research_effort="lite"
    )
    unsaved = Turn(chat=chat, question="never stored")  # its card cannot be rendered

    class Page:
        frames: list = []

        def deliver(self, frame) -> None:
            self.frames.append(frame)

        def missed(self) -> None:
            pass

    page = Page()
    await get_relay().join(chat.pk, page)
    await publish_turn_cards("turn.started", [(unsaved, None), (started.turn, None)])
    assert [(f.kind, f.turn_id) for f in page.frames] == [("turn.started", started.turn.pk)]
