"""Make what the agent sent storable: JSON that every database and channel layer accepts.

Each backend refuses something valid JSON can carry: PostgreSQL refuses NUL (`\\u0000`) in
text and jsonb; SQLite's driver and UTF-8 encoders (msgpack, for the Redis layer) refuse lone
surrogates (`\\ud800`); SQLite's JSON check refuses NaN and Infinity (`1e999` parses to inf);
nesting about a thousand deep exhausts recursion limits everywhere. One such event would
stall every turn of the process. Here it is replaced by what can be stored, and the
caller counts the replacement on its turn.

A chart is also made safe to draw here, once, as it arrives (`chats.answer.charts`): the log
stores its sanitised spec and capped table, not the agent's spec.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from itertools import chain
from typing import Any, NamedTuple

from chats.agent.events import AgentEvent, AnswerEvent, ChartEvent, event_from_data
from chats.answer.charts import safe_chart_event

MAX_DEPTH = 64  # far above what the agent nests (plans, references: 4-6 levels)
MAX_KEPT_TEXT = 100_000  # characters of an unusable event's text kept for the record
REPLACEMENT = "\ufffd"  # U+FFFD REPLACEMENT CHARACTER, what UTF-8 decoders put for bad input
_UNSTORABLE_CHARS = re.compile("[\x00\ud800-\udfff]")
_EXACT = (bool, int)  # a tuple: `bool | int` would build a union object on every call


class UnstorableValue(ValueError):
    """The value cannot be made storable piece by piece (nested too deep, or not JSON)."""


def storable_text(text: str) -> tuple[str, bool]:
    """Return `text` with NUL and lone surrogates replaced by U+FFFD, and whether any were."""
    if _is_plain(text):
        return text, False
    if _UNSTORABLE_CHARS.search(text) is None:
        return text, False
    return _UNSTORABLE_CHARS.sub(REPLACEMENT, text), True


def storable_json(value: Any, *, max_depth: int = MAX_DEPTH) -> tuple[Any, bool]:
    """Return `value` as JSON every backend stores, and whether anything had to be replaced.

    Strings (and keys) lose NUL and lone surrogates; non-finite floats become null. Raises
    UnstorableValue when nesting is deeper than `max_depth` or a value is not JSON at all.
    """
    return _storable(value, max_depth)


def _storable(value: Any, depth_left: int) -> tuple[Any, bool]:
    if isinstance(value, str):  # the most common value, checked first (once per event field)
        return storable_text(value)
    if value is None or isinstance(value, _EXACT):
        return value, False
    if isinstance(value, float):
        return (value, False) if math.isfinite(value) else (None, True)
    if depth_left <= 0:
        raise UnstorableValue(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        replaced = False
        for key, item in value.items():
            if not isinstance(key, str):
                raise UnstorableValue("an object key is not a string")
            key, key_replaced = storable_text(key)
            result[key], item_replaced = _storable(item, depth_left - 1)
            replaced = replaced or key_replaced or item_replaced
        return (result, True) if replaced else (value, False)
    if isinstance(value, list):
        items = [_storable(item, depth_left - 1) for item in value]
        if any(item_replaced for _, item_replaced in items):
            return [item for item, _ in items], True
        return value, False
    raise UnstorableValue(f"{type(value).__name__} is not JSON")


def storable_message(data: dict[str, Any], raw: str | None) -> tuple[dict[str, Any], bool]:
    """Return an event's message as storable JSON, and whether anything had to be replaced.

    When a field cannot be repaired (nested too deep), the fields that can are kept, so an
    answer's text still counts, and the event's text as received is kept beside them:
    `{"type": ..., "unstorable": true, "text": <the wire line, NUL and surrogates replaced>}`.
    """
    try:
        return storable_json(data)
    except UnstorableValue:
        pass
    kept: dict[str, Any] = {}
    for key, value in data.items():
        try:
            clean_key, _ = storable_text(str(key))
            kept[clean_key], _ = storable_json(value, max_depth=MAX_DEPTH - 1)
        except UnstorableValue:
            continue
    kept["unstorable"] = True
    kept["text"] = storable_text(_as_text(data, raw)[:MAX_KEPT_TEXT])[0]
    return kept, True


class StorableEvent(NamedTuple):
    event: AgentEvent  # rebuilt from `data` when anything was replaced
    data: dict[str, Any]  # what the event log stores
    replaced: bool


def storable_event(event: AgentEvent) -> StorableEvent:
    """Return the event as the log can store and relay it, and whether anything was replaced.

    A repaired event is read back from its repaired data, so the transcript, the page and the
    log all see the same values; its `raw` wire text stays with it.
    """
    if type(event) is AnswerEvent and _plain_delta(event):  # most of every stream
        return StorableEvent(event, event.data, False)
    if type(event) is ChartEvent:  # made safe to draw once, here: the log stores the result
        event = safe_chart_event(event)
    data = event.data
    if _only_plain_text(data):  # other events of text only, checked in C
        return StorableEvent(event, data, False)
    raw = getattr(event, "raw", None)
    data, replaced = storable_message(data, raw)
    if not replaced:
        return StorableEvent(event, data, False)
    clean = event_from_data(data) or event_from_data({"type": data.get("type") or "UNKNOWN"})
    assert clean is not None  # a dict with a string type always reads back
    return StorableEvent(dataclasses.replace(clean, raw=raw), data, True)


def _plain_delta(event: AnswerEvent) -> bool:
    """Return True when every text of an ANSWER delta's data is plain: its type, content and
    chat id are all it holds (its keys are ours), so its data need not be built and joined."""
    try:
        return _is_plain(event.type + event.content + (event.chat_id or ""))
    except TypeError:  # not text: the walk judges it
        return False


def _only_plain_text(data: dict[str, Any]) -> bool:
    """Return True when every key and value is ASCII text without NUL: storable as it is.

    One join and two C checks, where walking the values costs three calls a field (~1.4 µs
    against 0.5 for a THINKING delta); a value that is not text sends the event to the walk.
    """
    try:
        return _is_plain("".join(chain.from_iterable(data.items())))
    except TypeError:
        return False


def _is_plain(text: str) -> bool:
    """ASCII without NUL: what every backend stores as it is (the common case, checked in C)."""
    return text.isascii() and "\x00" not in text


def _as_text(data: dict[str, Any], raw: str | None) -> str:
    if raw is not None:
        return raw
    try:  # no wire text (an event built in code): the closest thing to it
        return json.dumps(data)
    except (ValueError, TypeError, RecursionError):
        return ""
