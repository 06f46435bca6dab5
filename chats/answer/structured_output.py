"""A turn's structured output (STRUCTURED_OUTPUT) as a table, CSV and JSON.

A list of objects reads as rows with the union of their keys as columns; an object as key/value
pairs; anything else as one value. Nested values are shown as compact JSON text.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from chats.answer.charts import cell_text, rows_table

# Spreadsheets run a cell that starts with one of these as a formula (OWASP "CSV injection").
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def structured_table(value: Any) -> dict[str, Any] | None:
    """Return {"columns", "rows"} for the template and the CSV, or None when there is nothing."""
    if value is None or value == [] or value == {}:
        return None
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        table = rows_table(value)
        return {"columns": table["columns"], "rows": table["rows"], "pairs": False}
    if isinstance(value, dict):
        rows = [[str(key), cell_text(item)] for key, item in value.items()]
        return {"columns": ["Field", "Value"], "rows": rows, "pairs": True}
    if isinstance(value, list):
        return {"columns": ["Value"], "rows": [[cell_text(v)] for v in value], "pairs": False}
    return {"columns": ["Value"], "rows": [[cell_text(value)]], "pairs": False}


def structured_csv(value: Any) -> str:
    """The table as CSV, each cell safe to open in a spreadsheet."""
    table = structured_table(value) or {"columns": [], "rows": []}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([_inert(c) for c in table["columns"]])
    for row in table["rows"]:
        writer.writerow([_inert(c) for c in row])
    return out.getvalue()


def structured_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _inert(cell: str) -> str:
    return "'" + cell if cell.startswith(_FORMULA_STARTS) else cell
