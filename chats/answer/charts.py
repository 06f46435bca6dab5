"""The agent's charts, made safe to draw: one allow-list sanitiser for Vega-Lite specs.

A CHART's `vega_lite_spec` is untrusted input. Vega-Lite can load data and images from URLs,
link marks to URLs (`href`) and evaluate expressions (`expr`, signals, `calculate`/`filter`
strings, `labelExpr`), which are code. `sanitize_spec` keeps only what a static chart of inline
data needs: an allow-list of view keys and mark types, data bound inline (`data.values`), a
capped size, count of data points and string length. Anything it cannot make safe is refused
whole, never half-drawn: the chart then shows its data table and a note saying why. The page
draws the sanitised spec with a loader that refuses every load (`chats/static/chats/charts.js`).

`chart_for_turn` turns a CHART event into what `Turn.charts` stores and every view shows (the
chat page, the live frame, the admin, shared pages and the Markdown export).
"""

from __future__ import annotations

import json
from typing import Any

from markdown_it import MarkdownIt

from chats.agent.events import ChartEvent

MAX_SPEC_BYTES = 256 * 1024
MAX_DATA_POINTS = 5_000
MAX_TABLE_ROWS = 1_000  # rows shown in the data table; the chart itself draws them all
MAX_STRING = 1_000
MAX_DEPTH = 32
MAX_SIZE_PX = 2_000
MAX_TITLE = 300
MAX_CAPTION = 2_000
MAX_CELL = 200

MARKS = frozenset(
    {
        "arc",
        "area",
        "bar",
        "boxplot",
        "circle",
        "errorband",
        "errorbar",
        "line",
        "point",
        "rect",
        "rule",
        "square",
        "text",
        "tick",
        "trail",
    }
)
# What a view (the top level, a layer, a concat item, a facet's `spec`) may hold.
VIEW_KEYS = frozenset(
    {
        "align",
        "autosize",
        "background",
        "bounds",
        "center",
        "columns",
        "concat",
        "data",
        "description",
        "encoding",
        "facet",
        "hconcat",
        "height",
        "layer",
        "mark",
        "name",
        "padding",
        "repeat",
        "resolve",
        "spacing",
        "spec",
        "title",
        "transform",
        "vconcat",
        "view",
        "width",
    }
)
VIEW_LISTS = frozenset({"layer", "hconcat", "vconcat", "concat"})
# Dropped wherever they appear: loads, links, code, and the stores of code (params, config).
FORBIDDEN_KEYS = frozenset(
    {
        "$schema",
        "bind",
        "calculate",
        "condition",
        "config",
        "datasets",
        "expr",
        "filter",
        "formatType",
        "href",
        "image",
        "loader",
        "lookup",
        "param",
        "params",
        "selection",
        "signal",
        "test",
        "url",
        "usermeta",
    }
)
# Transforms without expressions; `filter` only as a field predicate (below).
TRANSFORMS = frozenset(
    {
        "aggregate",
        "bin",
        "density",
        "filter",
        "flatten",
        "fold",
        "impute",
        "joinaggregate",
        "loess",
        "pivot",
        "quantile",
        "regression",
        "sample",
        "stack",
        "timeUnit",
        "window",
    }
)
# Sizes in pixels, at any depth (`height: {"step": ...}`): capped at MAX_SIZE_PX.
LAYOUT_KEYS = frozenset({"width", "height", "step", "padding", "spacing", "columns"})
FIELD_PREDICATE_KEYS = frozenset(
    {"field", "equal", "lt", "lte", "gt", "gte", "range", "oneOf", "valid", "timeUnit"}
)


class UnsafeSpec(ValueError):
    """The spec cannot be drawn safely; the message says why, in words for the reader."""


