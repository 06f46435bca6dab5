"""CPU work of a run on a thread of its own: a chart as it arrives, an answer as it finishes.

A chart is sanitised (`chats.answer.charts.safe_chart_event`) and its live HTML rendered as it
arrives; a finished answer's citations, HTML and chart placement are computed before the finish
is queued for the database (`chats.loop.batches`). That work is CPU only and grows with the
input: on the event loop it would hold up every stream's frames (300 charts arriving together
took 0.6 s), and on the database thread every ask and finish queued behind it. Here it runs one
piece at a time, so a heavy answer delays only itself. The thread still shares the GIL, which
Python hands back to the event loop every switch interval (`GIL_SWITCH_INTERVAL`,
researchsite/asgi.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor

from chats.agent.events import ChartEvent
from chats.answer.charts import chart_for_turn
from chats.live.protocol import render_charts
from chats.run.storable import StorableEvent, storable_event
from chats.services import TurnEnd, turn_render_end

_render_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="answer-render")


async def rendered(end: TurnEnd) -> TurnEnd:
    """The end with its answer rendered (`TurnEnd.rendered`), computed off the event loop."""
    loop = asyncio.get_running_loop()
    return dataclasses.replace(
        end, rendered=await loop.run_in_executor(_render_thread, turn_render_end, end)
    )


async def arrived_chart(event: ChartEvent) -> StorableEvent:
    """The chart as the log stores it (`storable_event`) with its live HTML, off the loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_render_thread, _arrive, event)


def _arrive(event: ChartEvent) -> StorableEvent:
    stored = storable_event(event)
    chart = stored.event
    if isinstance(chart, ChartEvent):  # a chart that could not be stored reads back as another
        html = render_charts([chart_for_turn(chart)])
        stored = stored._replace(event=dataclasses.replace(chart, html=html))
    return stored
