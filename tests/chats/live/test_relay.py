"""No lost frame: every page gets every event of its turns exactly once, in order, whatever the
load, a slow socket or a broken Redis subscription.

These run on the in-memory relay, and on Redis when REDIS_URL is set (`make test-services`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time

import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.test import Client as BrowserClient
from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.uri import parse_uri

from chats.agent.events import AnswerEvent
from chats.live.event_log import EventLog
from chats.live.relay import RedisRelay, RelayFrame, get_relay
from chats.loop.ticks import Ticks
from chats.models import Chat, Turn, TurnEvent
from demo_agent.scripted import ReceivedRequest, Reply, Sleep
from tests.chats.conftest import events_of
from tests.servers import serve_asgi
from tests.waiting import wait_until, wait_until_sync

pytestmark = pytest.mark.django_db(transaction=True)

on_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="Redis pub/sub: make test-services runs it"
)


def numbered_run(
    request: ReceivedRequest, *, events: int, size: int = 8, pause: float = 0.002
) -> Reply:
    """A run whose ANSWER chunks say which question they answer and their place in it."""
    question = (request.json or {}).get("message", "")
    chunks = [
        {"type": "ANSWER", "content": f"{question}:{i:04d}".ljust(size) + " "}
        for i in range(events)
    ]
    complete = {"type": "COMPLETE", "checkpoint_id": "ckpt-1", "consumption": []}
    return Reply.events(*chunks, complete, pause=pause)


def assert_whole(frames: list[dict], turn_id: int, question: str, events: int) -> None:
    """Every event exactly once, in order, then the turn's finished card."""
    got = events_of(frames, turn_id)
    assert [e["seq"] for e in got] == list(range(1, events + 2))  # + COMPLETE
    answer = [e["content"].split(":")[1].strip() for e in got if e["type"] == "ANSWER"]
    assert answer == [f"{i:04d}" for i in range(events)]
    assert all(e["content"].startswith(question + ":") for e in got if e["type"] == "ANSWER")
    finished = [f for f in frames if f["type"] == "turn.finished" and f["turn_id"] == turn_id]
    assert [f["status"] for f in finished][-1:] == ["complete"]


class Page:
    """A page in another server process: a relay subscriber that keeps what reaches it."""

    def __init__(self) -> None:
        self.frames: list[dict] = []
        self.missed_count = 0

    def deliver(self, frame: RelayFrame) -> None:
        self.frames.append(json.loads(frame.text))

    def missed(self) -> None:
        self.missed_count += 1


@database_sync_to_async
def chats_of_new_users(django_user_model, count: int) -> list[tuple]:
    users = [django_user_model.objects.create_user(f"analyst{i}") for i in range(count)]
    return [(user, Chat.objects.create(owner=user)) for user in users]


async def test_every_page_gets_every_event_once_in_order_under_concurrency(
    upstream, connect, django_user_model
):
    """Twenty chats stream at once, each watched by two pages (one joining mid-stream) here
    and, on Redis, by a page in another process: no page misses or repeats an event."""
    chats, events = 20, 60
    upstream.respond = lambda request: numbered_run(request, events=events, pause=0.05)
    owned = await chats_of_new_users(django_user_model, chats)
    elsewhere = (
        RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX) if settings.REDIS_URL else None
    )
    remote_pages = {}
    try:
        if elsewhere is not None:
            for _, chat in owned:
                remote_pages[chat.pk] = Page()
                await elsewhere.join(chat.pk, remote_pages[chat.pk])
        askers = [await connect(user, chat) for user, chat in owned]
        for client, (_, chat) in zip(askers, owned, strict=True):
            await client.send({"type": "ask", "message": f"q{chat.pk}"})
        # Mid-stream: the pages that join now read the log, then follow live.
        await asyncio.gather(*(client.receive_until("turn.events") for client in askers))
        joiners = await asyncio.gather(*(connect(user, chat) for user, chat in owned))
        for client in joiners:
            await client.send({"type": "sync", "cursors": {}, "newest_turn_id": 0})
        for client in askers + joiners:
            await client.receive_until("turn.finished", timeout=60)
        turns = {t.chat_id: t.pk for t in await database_sync_to_async(list)(Turn.objects.all())}
        for client, (_, chat) in zip(askers, owned, strict=True):
            assert_whole(client.frames, turns[chat.pk], f"q{chat.pk}", events)
        mid_stream = 0
        for client, (_, chat) in zip(joiners, owned, strict=True):
            if not events_of(client.frames):
                continue  # joined after the answer was done: its finished card has it all
            mid_stream += 1
            assert_whole(client.frames, turns[chat.pk], f"q{chat.pk}", events)
            assert client.frames[0]["type"] == "turn.started"  # from its sync
        assert mid_stream >= chats // 2  # most joined mid-stream: the log, then live
        if elsewhere is not None:
            pages = remote_pages.values()
            await wait_until(
                lambda: all(
                    p.frames[-1:] and p.frames[-1]["type"] == "turn.finished" for p in pages
                )
            )
            for chat_id, page in remote_pages.items():
                assert page.missed_count == 0
                assert_whole(page.frames, turns[chat_id], f"q{chat_id}", events)
    finally:
        if elsewhere is not None:
            await elsewhere.close()


