"""JSON text of every frame a page is sent, encoded once per frame whatever the pages.

orjson writes it about six times faster than the standard library's encoder (4.5 → 0.7 µs for
a two-event frame: docs/PERFORMANCE.md); it is the common, well-kept choice for this. What
orjson refuses (integers past 64 bits, keys that are not strings, lone surrogates, nesting past
254 levels) goes through the standard library, as it always did. A non-finite float, which
nothing relayed should carry (`storable_event`), is written as null, which browsers can parse,
not as the standard library's NaN token, which they cannot.

The event log keeps the standard library (chats/event_log.py): there a NaN must be refused by
the database, not quietly rewritten.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_standard = json.JSONEncoder(separators=(",", ":"))


def compact_json(value: Any) -> str:
    """Compact JSON text of `value` (non-ASCII as UTF-8, not escaped)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _standard.encode(value)
