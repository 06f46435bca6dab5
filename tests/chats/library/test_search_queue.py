"""The search index's queue while a server runs: what it indexes first, how it catches up after
a failure, and how long shutdown waits for it."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone

from chats.library import search
from chats.library.search import SearchIndexQueue
from chats.models import Chat, ChatSearchDocument, Turn
from tests.chats.refusals import refusing
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@database_sync_to_async
def answered_chat(owner, answer: str, *, updated_ago: timedelta = timedelta(0)) -> int:
    """A chat whose answer is stored and whose document was never written."""
    chat = Chat.objects.create(owner=owner, title="Metals")
    Turn.objects.create(chat=chat, question="q", answer_text=answer, status=Turn.Status.COMPLETE)
    Chat.objects.filter(pk=chat.pk).update(updated_at=timezone.now() - updated_ago)
    return chat.pk


@database_sync_to_async
def indexed_in_order() -> list[int]:
    """The chats with a document, in the order their documents were first written."""
    return list(ChatSearchDocument.objects.order_by("pk").values_list("chat_id", flat=True))


async def test_fresh_answers_go_before_the_catch_up_backlog_and_the_backlog_newest_first(
    user, monkeypatch
):
    monkeypatch.setattr(search, "INDEX_BATCH", 1)
    newer = await answered_chat(user, "Zinc.", updated_ago=timedelta(days=1))
    oldest = await answered_chat(user, "Tin.", updated_ago=timedelta(days=3))  # a larger id
    fresh = await answered_chat(user, "Lead.")
    queue = SearchIndexQueue()
    await queue.catch_up(settle=timedelta(seconds=30))  # finds the two older chats
    queue.add(fresh)  # an answer that finished meanwhile

    await queue.drain()

    assert await indexed_in_order() == [fresh, newer, oldest]


async def test_a_chat_the_database_refuses_holds_back_no_other_and_the_next_pass_retries_it(
    user,
):
    chats = [await answered_chat(user, text) for text in ["Tin.", "Refused cobalt.", "Zinc."]]
    queue = SearchIndexQueue(delay=0)
    refusal = refusing("chats_chatsearchdocument", "body", "cobalt")
    await database_sync_to_async(refusal.__enter__)()
    try:
        queue.add_many(chats)
        await asyncio.wait_for(queue._task, timeout=10)
        assert await indexed_in_order() == [chats[0], chats[2]]
    finally:
        await database_sync_to_async(refusal.__exit__)(None, None, None)

    await queue.catch_up(settle=timedelta(minutes=1))  # the refused chat's window is past
    await queue.drain()
    assert await indexed_in_order() == [chats[0], chats[2], chats[1]]


async def test_a_batch_that_failed_while_serving_is_indexed_by_a_later_catch_up_pass(user):
    """The database refused the answer's batch; no start-up comes, yet the chat becomes
    searchable once the database takes writes again. This holds though the chat was changed
    before the last pass's cut-off: a pass retries the chats whose batch failed."""
    chat_id = await answered_chat(user, "Stranded cobalt output.", updated_ago=timedelta(minutes=2))
    queue = SearchIndexQueue(delay=0)
    refusal = refusing("chats_chatsearchdocument", "body", "cobalt")
    await database_sync_to_async(refusal.__enter__)()
    try:
        await queue.catch_up()  # start-up finds the chat; its batch is refused
        await asyncio.wait_for(queue._task, timeout=10)
        assert await indexed_in_order() == []
    finally:
        await database_sync_to_async(refusal.__exit__)(None, None, None)

    queue.keep_catching_up(every=timedelta(seconds=0.05))
    try:
        await wait_until(indexed_in_order)
    finally:
        await queue.drain()
    assert await indexed_in_order() == [chat_id]


async def test_shutdown_starts_no_batch_after_its_time_limit_and_start_up_indexes_the_rest(user):
    chats = [await answered_chat(user, f"Answer {n}.") for n in range(5)]
    queue = SearchIndexQueue()
    queue.add_many(chats)
    await asyncio.sleep(0)  # the queue waits its moment to batch

    await queue.drain(within=0)  # no batch starts, though that moment ends after the limit

    assert await indexed_in_order() == []
    next_start = SearchIndexQueue()
    await next_start.catch_up()
    await next_start.drain()
    assert sorted(await indexed_in_order()) == chats
