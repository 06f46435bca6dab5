"""The JSON value helpers every adapter reads an agent's JSON with: what each takes, and what
it makes of a value of another type."""

from __future__ import annotations

import pytest

from chats.agent.json_values import (
    as_count,
    as_dict,
    as_int,
    as_list,
    as_offset,
    is_count,
    is_int,
    objects,
)


@pytest.mark.parametrize(
    ("value", "integer", "count"),
    [
        (3, True, True),
        (0, True, True),
        (-2, True, False),
        (True, False, False),
        (1.0, False, False),
        ("3", False, False),
        (None, False, False),
    ],
)
def test_integers_and_counts_are_json_integers_and_never_booleans(value, integer, count):
    assert (is_int(value), is_count(value)) == (integer, count)
    assert as_int(value) == (value if integer else None)
    assert as_count(value) == (value if count else 0)
    assert as_offset(value) == (value if count else None)


def test_objects_and_arrays_of_another_type_read_as_empty():
    assert as_dict({"a": 1}) == {"a": 1} and as_dict([("a", 1)]) == {}
    assert as_list([1, "x"]) == [1, "x"] and as_list({"a": 1}) == []
    assert objects([{"a": 1}, "junk", None, [], {"b": 2}]) == [{"a": 1}, {"b": 2}]
    assert objects({"a": 1}) == objects(None) == []
