"""Reading the values of an agent's JSON, which may hold any type where a field is expected.

Every adapter in `chats.agent.providers` and the reader of our own event schema
(`chats.agent.events`) read JSON values through these, never through copies of their own.
"""

from __future__ import annotations

from typing import Any, TypeGuard


def is_int(value: Any) -> TypeGuard[int]:
    """True for a JSON integer; `True` and `False` are not counts or indexes."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_count(value: Any) -> TypeGuard[int]:
    """True for a JSON integer that is not negative: a count, an index, an offset."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def as_int(value: Any) -> int | None:
    """The value if it is a JSON integer, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_count(value: Any) -> int:
    """The value if it is a count (`is_count`), else 0."""
    return value if is_count(value) else 0


def as_offset(value: Any) -> int | None:
    """The value if it is a count (`is_count`), else None: an offset that may be missing."""
    return value if is_count(value) else None


def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one to read missing fields from."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """The value if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def objects(value: Any) -> list[dict[str, Any]]:
    """The JSON objects of an array; anything else in it, or a value that is no array, is
    skipped."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
