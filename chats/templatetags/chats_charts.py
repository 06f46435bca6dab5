"""Template filters for charts, structured output and token usage under an answer."""

from __future__ import annotations

import json
from typing import Any

from django import template

from chats.answer import structured_output, usage
from chats.answer.charts import table_cut_text

register = template.Library()

register.filter("structured_table", structured_output.structured_table)
register.filter("usage_line", usage.usage_line)


@register.filter
def spec_json(spec: Any) -> str:
    """The sanitised spec as JSON for a data attribute (autoescaping makes it attribute-safe)."""
    return json.dumps(spec, ensure_ascii=False, separators=(",", ":"))


@register.filter
def table_cut(table: dict[str, Any], downloads: bool = False) -> str:
    """ "Showing 500 of 12,000 rows" when a table was cut to its caps; "" when it was not."""
    return table_cut_text(table, download=bool(downloads)) if table else ""