@database_sync_to_async
def streaming_turn(chat) -> Turn:
    return Turn.objects.create(chat=chat, question="q", status=Turn.Status.STREAMING)


@database_sync_to_async
def logged_without_a_frame(turn: Turn, seqs: range) -> None:
    """Events in the log whose frames never reached the page (lost on the way)."""
    for seq in seqs:
        event = AnswerEvent(content=f"e{seq} ")
        TurnEvent.objects.create(turn=turn, seq=seq, type=event.type, data=event.data)


async def following(connect, user, chat, turn: Turn):
    """A page that has read the turn's log (its first event, e1) and follows it live: the sync's
    answer is that event, sent after the last read of the log the sync makes."""
    await logged_without_a_frame(turn, range(1, 2))
    page = await connect(user, chat)
    await page.send({"type": "sync", "cursors": {str(turn.pk): 0}, "newest_turn_id": turn.pk})
    await received_events(page, 1)
    return page


async def received_events(page, count: int) -> list[str]:
    """Receive frames until the page has `count` events; return their contents."""
    while len(events_of(page.frames)) < count:
        await page.receive()
    return [e["content"] for e in events_of(page.frames)]


async def test_a_frame_after_a_gap_brings_the_missing_events_from_the_log(connect, user, chat):
    turn = await streaming_turn(chat)
    page = await following(connect, user, chat, turn)
    await logged_without_a_frame(turn, range(2, 5))
    log = EventLog(Ticks(60))
    log.append(chat.pk, turn.pk, 5, AnswerEvent(content="e5 "))
    await log.flush()  # stores seq 5 and relays it: the page sees 5 after its cursor 1
    assert await received_events(page, 5) == ["e1 ", "e2 ", "e3 ", "e4 ", "e5 "]


async def test_a_page_told_it_missed_frames_catches_up_from_the_log(connect, user, chat):
    turn = await streaming_turn(chat)
    page = await following(connect, user, chat, turn)
    await logged_without_a_frame(turn, range(2, 5))
    (consumer,) = get_relay().subscribers[chat.pk]
    consumer.missed()  # what RedisRelay does once it has reconnected and listed itself again
    assert await received_events(page, 4) == ["e1 ", "e2 ", "e3 ", "e4 "]