def sanitize_spec(spec: Any) -> dict[str, Any]:
    """Return a copy of `spec` that draws without loading or evaluating anything, or raise."""
    if not isinstance(spec, dict):
        raise UnsafeSpec("The chart came without a drawable specification.")
    try:
        size = len(json.dumps(spec, ensure_ascii=False).encode())
    except (TypeError, ValueError, RecursionError) as error:
        raise UnsafeSpec("The chart's specification is not plain JSON.") from error
    if size > MAX_SPEC_BYTES:
        raise UnsafeSpec(f"The chart's specification is larger than {MAX_SPEC_BYTES // 1024} KB.")
    budget = _Budget()
    cleaned = _view(spec, budget, depth=0)
    if not _has_mark(cleaned):
        raise UnsafeSpec("The chart's specification has no marks to draw.")
    return cleaned


def _has_mark(view: dict[str, Any]) -> bool:
    if "mark" in view:
        return True
    nested = [v for key in VIEW_LISTS for v in view.get(key) or ()]
    if isinstance(view.get("spec"), dict):
        nested.append(view["spec"])
    return any(_has_mark(v) for v in nested if isinstance(v, dict))


class _Budget:
    def __init__(self) -> None:
        self.points = 0

    def spend(self, count: int) -> None:
        self.points += count
        if self.points > MAX_DATA_POINTS:
            raise UnsafeSpec(f"The chart has more than {MAX_DATA_POINTS:,} data points.")


def _view(spec: Any, budget: _Budget, depth: int) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise UnsafeSpec("The chart's specification is malformed.")
    view = {}
    for key, value in spec.items():
        if key not in VIEW_KEYS:
            continue
        cleaned = _value(key, value, budget, depth + 1)
        if cleaned is not _DROP:
            view[key] = cleaned
    return view


_DROP = object()


