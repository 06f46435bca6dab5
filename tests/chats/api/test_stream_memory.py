"""An open event stream waiting for its turn's next frame holds none of the frames it passed
over: a client left reading a quiet stream would otherwise keep the last one (a checked answer,
another turn's events) for as long."""

from __future__ import annotations

import asyncio

import pytest

from chats.api.stream import TurnEvents
from chats.live.follow import FrameOutbox
from chats.live.protocol import encode, turn_checked
from chats.live.relay import RelayFrame
from chats.models import Turn
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_stream_waiting_for_its_next_frame_holds_none_it_skipped(chat):
    turn = await Turn.objects.acreate(chat=chat, question="How did NVIDIA do?")
    outbox = FrameOutbox(chat_id=chat.pk, max_queued=10)
    stream = TurnEvents(turn, 0, token_id=0, slot="test-stream", following=outbox)
    outbox.deliver(encode(turn_checked(turn.pk, "<p>The checked answer.</p>" * 1000)))
    waiting = asyncio.create_task(stream.__anext__())

    def holds_a_frame() -> bool:
        frame = waiting.get_coro().cr_frame
        return any(isinstance(value, RelayFrame) for value in frame.f_locals.values())

    try:
        await wait_until(lambda: not outbox.items, what="the stream took the checked frame")
        await wait_until(lambda: not holds_a_frame(), what="the stream let the frame go")
        assert not waiting.done()  # still waiting for the turn's next frame
    finally:
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