@on_redis
async def test_a_broken_subscription_is_reported_and_frames_flow_again(user, chat):
    """Redis drops the subscriber (as it does past its output buffer limit): the pages of that
    process are told to catch up from the log, and later frames arrive, in order."""
    here, elsewhere = get_relay(), RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()
    try:
        await elsewhere.join(chat.pk, page)

        def frame(seq: int) -> RelayFrame:
            text = json.dumps({"type": "turn.events", "turn_id": 1, "events": [{"seq": seq}]})
            return RelayFrame("turn.events", 1, text, seq, seq)

        await here.publish([(chat.pk, frame(1))])
        await wait_until(lambda: len(page.frames) == 1)
        # That process's subscription only: the Redis server may serve others.
        host, port = elsewhere.inbox.pubsub.connection._writer.get_extra_info("sockname")[:2]
        killed = await here.redis.client_kill_filter(_type="pubsub", addr=f"{host}:{port}")
        assert killed == 1
        await wait_until(lambda: page.missed_count)  # after RECONNECT_DELAY and a round trip
        assert page.missed_count == 1
        await here.publish([(chat.pk, frame(2)), (chat.pk, frame(3))])
        await wait_until(lambda: page.frames[-1]["events"][0]["seq"] == 3)
        seqs = [f["events"][0]["seq"] for f in page.frames]
        assert seqs[0] == 1 and seqs[-2:] == [2, 3] and seqs == sorted(set(seqs))
    finally:
        await elsewhere.close()


@on_redis
async def test_frames_flow_after_redis_forgets_the_publishing_script(chat):
    """A tick's frames go in one script call; a Redis that restarted has no scripts cached, and
    the relay loads the script again rather than losing frames. Text with the message's own
    separator and non-ASCII arrives as sent. (Not SCRIPT FLUSH: it would empty the cache of
    every client of this Redis server.)"""
    here, elsewhere = get_relay(), RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()

    def frame(seq: int) -> RelayFrame:
        events = [{"seq": seq, "content": f"a|b €{seq}"}]
        data = {"type": "turn.events", "turn_id": 1, "events": events}
        return RelayFrame("turn.events", 1, json.dumps(data, ensure_ascii=False), seq, seq)

    try:
        await elsewhere.join(chat.pk, page)
        await here.publish([(chat.pk, frame(1)), (chat.pk, frame(2))])
        await wait_until(lambda: len(page.frames) == 2)
        here.publisher.publish_all.sha = "0" * 40  # a script Redis does not know: NOSCRIPT
        await here.publish([(chat.pk, frame(3))])
        await wait_until(lambda: len(page.frames) == 3)
        assert [f["events"][0] for f in page.frames] == [
            {"seq": seq, "content": f"a|b €{seq}"} for seq in (1, 2, 3)
        ]
        assert page.missed_count == 0
    finally:
        await elsewhere.close()


def numbered(seq: int) -> RelayFrame:
    text = json.dumps({"type": "turn.events", "turn_id": 1, "events": [{"seq": seq}]})
    return RelayFrame("turn.events", 1, text, seq, seq)


def seqs_of(page: Page) -> list[int]:
    return [f["events"][0]["seq"] for f in page.frames]


@on_redis
async def test_frames_travel_only_to_the_processes_that_show_their_chat(chat):
    """A chat whose pages are all in the publishing process costs Redis none of its frames;
    once another process shows it, that process alone gets them, and once its page has left,
    no process does."""
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    bystander = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)  # shows another chat
    local, remote, other = Page(), Page(), Page()
    other_chat = chat.pk + 1_000_000
    watcher = here.redis.pubsub()  # sees every message sent to any process's inbox
    await watcher.psubscribe(f"{settings.RELAY_PREFIX}process.*")
    sent_to: list[bytes] = []

    async def watch() -> None:
        async for message in watcher.listen():
            if message["type"] == b"pmessage" or message["type"] == "pmessage":
                sent_to.append(message["channel"])

    watching = asyncio.create_task(watch())

    async def publish_then_wait(seq: int) -> None:
        """Publish a frame of the chat, then one of the bystander's chat: frames go out in
        order, so once the watcher has seen the second, it has seen wherever the first went."""
        markers = sent_to.count(bystander.inbox.channel) + 1
        await here.publish([(chat.pk, numbered(seq))])
        await here.publish([(other_chat, numbered(seq))])
        await wait_until(lambda: sent_to.count(bystander.inbox.channel) == markers)

    try:
        await here.join(chat.pk, local)
        await bystander.join(other_chat, other)
        await publish_then_wait(1)
        assert set(sent_to) == {bystander.inbox.channel}

        await elsewhere.join(chat.pk, remote)
        await publish_then_wait(2)
        assert set(sent_to) == {bystander.inbox.channel, elsewhere.inbox.channel}
        await wait_until(lambda: seqs_of(remote) == [2])

        await elsewhere.leave(chat.pk, remote)
        await elsewhere.listing.request_pass()  # the lister has done what the leave asked
        assert await here.redis.zscore(here.listeners_key(chat.pk), elsewhere.origin) is None
        sent_to.clear()
        await publish_then_wait(3)
        assert set(sent_to) == {bystander.inbox.channel}
        assert seqs_of(local) == [1, 2, 3]
        assert remote.missed_count == local.missed_count == other.missed_count == 0
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await watcher.aclose()
        await elsewhere.close()
        await bystander.close()


