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
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from chats.answer.chart_spec import DataCaps
from chats.answer.charts import cell_text, rows_table

UNCAPPED = DataCaps(rows=sys.maxsize, columns=sys.maxsize, cell_chars=sys.maxsize)

# Spreadsheets run a cell that starts with one of these as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")
# The separators a spreadsheet may split a line by (its locale's list separator, or a choice on
# import), and a line break, which a reader that splits lines naively breaks a cell at.
_SEPARATORS = (",", ";", "|", "\t", "\r", "\n")
_SKIPPED_BEFORE_A_CELL = ' "'
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
    writer, and made safe from formula injection (`spreadsheet_safe`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    text = cell_text(value, sys.maxsize)
    if _PLAIN_NUMBER.match(text):
        return text  # "-3.5" as text is a number to a spreadsheet, not a formula
    return spreadsheet_safe(text)


def spreadsheet_safe(text: str) -> str:
    """The text with a ' before each character that would start a formula: at the start of the
    cell, or of any part of it a spreadsheet splitting by one of `_SEPARATORS` reads as a cell
    (after spaces and quotes; a part that is a plain number is left alone).

    OWASP's rule (https://owasp.org/www-community/attacks/CSV_Injection) prefixes the cell, which
    quoting the cell keeps whole for a reader that splits by the writer's separator. A reader that
    splits by another one (";" in a comma file, as many locales' spreadsheets do) ignores a quote
    in the middle of its field, and a part such as "=1+1" in `1,"x;=1+1;y"` becomes a cell of its
    own: so each such part is made text the same way, in place."""
    pieces, last = [], 0
    for index in sorted(set(_formula_starts(text))):
        pieces += [text[last:index], "'"]
        last = index
    return "".join(pieces) + text[last:]


def _formula_starts(text: str) -> Iterator[int]:
    """Where a formula would start: in the whole text, and in each part of it split by each
    separator, the index of the formula character its first non-space, non-quote character is
    (unless the part is a plain number)."""
    parts = [(0, len(text))]
    for separator in _SEPARATORS:
        begin = 0
        for part in text.split(separator):
            parts.append((begin, begin + len(part)))
            begin += len(part) + 1
    for begin, end in parts:
        index = begin
        while index < end and text[index] in _SKIPPED_BEFORE_A_CELL:
            index += 1
        part = text[index:end].rstrip(_SKIPPED_BEFORE_A_CELL)
        if part.startswith(_FORMULA_STARTS) and not _PLAIN_NUMBER.match(part):
            yield index


def structured_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
