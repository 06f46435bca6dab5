"""Start-up recovers each orphaned turn on its own and never keeps the site from serving."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import connect

from chats.library.search import get_search_index_queue
from chats.models import Chat, ChatSearchDocument, Turn, TurnEvent
from chats.run.lifespan import lifespan_app
from chats.run.registry import sweep_orphans
from demo_agent.scripted import Reply, answer_stream
from tests.chats.refusals import refusals_fixture
from tests.processes import python_output
from tests.servers import serve_asgi

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refuse_rows():
    yield from refusals_fixture()


@database_sync_to_async
def make_orphan(chat, *messages, question: str = "q") -> Turn:
    """A streaming turn whose lease lapsed (its process died), with these stored messages."""
    turn = Turn.objects.create(
        chat=chat, question=question, lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    TurnEvent.objects.bulk_create(
        TurnEvent(turn=turn, seq=seq, type="ANSWER", data=data)
        for seq, data in enumerate(messages, start=1)
    )
    return turn


def answer(content: str) -> dict:
    return {"type": "ANSWER", "content": content}


async def start_and_stop() -> list[str]:
    """Run the lifespan protocol through start-up and shut-down; return what it answered."""
    sent: list[dict] = []
    queue: asyncio.Queue = asyncio.Queue()
    await queue.put({"type": "lifespan.startup"})
    await queue.put({"type": "lifespan.shutdown"})

    async def send(message: dict) -> None:
        sent.append(message)

    await lifespan_app({"type": "lifespan"}, queue.get, send)
    return [m["type"] for m in sent]


async def test_an_answer_the_database_refuses_is_marked_failed_at_start_up(chat, refuse_rows):
    await database_sync_to_async(refuse_rows)("chats_turn", "answer_text", "REFUSE-ME", "UPDATE")
    refused = await make_orphan(chat, answer("REFUSE-ME"))
    good = await make_orphan(chat, answer("fine"))

    assert await start_and_stop() == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

    refused = await Turn.objects.aget(pk=refused.pk)
    assert (refused.status, refused.error_kind) == (Turn.Status.FAILED, Turn.ErrorKind.UNSAVED)
    assert "could not be saved" in refused.error
    assert refused.lease_expires_at is None and refused.finished_at is not None
    good = await Turn.objects.aget(pk=good.pk)
    assert (good.status, good.answer_text) == (Turn.Status.INTERRUPTED, "fine")


async def test_a_turn_that_cannot_even_be_marked_is_left_for_the_next_sweep(chat, refuse_rows):
    # Any update of this turn is refused: recovery logs it and still lets the site start.
    stuck = await make_orphan(chat, answer("x"), question="STUCK")
    good = await make_orphan(chat, answer("fine"))
    await database_sync_to_async(refuse_rows)("chats_turn", "question", "STUCK", "UPDATE")
    assert await start_and_stop() == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert (await Turn.objects.aget(pk=stuck.pk)).status == Turn.Status.STREAMING
    assert (await Turn.objects.aget(pk=good.pk)).status == Turn.Status.INTERRUPTED


def database_sessions() -> set[int] | None:
    """The ids of the sessions open on the test database (PostgreSQL), or None (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return {pid for (pid,) in cursor.fetchall()}


def logged_in_chat(django_user_model) -> tuple[Chat, str]:
    """A new analyst's chat, and the Cookie header of their session."""
    user = django_user_model.objects.create_user("analyst", password="pw-shutdown-1")
    browser = Client()
    browser.force_login(user)
    return Chat.objects.create(owner=user), f"sessionid={browser.cookies['sessionid'].value}"


async def ask_and_read(url: str, chat: Chat, cookie: str, *, events: int | None = None) -> int:
    """Ask over a real socket; read until `events` events have come (or the turn has finished
    when None), then leave the page. Return how many events it saw."""
    async with connect(
        f"ws://{url.removeprefix('http://')}/ws/chats/{chat.pk}/",
        additional_headers={"Cookie": cookie},
        origin=url,
    ) as socket:
        await socket.send(json.dumps({"type": "ask", "message": "Long one"}))
        seen = 0
        while events is None or seen < events:
            frame = json.loads(await asyncio.wait_for(socket.recv(), timeout=20))
            if frame["type"] == "turn.events":
                seen += len(frame["events"])
            elif frame["type"] == "turn.finished":
                break
        return seen


def test_a_stopping_server_lets_a_running_answer_finish(upstream, django_user_model):
    """Shut-down waits for the run (SHUTDOWN_GRACE_SECONDS): the page has gone, the answer
    is stored whole."""
    chat, cookie = logged_in_chat(django_user_model)
    text = " ".join(f"w{i}" for i in range(100))
    upstream.queue(Reply.events(*answer_stream(text, pieces=100), pause=0.01))
    from researchsite.asgi import application

    with serve_asgi(application, lifespan="on") as url:
        asyncio.run(ask_and_read(url, chat, cookie, events=5))

    turn = Turn.objects.get(chat=chat)
    assert (turn.status, turn.answer_text) == (Turn.Status.COMPLETE, text)


def test_stopping_the_server_mid_answer_leaves_nothing_running(
    upstream, django_user_model, settings
):
    """Past the grace period, shut-down ends the run, writes its last events and closes the
    connections it opened."""
    settings.SHUTDOWN_GRACE_SECONDS = 0
    chat, cookie = logged_in_chat(django_user_model)
    text = " ".join(f"w{i}" for i in range(400))
    upstream.queue(Reply.events(*answer_stream(text, pieces=400), pause=0.01))
    before = database_sessions()
    from researchsite.asgi import application

    with serve_asgi(application, lifespan="on") as url:
        seen = asyncio.run(ask_and_read(url, chat, cookie, events=20))
    # The page had gone; the run went on streaming until the server stopped.

    turn = Turn.objects.get(chat=chat)
    assert turn.status == Turn.Status.INTERRUPTED
    seqs = list(TurnEvent.objects.filter(turn=turn).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= seen
    assert len(seqs) < len(text.split()) + 3  # stopped mid-answer, not after it
    if before is not None:
        assert database_sessions() - before == set()


def test_an_answer_finished_just_before_shut_down_is_indexed_for_search(
    upstream, django_user_model
):
    """Indexing waits a moment after an answer (to batch); shut-down does it rather than drop
    it. (Left running on its thread past the server, it once deadlocked the next test's
    TRUNCATE in CI.)"""
    chat, cookie = logged_in_chat(django_user_model)
    upstream.queue(Reply.events(*answer_stream("Quarterly zebrafish margins", pieces=2)))
    from researchsite.asgi import application

    with serve_asgi(application, lifespan="on") as url:
        asyncio.run(ask_and_read(url, chat, cookie))

    assert Turn.objects.get(chat=chat).status == Turn.Status.COMPLETE
    assert "zebrafish" in ChatSearchDocument.objects.get(chat=chat).body


async def test_start_up_indexes_the_chats_a_dead_process_left_unindexed(user, chat):
    """A process died between storing an answer and indexing it (the queue waits a moment to
    batch): the next start-up indexes the chat."""

    @database_sync_to_async
    def answered_but_not_indexed() -> None:
        before = Chat.objects.get(pk=chat.pk).updated_at  # the document, before the answer
        ChatSearchDocument.objects.create(chat=chat, title="", body="q", chat_updated_at=before)
        Turn.objects.create(
            chat=chat,
            question="q",
            answer_text="Stranded lithium output.",
            status=Turn.Status.COMPLETE,
            finished_at=timezone.now(),
        )
        Chat.objects.filter(pk=chat.pk).update(updated_at=timezone.now())

    await answered_but_not_indexed()
    assert await start_and_stop() == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    body = await database_sync_to_async(lambda: ChatSearchDocument.objects.get(chat=chat).body)()
    assert "lithium" in body
    # Shutdown stopped the periodic catch-up and the indexing: nothing of theirs is left.
    left = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("search-")]
    assert left == []


FREEZE_SCRIPT = """
import asyncio, gc
from researchsite.heap import YOUNG_GENERATION_THRESHOLD, freeze_heap_after_startup, tune_collector

tune_collector()
assert gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD

async def started(scope, receive, send):
    await send({"type": "lifespan.startup.complete"})

async def frozen_after_each_start():
    counts = []
    async def send(message):
        counts.append(gc.get_freeze_count())
    app = freeze_heap_after_startup(started)
    before = gc.get_freeze_count()
    await app({"type": "lifespan"}, None, send)
    kept = [[] for _ in range(5000)]  # a second freeze would take these in
    await app({"type": "lifespan"}, None, send)
    return before, counts

print(*asyncio.run(frozen_after_each_start()))
"""


def test_the_start_up_heap_is_frozen_once():
    """A served process moves start-up's objects out of full collections' way, once: a test
    session (many servers in one process) must not freeze its tests' objects again and again."""
    before, counts = python_output(FREEZE_SCRIPT).split(" ", 1)
    first, second = json.loads(counts)
    assert int(before) == 0 and first > 1000 and second <= first


def test_the_site_tunes_its_collector_and_freezes_its_heap_after_start_up():
    import gc

    from researchsite.asgi import application, site_lifespan
    from researchsite.heap import YOUNG_GENERATION_THRESHOLD

    assert gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD
    # The site's lifespan (lifespan_app, inside the MCP server's session manager) is wrapped.
    assert application.application_mapping["lifespan"].__wrapped__ is site_lifespan


async def test_a_sweep_indexes_the_chats_of_the_orphaned_turns_it_finishes(user, chat):
    """The heartbeat's sweep, while serving, stores an orphan's partial answer: the chat becomes
    searchable by it, though catch-up passes skipped the chat while it was streaming."""
    await make_orphan(chat, answer("Stranded "), answer("nickel output"), question="Nickel?")
    await sweep_orphans()
    await get_search_index_queue().drain()
    body = await database_sync_to_async(lambda: ChatSearchDocument.objects.get(chat=chat).body)()
    assert "nickel output" in body
