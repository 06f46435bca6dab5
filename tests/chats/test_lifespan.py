"""Start-up recovers each orphaned turn on its own and never keeps the site from serving."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from chats.lifespan import lifespan_app
from chats.models import Turn, TurnEvent
from tests.chats.refusals import refusals_fixture

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