def _value(key: str, value: Any, budget: _Budget, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise UnsafeSpec("The chart's specification is nested too deeply.")
    if key in FORBIDDEN_KEYS or key.endswith("Expr"):  # labelExpr and kin are expressions
        return _DROP
    if key == "data":
        return _data(value, budget)
    if key == "mark":
        return _mark(value, budget, depth)
    if key == "transform":
        return _transforms(value, budget, depth)
    if key in VIEW_LISTS:
        if not isinstance(value, list):
            return _DROP
        return [_view(item, budget, depth) for item in value]
    if key == "spec":
        return _view(value, budget, depth)
    if key in LAYOUT_KEYS and isinstance(value, int | float):
        return value if 0 <= value <= MAX_SIZE_PX else _DROP  # a huge canvas hangs the page
    return _plain(value, budget, depth)


def _plain(value: Any, budget: _Budget, depth: int) -> Any:
    """Any other value: forbidden keys dropped at every depth, strings capped."""
    if depth > MAX_DEPTH:
        raise UnsafeSpec("The chart's specification is nested too deeply.")
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or len(key) > MAX_CELL:
                continue
            cleaned = _value(key, item, budget, depth + 1)
            if cleaned is not _DROP:
                out[key] = cleaned
        return out
    if isinstance(value, list):
        return [_plain(item, budget, depth + 1) for item in value]
    if isinstance(value, str):
        return value[:MAX_STRING]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _DROP


def _mark(value: Any, budget: _Budget, depth: int) -> Any:
    kind = value.get("type") if isinstance(value, dict) else value
    if kind not in MARKS:
        raise UnsafeSpec(f"The chart uses a mark this site does not draw ({str(kind)[:40]}).")
    return _plain(value, budget, depth) if isinstance(value, dict) else kind


def _data(value: Any, budget: _Budget) -> Any:
    """Inline values only: no URL, no generator, no named dataset to look up."""
    if value is None:
        return None  # a layer's "no data of its own"
    if not isinstance(value, dict) or not isinstance(value.get("values"), list):
        raise UnsafeSpec("The chart's data is not included in it (remote data is not loaded).")
    rows = value["values"]
    budget.spend(len(rows))
    return {"values": [_row(row) for row in rows]}


def _row(row: Any) -> Any:
    if isinstance(row, dict):
        return {str(k)[:MAX_CELL]: _scalar(v) for k, v in row.items() if _scalar(v) is not _DROP}
    scalar = _scalar(row)
    return None if scalar is _DROP else scalar


def _scalar(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_STRING]
    if value is None or isinstance(value, bool | int | float):
        return value
    return _DROP


def _transforms(value: Any, budget: _Budget, depth: int) -> Any:
    if not isinstance(value, list):
        return _DROP
    kept = []
    for step in value:
        if not isinstance(step, dict):
            continue
        ops = TRANSFORMS.intersection(step)
        if len(ops) != 1 or set(step) & {"calculate", "lookup"}:
            continue  # an expression transform, or one this site does not know
        if "filter" in ops:
            predicate = step["filter"]
            if not _is_field_predicate(predicate):
                continue  # a filter string is an expression
            kept.append({"filter": _plain(predicate, budget, depth)})
            continue
        kept.append(_plain(step, budget, depth))
    return kept


def _is_field_predicate(predicate: Any) -> bool:
    return (
        isinstance(predicate, dict)
        and "field" in predicate
        and set(predicate) <= FIELD_PREDICATE_KEYS
        and all(not isinstance(v, dict) for v in predicate.values())
    )


# --- What a turn stores and every view shows -----------------------------------------------


def chart_for_turn(event: ChartEvent, answer: str | None = None) -> dict[str, Any]:
    """Return the chart as `Turn.charts` stores it: safe spec (or a note), data table, place.

    `block` is the index of the answer's top-level Markdown block that holds the chart's `end`
    offset: the chart is shown after that block (after the whole answer when it is None).
    """
    try:
        spec: dict[str, Any] | None = sanitize_spec(event.vega_lite_spec)
        note = ""
    except UnsafeSpec as refusal:
        spec, note = None, f"{refusal} The data is shown as a table instead."
    return {
        "chart_id": event.chart_id[:MAX_CELL],
        "title": event.title[:MAX_TITLE],
        "chart_type": event.chart_type[:MAX_CELL],
        "caption": event.caption[:MAX_CAPTION],
        "spec": spec,
        "note": note,
        "table": chart_table(event),
        "start": event.start,
        "end": event.end,
        "block": answer_block_at(answer, event.end) if answer is not None else None,
    }


def chart_table(event: ChartEvent) -> dict[str, Any]:
    """The chart's data as rows and columns: the spec's inline values, else `data_points`."""
    spec = event.vega_lite_spec if isinstance(event.vega_lite_spec, dict) else {}
    data = spec.get("data") if isinstance(spec.get("data"), dict) else {}
    rows = data.get("values")
    if not isinstance(rows, list) or not rows:
        rows = event.data_points if isinstance(event.data_points, list) else []
    return rows_table(rows, limit=MAX_TABLE_ROWS)


def rows_table(rows: list[Any], *, limit: int | None = None) -> dict[str, Any]:
    """A list of objects as a table: the union of keys as columns, cells as short text."""
    shown = rows[:limit] if limit is not None else rows
    columns: list[str] = []
    for row in shown:
        for key in row if isinstance(row, dict) else ("value",):
            if str(key) not in columns:
                columns.append(str(key))
    body = []
    for row in shown:
        item = row if isinstance(row, dict) else {"value": row}
        body.append([cell_text(item.get(c, "")) for c in columns])
    return {"columns": columns, "rows": body, "total": len(rows)}


def cell_text(value: Any) -> str:
    """A cell as text: scalars as they read, nested values as compact JSON."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = ""
    elif isinstance(value, bool | int | float):
        text = json.dumps(value) if isinstance(value, bool) else str(value)
    else:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text[:MAX_CELL]


_BLOCKS = MarkdownIt("commonmark").enable("table")


def answer_block_at(answer: str, end: int | None) -> int | None:
    """Return the index of the top-level block holding offset `end`, or None when invalid."""
    if end is None or not 0 < end <= len(answer):
        return None
    line = answer[: end - 1].count("\n") if end else 0  # the line of the chart's last character
    index = -1
    for token in _BLOCKS.parse(answer):
        if token.level != 0 or token.nesting == -1 or token.map is None:
            continue
        if token.map[0] > line:
            break
        index += 1
    return index if index >= 0 else None


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
