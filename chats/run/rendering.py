"""CPU work of a run on a thread of its own: a chart as it arrives, an answer as it finishes.

The one place a finished answer is rendered (`render_answer`): every way a turn ends, a run's
finish, the orphan sweep (`chats.run.finishes`), renders it here once, and the write service
(`chats.services.turn_finish_many`) stores what it is given. HTML from templates (a chart's)
is the page layer's (`chats.live.fragments`).

A chart is sanitised (`chats.answer.charts.safe_chart_event`) and its live HTML rendered as it
arrives; a finished answer's citations, HTML and chart placement are computed before the finish
is queued for the database (`chats.loop.batches`), never on the database thread: a chart and a
long answer on the process's CPU thread (`chats.loop.cpu_thread`), a short answer on the event
loop (`ended`).
"""

from __future__ import annotations

import dataclasses

from django.conf import settings

from chats.agent.events import ChartEvent
from chats.agent.transcript import Transcript
from chats.answer.charts import chart_for_turn, charts_for_turn
from chats.live.fragments import fragments
from chats.loop.cpu_thread import on_cpu_thread
from chats.run.storable import StorableEvent, storable_event
from chats.services import RenderedEnd, TurnEnd
from citations.pages import with_pending_pages
from citations.render_html import render_html
from citations.services import citations_resolve

# A short answer without charts is rendered on the event loop: it costs ~0.4 ms, less than a
# trip to the CPU thread and back, which waits for the GIL behind the loop at every switch
# interval (200 answers ending together waited up to 0.3 s for the thread).
INLINE_ANSWER_CHARS = 8_000
INLINE_CITATIONS = 64


async def ended(turn_id: int, transcript: Transcript, status: str, **outcome: str | int) -> TurnEnd:
    """How the run ended (`turn_end`), a long answer rendered off the event loop."""
    if (
        not transcript.charts
        and len(transcript.citations) <= INLINE_CITATIONS
        and len(transcript.answer) <= INLINE_ANSWER_CHARS
    ):
        return turn_end(turn_id, transcript, status, **outcome)
    return await on_cpu_thread(turn_end, turn_id, transcript, status, **outcome)


def turn_end(turn_id: int, transcript: Transcript, status: str, **outcome: str | int) -> TurnEnd:
    """How a turn ended, with its answer rendered once: what `services.turn_finish_many`
    stores. `outcome`: TurnEnd's other fields (error, error_kind...)."""
    return TurnEnd(turn_id, transcript, status, render_answer(turn_id, transcript), **outcome)


def render_answer(turn_id: int, transcript: Transcript) -> RenderedEnd:
    """Resolve and render the answer's citations, and place its charts (one parse of the
    answer for all of them). No database: the run calls it through `ended`."""
    cited = citations_resolve(
        answer=transcript.answer,
        citations=transcript.citations,
        tool_calls=transcript.tool_calls,
    )
    if settings.SOURCE_FETCH_ENABLED:  # pages cited without a passage are read afterwards
        cited = with_pending_pages(cited)
    return RenderedEnd(
        cited=cited,
        html=render_html(cited, doc_id=f"t{turn_id}"),
        charts=charts_for_turn(transcript.charts, transcript.answer),
    )


async def arrived_chart(event: ChartEvent) -> StorableEvent:
    """The chart as the log stores it (`storable_event`) with its live HTML, off the loop."""
    return await on_cpu_thread(_arrive, event)


def _arrive(event: ChartEvent) -> StorableEvent:
    stored = storable_event(event)
    chart = stored.event
    if isinstance(chart, ChartEvent):  # a chart that could not be stored reads back as another
        html = fragments().charts([chart_for_turn(chart)])
        stored = stored._replace(event=dataclasses.replace(chart, html=html))
    return stored
