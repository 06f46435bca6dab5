"""Time finishing an answer with many charts against its linear baseline.

    .venv/bin/python bench/finish_charts.py [--repeat N] [--charts N] [--per-chart-parse]

Finishing a turn (`chats.run.rendering.render_answer`: citations, the answer's HTML, every
chart's place in it; then the charts' HTML of the final card, `chats.pages.fragments`) on
B: a ~190 KB answer with 300 small charts placed through it. Its linear baseline is the sum of
its parts: A, the same answer without charts, plus C, the 300 charts on a one-line answer.
Goal: B within 2x of A + C (placing each chart by a parse of its own made B grow with charts x
answer: 15.4 s). `--per-chart-parse` also times that way of placing them, for comparison.
The charts arrive as the run receives them (`storable_event`: sanitised once); that is timed
apart. Not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _site import setup_django

setup_django()

from _machine import machine  # noqa: E402

from chats.agent.events import ChartEvent, event_from_data  # noqa: E402
from chats.agent.transcript import Transcript  # noqa: E402
from chats.answer.charts import answer_block_at  # noqa: E402
from chats.pages.fragments import render_charts  # noqa: E402
from chats.run.rendering import render_answer  # noqa: E402
from chats.run.storable import storable_event  # noqa: E402

GOAL = 2.0
PARAGRAPH = (
    "Data-centre revenue rose on demand for accelerated computing, while gaming was flat and "
    "margins held near their record; management guided to another quarter of growth, citing "
    "supply that now meets orders, and noted that networking doubled from a year earlier. "
)


def long_answer(target_chars: int) -> str:
    """Paragraphs, a list and a table every so often: ~`target_chars` of Markdown."""
    blocks, size, n = [], 0, 0
    while size < target_chars:
        n += 1
        if n % 10 == 0:
            block = "\n".join(f"- Item {n}.{i}: {PARAGRAPH[:60]}" for i in range(4))
        elif n % 17 == 0:
            block = "| Segment | Q1 | Q2 |\n|---|--:|--:|\n" + "\n".join(
                f"| S{i} | {i * 3} | {i * 4} |" for i in range(5)
            )
        else:
            block = f"Paragraph {n}. {PARAGRAPH * 2}"
        blocks.append(block)
        size += len(block) + 2
    return "\n\n".join(blocks)


def chart_events(answer: str, count: int) -> list[ChartEvent]:
    """`count` small bar charts, as they arrive from the agent, placed evenly through it."""
    events = []
    for i in range(count):
        end = max(1, len(answer) * (i + 1) // (count + 1))
        data = {
            "type": "CHART",
            "chart_id": f"c{i}",
            "title": f"Chart {i}",
            "chart_type": "bar",
            "caption": "US$ bn",
            "start": max(0, end - 10),
            "end": end,
            "vega_lite_spec": {
                "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
                "data": {"values": [{"q": f"Q{q}", "v": q * i % 17} for q in range(1, 6)]},
                "mark": {"type": "bar", "tooltip": True},
                "encoding": {
                    "x": {"field": "q", "type": "ordinal", "title": "Quarter"},
                    "y": {"field": "v", "type": "quantitative", "title": "US$ bn"},
                },
                "width": 320,
                "height": 200,
            },
        }
        event = event_from_data(data)
        assert isinstance(event, ChartEvent)
        events.append(event)
    return events


def arrive(events: list[ChartEvent]) -> list[ChartEvent]:
    arrived = [storable_event(event).event for event in events]
    assert all(isinstance(e, ChartEvent) and e.sanitized for e in arrived)
    return arrived  # type: ignore[return-value]


def finish(answer: str, charts: list[ChartEvent]) -> float:
    """Seconds to finish the turn: render the answer and place the charts, then their HTML."""
    transcript = Transcript(answer_parts=[answer], charts=list(charts), completed=True)
    started = time.perf_counter()
    rendered = render_answer(1, transcript)
    render_charts(rendered.charts)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--charts", type=int, default=300)
    parser.add_argument("--answer-kb", type=int, default=190)
    parser.add_argument("--per-chart-parse", action="store_true")
    args = parser.parse_args()

    answer = long_answer(args.answer_kb * 1000)
    short = "One line."
    started = time.perf_counter()
    charts = arrive(chart_events(answer, args.charts))
    arrival = time.perf_counter() - started
    on_short = arrive(chart_events(short, args.charts))

    # Interleaved rounds, the best of each: a shared machine's load then weighs on all three.
    rounds = [
        (finish(answer, []), finish(short, on_short), finish(answer, charts))
        for _ in range(args.repeat)
    ]
    a, c, b = (min(times) for times in zip(*rounds, strict=True))
    ratio = b / (a + c)
    print(f"machine: {machine()}")
    print(f"answer: {len(answer):,} characters; charts: {len(charts)}; best of {args.repeat}")
    print(f"arrival: {len(charts)} charts sanitised as they arrive: {arrival * 1000:.1f} ms")
    print(f"A  answer alone: {a * 1000:.1f} ms")
    print(f"C  {len(charts)} charts on a one-line answer: {c * 1000:.1f} ms")
    print(f"B  answer with {len(charts)} charts: {b * 1000:.1f} ms")
    print(
        f"   each chart adds {(b - a) / max(len(charts), 1) * 1000:.2f} ms to the answer's finish"
    )
    verdict = "within" if ratio <= GOAL else "NOT within"
    print(f"B / (A + C) = {ratio:.2f}: {verdict} {GOAL:g}x of the linear baseline")
    if args.per_chart_parse:
        started = time.perf_counter()
        for chart in charts:
            answer_block_at(answer, chart.end)
        each = time.perf_counter() - started
        print(f"placing each chart by a parse of its own: {each * 1000:.0f} ms")


if __name__ == "__main__":
    main()
