"""The agent's charts as every view shows them: a spec made safe to draw, or its data table.

A CHART event is made safe once, as it arrives (`safe_chart_event`, called by
`chats.run.storable.storable_event`): its spec goes through the allow-list of
`chats/answer/chart_spec.py`, its data becomes a table within the caps (CHART_MAX_ROWS,
CHART_MAX_COLUMNS, CHART_MAX_CELL_CHARS), and the event log stores that result. A spec that breaks
a rule is not drawn: "This chart could not be drawn safely", and its data table instead. The page
draws the safe spec with a loader that refuses every load (`chats/static/chats/charts.js`).

`chart_for_turn` turns such an event into what `Turn.charts` stores and every view shows (the
chat page, the live frame, the admin, shared pages and the Markdown export); `chart_blocks`
places all of a turn's charts from one parse of its answer.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from typing import Any

from django.conf import settings
from markdown_it import MarkdownIt

from chats.agent.events import ChartEvent
from chats.answer import chart_spec
from chats.answer.chart_spec import MAX_SPEC_BYTES, DataCaps, UnsafeSpec

__all__ = ["MAX_SPEC_BYTES", "UnsafeSpec", "sanitize_spec"]

MAX_TITLE = 300
MAX_CAPTION = 2_000
MAX_ID = 200
UNSAFE = "This chart could not be drawn safely."


def chart_caps() -> DataCaps:
    return DataCaps(
        rows=settings.CHART_MAX_ROWS,
        columns=settings.CHART_MAX_COLUMNS,
        cell_chars=settings.CHART_MAX_CELL_CHARS,
    )


def sanitize_spec(spec: Any, caps: DataCaps | None = None) -> dict[str, Any]:
    """The spec as it is drawn, within the settings' caps by default (`chart_spec`)."""
    return chart_spec.sanitize_spec(spec, caps or chart_caps())


def safe_chart_event(event: ChartEvent) -> ChartEvent:
    """The event as the log stores it: its spec sanitised (or refused), its data a capped
    table, its texts capped. Whatever `sanitized` the agent sent is replaced."""
    caps = chart_caps()
    try:
        spec: dict[str, Any] | None = sanitize_spec(event.vega_lite_spec, caps)
        note = ""
    except UnsafeSpec as refusal:
        spec, note = None, f"{UNSAFE} {refusal} Its data is shown as a table instead."
    return dataclasses.replace(
        event,
        chart_id=event.chart_id[:MAX_ID],
        title=event.title[:MAX_TITLE],
        chart_type=event.chart_type[:MAX_ID],
        caption=event.caption[:MAX_CAPTION],
        vega_lite_spec=None,
        data_points=None,
        sanitized={"spec": spec, "note": note, "table": chart_table(event, caps)},
    )


def stored_chart_made_safe(chart: dict[str, Any]) -> dict[str, Any]:
    """A chart stored under older rules, under today's: its spec through the allow-list (or
    refused, with the note), its table within the caps (migration 0011)."""
    caps = chart_caps()
    chart = dict(chart)
    if chart.get("spec") is not None:
        try:
            chart["spec"] = sanitize_spec(chart["spec"], caps)
        except UnsafeSpec as refusal:
            chart["spec"] = None
            chart["note"] = f"{UNSAFE} {refusal} Its data is shown as a table instead."
    table = chart.get("table") if isinstance(chart.get("table"), dict) else {}
    columns, rows = list(table.get("columns") or []), list(table.get("rows") or [])
    chart["table"] = {
        "columns": [cell_text(c, caps.cell_chars) for c in columns[: caps.columns]],
        "rows": [
            [cell_text(c, caps.cell_chars) for c in row[: caps.columns]]
            for row in rows[: caps.rows]
            if isinstance(row, list)
        ],
        "total_rows": table.get("total_rows", table.get("total", len(rows))),
        "total_columns": table.get("total_columns", len(columns)),
    }
    return chart


# --- What a turn stores and every view shows -----------------------------------------------


def chart_for_turn(event: ChartEvent, answer: str | None = None) -> dict[str, Any]:
    """Return the chart as `Turn.charts` stores it: safe spec (or a note), data table, place.

    `block` is the index of the answer's top-level Markdown block that holds the chart's `end`
    offset: the chart is shown after that block (after the whole answer when it is None).
    """
    return charts_for_turn([event], answer)[0]


def charts_for_turn(events: list[ChartEvent], answer: str | None) -> list[dict[str, Any]]:
    """`chart_for_turn` for every chart of a turn, placed from one parse of the answer."""
    safe = [e if e.sanitized is not None else safe_chart_event(e) for e in events]
    blocks = chart_blocks(answer, [e.end for e in safe]) if answer is not None else None
    return [
        {
            "chart_id": event.chart_id,
            "title": event.title,
            "chart_type": event.chart_type,
            "caption": event.caption,
            **event.sanitized,  # spec, note, table
            "start": event.start,
            "end": event.end,
            "block": blocks[index] if blocks is not None else None,
        }
        for index, event in enumerate(safe)
    ]


