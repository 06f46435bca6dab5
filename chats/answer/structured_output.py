"""A turn's structured output (STRUCTURED_OUTPUT) as a table, CSV and JSON.

A list of objects reads as rows with the union of their keys as columns; an object as key/value
pairs; anything else as one value. Nested values are shown as compact JSON text.

The table a page shows is cut to STRUCTURED_OUTPUT_MAX_ROWS, _MAX_COLUMNS and _MAX_CELL_CHARS
(and says so: "Showing 500 of 12,000 rows; download the CSV for all"): without caps, a 34 KB
answer of many distinct keys made a 36 MB page. The CSV and JSON downloads carry all of it.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from typing import Any

from django.conf import settings

from chats.answer.chart_spec import DataCaps
from chats.answer.charts import cell_text, rows_table

UNCAPPED = DataCaps(rows=sys.maxsize, columns=sys.maxsize, cell_chars=sys.maxsize)

# Spreadsheets run a cell that starts with one of these as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


def page_caps() -> DataCaps:
    return DataCaps(
        rows=settings.STRUCTURED_OUTPUT_MAX_ROWS,
        columns=settings.STRUCTURED_OUTPUT_MAX_COLUMNS,
        cell_chars=settings.STRUCTURED_OUTPUT_MAX_CELL_CHARS,
    )


def structured_table(value: Any, caps: DataCaps | None = None) -> dict[str, Any] | None:
    """Return {"columns", "rows", "pairs", "total_rows", "total_columns"} for the template,
    within `caps` (the page's, by default), or None when there is nothing."""
    if value is None or value == [] or value == {}:
        return None
    caps = caps or page_caps()
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return {**rows_table(value, caps), "pairs": False}
    if isinstance(value, dict):
        items = list(value.items())
        rows = [
            [cell_text(str(key), caps.cell_chars), cell_text(item, caps.cell_chars)]
            for key, item in items[: caps.rows]
        ]
        return _table(["Field", "Value"], rows, len(items), pairs=True)
    values = value if isinstance(value, list) else [value]
    rows = [[cell_text(item, caps.cell_chars)] for item in values[: caps.rows]]
    return _table(["Value"], rows, len(values), pairs=False)


def _table(columns: list[str], rows: list[list[str]], total: int, *, pairs: bool) -> dict:
    return {
        "columns": columns,
        "rows": rows,
        "total_rows": total,
        "total_columns": len(columns),
        "pairs": pairs,
    }


def structured_csv(value: Any) -> str:
    """All of the output as CSV: numbers as numbers, every other cell quoted, and a cell that
    starts like a formula made text (a leading '), so no spreadsheet runs one, whichever
    separator (, ; | tab) it splits lines by."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_NONNUMERIC)
    for row in _csv_rows(value):
        writer.writerow([_csv_cell(cell) for cell in row])
    return out.getvalue()


def _csv_rows(value: Any) -> list[list[Any]]:
    if value is None or value == [] or value == {}:
        return []
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        columns = list(dict.fromkeys(str(key) for item in value for key in item))
        body = [[{str(k): v for k, v in item.items()}.get(c) for c in columns] for item in value]
        return [columns, *body]
    if isinstance(value, dict):
        return [["Field", "Value"], *([str(key), item] for key, item in value.items())]
    return [["Value"], *([item] for item in (value if isinstance(value, list) else [value]))]


def _csv_cell(value: Any) -> Any:
    """A number stays a number (written unquoted); anything else is text, quoted by the
    writer, with a leading ' when a spreadsheet would read it as a formula."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    text = cell_text(value, sys.maxsize)
    if _PLAIN_NUMBER.match(text):
        return text  # "-3.5" as text is a number to a spreadsheet, not a formula
    if text.lstrip(" ").startswith(_FORMULA_STARTS):
        return "'" + text
    return text


def structured_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