@on_redis
async def test_a_listing_redis_lost_is_made_again_and_its_pages_catch_up(chat, monkeypatch):
    """Redis forgets a process's listing of a chat (evicted, or restarted without its data):
    the renewal finds it gone, lists the process again and tells the chat's pages there to
    catch up from the log; frames reach them again."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "LISTEN_RENEW", 0.2)
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()
    key = here.listeners_key(chat.pk)
    try:
        await elsewhere.join(chat.pk, page)
        await here.redis.delete(key)
        await wait_until(lambda: page.missed_count == 1)
        assert await here.redis.zscore(key, elsewhere.origin) is not None
        await here.publish([(chat.pk, numbered(1))])
        await wait_until(lambda: seqs_of(page) == [1])
    finally:
        await elsewhere.close()
    assert await here.redis.zscore(key, elsewhere.origin) is None  # closing unlists


@on_redis
async def test_a_page_joining_as_the_last_one_leaves_gets_every_frame(chat):
    """The last page of a chat leaves (its process unlists itself, in the background) as a new
    one joins, before, during or after the unlisting: frames published once the join has
    returned reach the new page, and the process stays listed."""
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    pages = [Page(), Page()]
    try:
        await elsewhere.join(chat.pk, pages[0])
        for seq in range(1, 41):
            leaving, joining = pages[(seq + 1) % 2], pages[seq % 2]
            await elsewhere.leave(chat.pk, leaving)
            await asyncio.sleep(seq * 0.00005)  # 0 to 2 ms: a round trip to Redis is ~0.3
            await elsewhere.join(chat.pk, joining)
            await here.publish([(chat.pk, numbered(seq))])
            await wait_until(lambda: seqs_of(joining)[-1:] == [seq], timeout=2)  # noqa: B023
        await elsewhere.listing.request_pass()  # the lister has done all it was asked
        key = elsewhere.listeners_key(chat.pk)
        assert await elsewhere.redis.zscore(key, elsewhere.origin) is not None
    finally:
        await elsewhere.close()


@on_redis
async def test_a_lapsed_listing_gets_no_frames_and_its_pages_catch_up(chat, monkeypatch):
    """A listing whose lease ran out (its process stopped renewing) is ignored by publishers;
    when its process renews it after all, its pages are told to catch up."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "LISTEN_RENEW", 1.0)
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()
    try:
        await elsewhere.join(chat.pk, page)
        await here.redis.zadd(here.listeners_key(chat.pk), {elsewhere.origin: 1})  # in 1970
        listed = [here.origin, here.publisher.listeners_prefix, str(chat.pk)]
        assert await here.publisher.listeners(args=listed) == []
        await wait_until(lambda: page.missed_count == 1)  # the renewal, within a second
        await here.publish([(chat.pk, numbered(1))])
        await wait_until(lambda: seqs_of(page) == [1])
    finally:
        await elsewhere.close()


