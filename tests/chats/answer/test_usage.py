"""The quiet line under an answer: each model's tokens, read as the Usage page reads them."""

from __future__ import annotations

import pytest

from chats.answer.usage import usage_line


def tier(name, tokens_in, tokens_out, **more):
    return {"type": name, "input_tokens": tokens_in, "output_tokens": tokens_out, **more}


def test_the_line_names_each_tier_that_used_tokens():
    line = usage_line([tier("base", 1234, 567), tier("pro", 0, 0), tier("pro2", 10, 2)])
    assert line == "Tokens: base 1,234 in / 567 out · pro2 10 in / 2 out"


@pytest.mark.parametrize("value", [None, [], [tier("base", 0, 0)], "x", [{"type": "base"}]])
def test_no_usage_is_no_line(value):
    assert usage_line(value) == ""


def test_odd_counts_are_ignored():
    assert usage_line([tier("base", "12", True), tier("pro", -3, 4)]) == "Tokens: pro 0 in / 4 out"


def test_reasoning_listed_apart_counts_as_output():
    """Gemini lists its thoughts apart from output_tokens, and bills them as output."""
    line = usage_line([tier("gemini-2.5-flash", 10, 3, cached_tokens=4, reasoning_tokens=7)])
    assert line == "Tokens: gemini-2.5-flash 10 in / 10 out"
