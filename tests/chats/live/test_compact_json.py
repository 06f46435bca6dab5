"""JSON text of frames: orjson's speed, the standard library's reach."""

from __future__ import annotations

import json

import pytest

from chats.live.compact_json import compact_json, strict_json


@pytest.mark.parametrize(
    "value",
    [
        {"type": "ANSWER", "content": "Revenue rose 4% — in €, 東京 👍"},
        {"nested": [{"a": [1, 2.5, None, True]}], "empty": {}},
        "a string",
        [],
    ],
)
def test_text_is_compact_json_that_reads_back_as_the_value(value):
    text = compact_json(value)
    assert json.loads(text) == value
    assert text == json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "value",
    [
        {"id": 123456789012345678901234567890},  # past 64 bits: orjson refuses
        {1: "an integer key"},  # not a string key: orjson refuses
        {"text": "a lone \ud800 surrogate"},  # not UTF-8: orjson refuses
        {"deep": json.loads("[" * 300 + "]" * 300)},  # past orjson's 254 levels
    ],
)
def test_what_orjson_refuses_is_written_by_the_standard_library(value):
    assert compact_json(value) == json.dumps(value, separators=(",", ":"))


def test_a_non_finite_number_is_written_as_null_which_browsers_parse():
    assert compact_json({"score": float("nan"), "max": float("inf")}) == '{"score":null,"max":null}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"content": "Revenue rose 4% — in €"}, '{"content":"Revenue rose 4% — in €"}'),
        ({"content": "null", "plan": None}, '{"content":"null","plan":null}'),
        ({"score": float("nan")}, '{"score":NaN}'),
        ({"max": float("inf"), "min": float("-inf")}, '{"max":Infinity,"min":-Infinity}'),
        ({"id": 2**70, "score": float("nan")}, '{"id":1180591620717411303424,"score":NaN}'),
    ],
)
def test_strict_text_keeps_a_non_finite_number_for_the_database_to_refuse(value, text):
    assert strict_json(value) == text