@on_redis
async def test_a_join_whose_listing_is_slow_keeps_the_subscription(chat, monkeypatch):
    """Redis answers, but listing the process takes longer than JOIN_TIMEOUT: the join returns,
    the subscription stays as it is (no reconnection, no catch-up for the other pages), and
    once the listing lands the chat's pages are told to catch up."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "JOIN_TIMEOUT", 0.3)  # the pass has PUBLISH_TIMEOUT
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    other_chat, other, slow = chat.pk + 1_000_000, Page(), Page()
    list_in_redis = elsewhere.listing.list_in_redis
    lands = asyncio.Event()

    async def slow_listing(to_list, to_unlist):
        if chat.pk in to_list:
            await lands.wait()
        return await list_in_redis(to_list, to_unlist)

    try:
        await elsewhere.join(other_chat, other)
        reader = elsewhere.inbox.reader
        elsewhere.listing.list_in_redis = slow_listing
        # The join returns while the listing is held, well before the pass's own time limit.
        await asyncio.wait_for(elsewhere.join(chat.pk, slow), timing.PUBLISH_TIMEOUT / 2)
        assert slow.missed_count == 0  # nothing to catch up on until the listing lands
        lands.set()
        await wait_until(lambda: slow.missed_count == 1)
        assert elsewhere.inbox.reader is reader and other.missed_count == 0
        await here.publish([(chat.pk, numbered(1))])
        await wait_until(lambda: seqs_of(slow) == [1])
    finally:
        await elsewhere.close()


@on_redis
async def test_an_unlisting_that_failed_after_redis_took_it_is_listed_again(chat):
    """The pass that unlists a chat fails after Redis has done it: a page that joins later
    waits for the process to be listed again, and gets the frames."""
    here = get_relay()
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    first, second = Page(), Page()
    list_in_redis = elsewhere.listing.list_in_redis

    async def fails_after_unlisting(to_list, to_unlist):
        result = await list_in_redis(to_list, to_unlist)
        if to_unlist:
            raise ConnectionError("lost the reply")
        return result

    try:
        await elsewhere.join(chat.pk, first)
        elsewhere.listing.list_in_redis = fails_after_unlisting
        await elsewhere.leave(chat.pk, first)
        assert not await elsewhere.listing.request_pass()  # the unlisting's pass, failed
        elsewhere.listing.list_in_redis = list_in_redis
        await elsewhere.join(chat.pk, second)
        assert await here.redis.zscore(here.listeners_key(chat.pk), elsewhere.origin)
        await here.publish([(chat.pk, numbered(1))])
        await wait_until(lambda: seqs_of(second) == [1])
    finally:
        await elsewhere.close()


@on_redis
async def test_closing_the_relay_releases_a_join_that_waits(chat, monkeypatch):
    """A page joins while Redis hangs on the listing and the server shuts down: the join
    returns at once rather than at JOIN_TIMEOUT; closing takes PUBLISH_TIMEOUT at most (its
    unlisting hangs too), and leaves nothing running."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "PUBLISH_TIMEOUT", 2.0)  # the join's release is not this
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()

    listing = asyncio.Event()

    async def hangs(to_list, to_unlist):
        listing.set()
        await asyncio.Future()  # never answers

    elsewhere.listing.list_in_redis = hangs
    joining = asyncio.create_task(elsewhere.join(chat.pk, page))
    await listing.wait()  # the join waits for a pass that hangs
    started = time.monotonic()
    closing = asyncio.create_task(elsewhere.close())
    await asyncio.wait_for(joining, 0.3)
    await closing
    assert time.monotonic() - started < 3.0
    assert elsewhere.listing.task.done() and elsewhere.inbox.reader.done()


