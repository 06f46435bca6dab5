"""Following a chat: the outbox's order and fall-behind, the placement of event frames, the log
read in chunks."""

from __future__ import annotations

import pytest

from chats.live import follow
from chats.live.follow import CATCH_UP, FrameOutbox, Placement, log_chunks, place_events
from chats.live.relay import RelayFrame


def events(first: int, last: int, turn_id: int = 1) -> RelayFrame:
    return RelayFrame("turn.events", turn_id, f"{first}-{last}", first, last)


@pytest.mark.parametrize(
    ("first", "last", "cursor", "placement"),
    [
        (5, 7, 4, Placement.NEXT),
        (3, 4, 4, Placement.SEEN),
        (1, 2, 4, Placement.SEEN),
        (6, 7, 4, Placement.GAP),  # seq 5 was lost on the way
        (3, 6, 4, Placement.GAP),  # overlaps what was sent: the log gives 5 and 6 once
    ],
)
def test_an_events_frame_is_placed_against_the_turns_cursor(first, last, cursor, placement):
    assert place_events(events(first, last), cursor) is placement


async def test_the_outbox_gives_items_in_order_and_waits_for_the_next():
    outbox = FrameOutbox(chat_id=1, max_queued=10)
    outbox.deliver(events(1, 1))
    outbox.put("own item")
    outbox.missed()
    assert [await outbox.next() for _ in range(3)] == [events(1, 1), "own item", CATCH_UP]
    waiting = outbox.next()
    outbox.deliver(events(2, 2))
    assert await waiting == events(2, 2)


async def test_a_follower_that_falls_behind_loses_event_frames_for_one_catch_up():
    outbox = FrameOutbox(chat_id=1, max_queued=3)
    finished = RelayFrame("turn.finished", 1, "card")
    for seq in range(1, 4):
        outbox.deliver(events(seq, seq))
    outbox.deliver(finished)  # the outbox is full: its event frames give way to a catch-up
    outbox.deliver(events(4, 4))
    outbox.deliver(events(5, 5))
    outbox.deliver(events(6, 6))  # full again: one catch-up is enough
    assert list(outbox.items) == [CATCH_UP, finished, events(6, 6)]


async def test_the_log_is_read_in_chunks_from_the_cursor(monkeypatch):
    monkeypatch.setattr(follow, "REPLAY_CHUNK", 2)
    log = [{"seq": seq} for seq in range(1, 6)]
    reads = []

    async def read(turn_id: int, after: int, limit: int):
        reads.append(after)
        return [e for e in log if e["seq"] > after][:limit]

    chunks = [chunk async for chunk in log_chunks(read, 7, 1)]
    assert chunks == [log[1:3], log[3:5]]
    assert reads == [1, 3, 5]
