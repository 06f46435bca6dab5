"""The line under each answer that says what it used: each model's tokens, read as
`chats.usage.tokens` reads them for the Usage page, the limits and the metrics."""

from __future__ import annotations

from typing import Any

from chats.usage.tokens import turn_tokens


def usage_line(consumption: Any) -> str:
    """ "Tokens: base 1,234 in / 567 out" ("" when the answer reported none)."""
    parts = [f"{t.model} {t.input:,} in / {t.output:,} out" for t in turn_tokens(consumption)]
    return "Tokens: " + " · ".join(parts) if parts else ""
