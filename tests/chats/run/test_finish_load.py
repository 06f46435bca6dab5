"""A heavy finish on one chat does not hold up another chat's frames.

Against the real site (consumer, runner, event log, database) and a stand-in agent on a real
loopback port. One user's agent sends a ~190 KB answer with 300 charts through it (placing each
chart by a parse of the whole answer made that finish take 15 s, holding the database's write
lock); meanwhile another user's answer streams, paced, until the first has finished. No gap
between the second chat's frames may pass 250 ms while the first finishes.
"""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from chats.models import Chat, Turn
from demo_agent.scripted import Reply, Sleep
from tests.chats.conftest import events_of, sse

pytestmark = pytest.mark.django_db(transaction=True)

MAX_GAP = 0.25
PARAGRAPH = (
    "Data-centre revenue rose on demand for accelerated computing, while gaming was flat and "
    "margins held near their record; management guided to another quarter of growth. "
)


def heavy_reply(charts: int = 300, answer_chars: int = 190_000) -> tuple[Reply, str]:
    paragraphs = [f"Paragraph {n}. {PARAGRAPH * 2}" for n in range(answer_chars // 350)]
    answer = "\n\n".join(paragraphs)
    body: list = [
        sse({"type": "ANSWER", "content": answer[i : i + 8000]})
        for i in range(0, len(answer), 8000)
    ]
    for i in range(charts):
        end = max(1, len(answer) * (i + 1) // (charts + 1))
        chart = {
            "type": "CHART",
            "chart_id": f"c{i}",
            "title": f"Chart {i}",
            "start": end - 1,
            "end": end,
            "vega_lite_spec": {
                "data": {"values": [{"q": f"Q{q}", "v": q * i % 17} for q in range(1, 6)]},
                "mark": "bar",
                "encoding": {
                    "x": {"field": "q", "type": "ordinal"},
                    "y": {"field": "v", "type": "quantitative"},
                },
            },
        }
        body.append(sse(chart))
    body.append(sse({"type": "COMPLETE", "checkpoint_id": "ckpt-heavy", "consumption": []}))
    return Reply(body=body), answer


def paced_reply(release: threading.Event, pause: float = 0.02):
    """ANSWER pieces every `pause` seconds until `release` is set, then a few more and COMPLETE."""

    def body():
        n = 0
        while not release.is_set() and n < 3000:
            n += 1
            yield sse({"type": "ANSWER", "content": f"w{n} "})
            yield Sleep(pause)
        for _ in range(10):
            n += 1
            yield sse({"type": "ANSWER", "content": f"w{n} "})
            yield Sleep(pause)
        yield sse({"type": "COMPLETE", "checkpoint_id": "ckpt-paced", "consumption": []})

    return Reply(body=body())


@pytest.fixture
def server_switch_interval():
    """The GIL switch interval a serving process runs with (researchsite/asgi.py)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    yield
    sys.setswitchinterval(previous)


async def ask(client, message: str) -> int:
    await client.send({"type": "ask", "message": message, "research_effort": "standard"})
    return (await client.receive_until("turn.started"))[-1]["turn_id"]


async def test_a_finish_of_300_charts_does_not_stall_another_chats_frames(
    connect, user, other_user, upstream, server_switch_interval
):
    release = threading.Event()
    loop = asyncio.get_running_loop()
    paced_client = await connect(other_user, await Chat.objects.acreate(owner=other_user))
    heavy_client = await connect(user, await Chat.objects.acreate(owner=user))

    upstream.queue(paced_reply(release))
    paced_id = await ask(paced_client, "Stream on")
    arrivals: list[float] = []  # when each of the paced chat's event frames arrived
    streaming = asyncio.Event()  # set once the paced answer is well under way

    async def read_paced() -> None:
        while True:
            frame = await paced_client.receive(timeout=30)
            if frame["type"] == "turn.events" and frame["turn_id"] == paced_id:
                arrivals.append(loop.time())
                if len(arrivals) >= 5:
                    streaming.set()
            if frame["type"] == "turn.finished" and frame["turn_id"] == paced_id:
                return

    reader = asyncio.create_task(read_paced())
    await asyncio.wait_for(streaming.wait(), timeout=30)

    reply, answer = heavy_reply()
    upstream.queue(reply)
    heavy_id = await ask(heavy_client, "Chart everything")
    frames = await heavy_client.receive_until("turn.finished", turn_id=heavy_id, timeout=60)
    finished_at = loop.time()
    release.set()
    await asyncio.wait_for(reader, timeout=30)

    assert frames[-1]["status"] == "complete"
    turn = await Turn.objects.aget(pk=heavy_id)
    assert turn.answer_text == answer and len(turn.charts) == 300
    assert all(chart["spec"] and chart["block"] is not None for chart in turn.charts)
    # The paced chat streamed before, during and after the heavy answer's finish...
    during = [t for t in arrivals if t <= finished_at]
    assert arrivals[-1] > finished_at and len(during) > 5
    # ...and none of its frames waited on it.
    following = [*during[1:], arrivals[len(during)]]  # the frame after each, the last's included
    gaps = [later - earlier for earlier, later in zip(during, following, strict=True)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[worst] < MAX_GAP, (
        f"the paced chat's frames stopped for {gaps[worst]:.3f} s,"
        f" {finished_at - during[worst]:.3f} s before the heavy answer was finished"
    )
    assert len(events_of(paced_client.frames, paced_id)) > 10