async def test_a_redis_that_never_answers_holds_up_neither_pages_nor_publishes(chat, monkeypatch):
    """Redis accepts connections and never replies: a page joins after JOIN_TIMEOUT, a
    publish returns without waiting, its frames delivered here, and closing takes
    PUBLISH_TIMEOUT."""
    from chats.live.relay import timing

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            pass  # reads every command, answers none

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setattr(timing, "JOIN_TIMEOUT", 0.3)
    monkeypatch.setattr(timing, "PUBLISH_TIMEOUT", 0.3)
    stalled = RedisRelay(f"redis://127.0.0.1:{port}/0", "stalled:")
    page = Page()
    text = json.dumps({"type": "turn.events", "turn_id": 1, "events": [{"seq": 1}]})
    try:
        started = time.monotonic()
        await stalled.join(chat.pk, page)
        assert time.monotonic() - started < 1.5
        # A publish never waits for Redis: the coroutine ends at its first step.
        publishing = stalled.publish([(chat.pk, RelayFrame("turn.events", 1, text, 1, 1))])
        with pytest.raises(StopIteration):
            publishing.send(None)
        assert [f["events"][0]["seq"] for f in page.frames] == [1]
    finally:
        started = time.monotonic()
        await stalled.close()
        assert time.monotonic() - started < 1.5
        server.close()


class StallingProxy:
    """A TCP proxy in front of the test Redis that can stop passing bytes on, both ways, as a
    Redis that hangs (or a network that drops packets) would."""

    def __init__(self, url: str) -> None:
        target = parse_uri(url.replace("redis://", "ws://", 1))
        self.target = (target.host, target.port)
        self.database = target.resource_name  # "/9": the listings live in REDIS_URL's database
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}{self.database}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        await asyncio.gather(
            self._pump(reader, upstream_writer), self._pump(upstream_reader, writer)
        )

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self.flowing.wait()
                sink.write(data)
                await sink.drain()
        except ConnectionError:
            pass
        finally:
            sink.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@on_redis
async def test_frames_redis_did_not_take_are_caught_up_once_it_answers(chat, monkeypatch):
    """While Redis hangs for this process, its publishes return at once and its own pages get
    every frame; once Redis answers, pages of the chat in other processes are told to catch up
    from the log, and later frames reach them as before."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "PUBLISH_TIMEOUT", 0.3)
    proxy = StallingProxy(settings.REDIS_URL)
    here = RedisRelay(await proxy.start(), settings.RELAY_PREFIX)
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    local, remote = Page(), Page()

    def frame(seq: int) -> RelayFrame:
        text = json.dumps({"type": "turn.events", "turn_id": 1, "events": [{"seq": seq}]})
        return RelayFrame("turn.events", 1, text, seq, seq)

    try:
        await here.join(chat.pk, local)
        await elsewhere.join(chat.pk, remote)
        await here.publish([(chat.pk, frame(1))])
        await wait_until(lambda: len(remote.frames) == 1)

        proxy.flowing.clear()
        publishing = here.publish([(chat.pk, frame(2))])
        with pytest.raises(StopIteration):  # a publish never waits for Redis
            publishing.send(None)
        await wait_until(lambda: chat.pk in here.publisher.unsent)  # PUBLISH_TIMEOUT passed
        assert remote.missed_count == 0 and len(remote.frames) == 1

        proxy.flowing.set()
        await wait_until(lambda: remote.missed_count >= 1)
        await here.publish([(chat.pk, frame(3))])
        await wait_until(lambda: remote.frames[-1]["events"][0]["seq"] == 3)
        assert [f["events"][0]["seq"] for f in local.frames] == [1, 2, 3]
    finally:
        proxy.flowing.set()
        await here.close()
        await elsewhere.close()
        proxy.close()


@on_redis
async def test_a_page_that_joined_while_redis_hung_gets_frames_once_it_answers(chat, monkeypatch):
    """The join gives up after JOIN_TIMEOUT; once Redis answers, the process lists itself for
    the chat after all, the page is told to catch up, and frames from elsewhere reach it."""
    from chats.live.relay import timing

    monkeypatch.setattr(timing, "JOIN_TIMEOUT", 0.3)
    proxy = StallingProxy(settings.REDIS_URL)
    here = RedisRelay(await proxy.start(), settings.RELAY_PREFIX)
    elsewhere = RedisRelay(settings.REDIS_URL, settings.RELAY_PREFIX)
    page = Page()
    text = json.dumps({"type": "turn.events", "turn_id": 1, "events": [{"seq": 1}]})
    try:
        proxy.flowing.clear()
        started = time.monotonic()
        await here.join(chat.pk, page)
        assert time.monotonic() - started < 1.5
        proxy.flowing.set()
        await wait_until(lambda: page.missed_count == 1)
        await elsewhere.publish([(chat.pk, RelayFrame("turn.events", 1, text, 1, 1))])
        await wait_until(lambda: len(page.frames) == 1)
    finally:
        proxy.flowing.set()
        await here.close()
        await elsewhere.close()
        proxy.close()


class SlowPage:
    """A page on a real socket that reads only when told to, with a tiny receive buffer: while
    it does not read, the server's writes back up as they would behind a slow link."""

    def __init__(self, url: str, path: str, cookie: str) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.protocol = ClientProtocol(parse_uri(f"ws://{host}:{port}{path}"), max_size=None)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(30)
        self.sock.connect((host, int(port)))
        request = self.protocol.connect()
        request.headers["Cookie"] = cookie
        request.headers["Origin"] = url
        self.protocol.send_request(request)
        self._flush()
        while not self.protocol.events_received():  # the handshake's response
            self.protocol.receive_data(self.sock.recv(65536))
        assert self.protocol.handshake_exc is None

    def send(self, frame: dict) -> None:
        self.protocol.send_text(json.dumps(frame).encode())
        self._flush()

    def frames_until_finished(self) -> list[dict]:
        frames: list[dict] = []
        while not frames or frames[-1]["type"] != "turn.finished":
            self.protocol.receive_data(self.sock.recv(65536))
            for event in self.protocol.events_received():
                if event.opcode == Opcode.TEXT:
                    frames.append(json.loads(event.data))
        return frames

    def _flush(self) -> None:
        self.sock.sendall(b"".join(self.protocol.data_to_send()))


class Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_page_that_reads_slowly_is_caught_up_from_the_log(upstream, django_user_model, settings):
    """The page stops reading while a long answer streams: its socket backs up, its queued
    event frames are dropped and the log fills the gap. It still gets every event once."""
    settings.WS_MAX_QUEUED_FRAMES = 4
    settings.AGENT_MAX_ANSWER_CHARS = 20_000_000
    # A burst of 300 events of 20 KB (6 MB, more than the kernel buffers between server and
    # page), then a trickle that keeps the turn streaming after the page reads again, so it
    # catches up event by event rather than from the finished card.
    burst, trickle = 300, 120
    events = burst + trickle

    def burst_then_trickle(request: ReceivedRequest) -> Reply:
        steps = [s for s in numbered_run(request, events=events, size=20_000).body]
        sent = [s for s in steps if not isinstance(s, Sleep)]  # each event, then COMPLETE
        big = [step for event in sent[:burst] for step in (event, Sleep(0.002))]
        slow = [step for event in sent[burst:-1] for step in (event, Sleep(0.03))]
        return Reply(body=[*big, *slow, sent[-1]])

    upstream.respond = burst_then_trickle
    user = django_user_model.objects.create_user("slow-reader")
    chat = Chat.objects.create(owner=user)
    browser = BrowserClient()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    from researchsite.asgi import application

    warnings = Warnings()
    logging.getLogger("chats.live.follow").addHandler(warnings)
    try:
        # With its lifespan, as in production: the server's shutdown ends what the run left.
        with serve_asgi(application, lifespan="on") as url:
            page = SlowPage(url, f"/ws/chats/{chat.pk}/", cookie)
            page.send({"type": "ask", "message": "slow"})
            # Not reading, until the server has dropped the page's queued frames.
            wait_until_sync(lambda: any("behind" in m for m in warnings.messages), timeout=60)
            frames = page.frames_until_finished()
    finally:
        logging.getLogger("chats.live.follow").removeHandler(warnings)
    # The path was taken, and warned once per episode, not once per dropped frame (hundreds): how
    # many episodes there are depends on the machine's load (a catch-up may itself fall behind).
    assert 1 <= len([m for m in warnings.messages if "behind" in m]) <= 10
    turn = Turn.objects.get(chat=chat)
    assert_whole(frames, turn.pk, "slow", events)