def chart_table(event: ChartEvent, caps: DataCaps) -> dict[str, Any]:
    """The chart's data as rows and columns: the spec's inline values, else `data_points`."""
    spec = event.vega_lite_spec if isinstance(event.vega_lite_spec, dict) else {}
    data = spec.get("data") if isinstance(spec.get("data"), dict) else {}
    rows = data.get("values")
    if not isinstance(rows, list) or not rows:
        rows = event.data_points if isinstance(event.data_points, list) else []
    return rows_table(rows, caps)


def rows_table(rows: list[Any], caps: DataCaps) -> dict[str, Any]:
    """A list of objects as a table: the union of keys as columns, cells as short text, within
    the caps; `total_rows` and `total_columns` say how many there were."""
    columns: dict[str, None] = {}  # the union of keys, in order of appearance
    for row in rows:
        for key in row if isinstance(row, dict) else ("value",):
            columns[str(key)] = None
    shown = list(columns)[: caps.columns]
    body = []
    for row in rows[: caps.rows]:
        item = {str(k): v for k, v in row.items()} if isinstance(row, dict) else {"value": row}
        body.append([cell_text(item.get(c, ""), caps.cell_chars) for c in shown])
    return {
        "columns": [c[: caps.cell_chars] for c in shown],
        "rows": body,
        "total_rows": len(rows),
        "total_columns": len(columns),
    }


def cell_text(value: Any, limit: int) -> str:
    """A cell as text: scalars as they read, nested values as compact JSON; past `limit`
    characters, cut and ended with an ellipsis."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    elif isinstance(value, bool | int | float):
        text = json.dumps(value) if isinstance(value, bool) else str(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (ValueError, TypeError, RecursionError):
            text = "…"
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def table_cut_text(table: dict[str, Any], *, download: bool = False) -> str:
    """What a table shown within its caps leaves out: "Showing 500 of 12,000 rows; download
    the CSV for all." (empty when nothing is left out)."""
    rows, total_rows = len(table.get("rows") or ()), table.get("total_rows", 0)
    columns, total_columns = len(table.get("columns") or ()), table.get("total_columns", 0)
    parts = []
    if total_rows > rows:
        parts.append(f"{rows:,} of {total_rows:,} rows")
    if total_columns > columns:
        parts.append(f"{columns:,} of {total_columns:,} columns")
    if not parts:
        return ""
    return f"Showing {' and '.join(parts)}" + ("; download the CSV for all." if download else ".")


# Block structure only: where each top-level block starts does not need its inline content.
_BLOCKS = MarkdownIt("commonmark").enable("table")
_BLOCKS.core.ruler.disable(["inline", "text_join"], ignoreInvalid=True)
_NEWLINE = re.compile("\n")


def chart_blocks(answer: str, ends: list[int | None]) -> list[int | None]:
    """For each offset in `ends`, the index of the answer's top-level block holding it (None
    when it is not in the answer): one parse and one pass over the answer, whatever the count."""
    if not any(end is not None and 0 < end <= len(answer) for end in ends):
        return [None] * len(ends)
    starts = [  # the first line of each top-level block, in order
        token.map[0]
        for token in _BLOCKS.parse(answer)
        if token.level == 0 and token.nesting != -1 and token.map is not None
    ]
    newlines = [match.start() for match in _NEWLINE.finditer(answer)]
    blocks: list[int | None] = []
    for end in ends:
        if end is None or not 0 < end <= len(answer):
            blocks.append(None)
            continue
        line = bisect.bisect_left(newlines, end - 1)  # the line of the chart's last character
        index = bisect.bisect_right(starts, line) - 1
        blocks.append(index if index >= 0 else None)
    return blocks


def answer_block_at(answer: str, end: int | None) -> int | None:
    """Return the index of the top-level block holding offset `end`, or None when invalid."""
    return chart_blocks(answer, [end])[0]


def markdown_tables(charts: list[dict[str, Any]]) -> str:
    """The charts as Markdown for the export: title, caption and the data as a table."""
    parts = []
    for chart in charts:
        title = chart.get("title") or "Chart"
        lines = [f"**Chart: {_md_cell(title)}**"]
        if chart.get("caption"):
            lines.append("")
            lines.append(_md_cell(chart["caption"]))
        table = chart.get("table") or {}
        if table.get("columns"):
            lines.append("")
            lines.append(markdown_table(table["columns"], table["rows"]))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def markdown_table(columns: list[str], rows: list[list[str]]) -> str:
    head = "| " + " | ".join(_md_cell(c) for c in columns) + " |"
    rule = "| " + " | ".join("---" for _ in columns) + " |"
    body = ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join([head, rule, *body])


def _md_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
