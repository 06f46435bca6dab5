"""Reading the values of a provider's JSON, which may hold any type where a field is expected."""

from __future__ import annotations

from typing import Any


def is_int(value: Any) -> bool:
    """True for a JSON integer; `True` and `False` are not counts or indexes."""
    return isinstance(value, int) and not isinstance(value, bool)


def as_dict(value: Any) -> dict[str, Any]:
    """The value if it is a JSON object, else an empty one to read missing fields from."""
    return value if isinstance(value, dict) else {}
