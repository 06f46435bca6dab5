"""The price table: built-in prices with their source and date, MODEL_PRICES over them, and an
unknown model left unpriced."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.exceptions import ImproperlyConfigured

from chats.usage.prices import BUILT_IN_PRICES, dollars, parse_model_prices, price_for
from chats.usage.tokens import ModelTokens, turn_tokens


def test_the_built_in_prices_say_where_and_when_they_were_read():
    for model, price in BUILT_IN_PRICES.items():
        assert price.source.startswith("https://"), model
        assert len(price.date) == 10 and price.date.startswith("20"), model


def test_cached_tokens_are_priced_as_cached_and_the_rest_of_the_input_as_input():
    price = price_for("anthropic", "claude-sonnet-4-6")
    tokens = ModelTokens("claude-sonnet-4-6", input=1_000_000, cached=200_000, output=100_000)
    # 800,000 at $3, 200,000 at $0.30, 100,000 at $15 per million
    assert price.cost(tokens) == Decimal("3.96")


def test_an_unknown_model_has_no_price(settings):
    settings.MODEL_PRICES = ""
    assert price_for("openai", "gpt-4.1") is None
    assert price_for("bigdata", "base") is None  # the Research Agent's (and the demo's) tiers


def test_model_prices_add_models_override_built_ins_and_name_one_agents_model(settings):
    settings.MODEL_PRICES = json.dumps(
        {
            "gpt-4.1": {"input": 2, "output": 8, "cached": "0.5"},
            "claude-sonnet-4-6": {"input": 1, "output": 1},
            "bigdata/pro": {"request": 0.05, "source": "our contract", "date": "2026-11-01"},
        }
    )
    gpt = price_for("openai", "gpt-4.1-2025-04-14")  # a dated model takes its model's price
    assert (gpt.input, gpt.output, gpt.cached) == (Decimal(2), Decimal(8), Decimal("0.5"))
    assert gpt.source == "MODEL_PRICES"
    assert price_for("anthropic", "claude-sonnet-4-6").input == Decimal(1)
    pro = price_for("bigdata", "pro")
    assert pro.cost(ModelTokens("pro", 5000, 0, 700)) == Decimal("0.05")  # per request only
    assert price_for("llm-sdk", "pro") is None  # another agent's "pro" is not the Research Agent's


def test_cached_tokens_without_a_cached_price_cost_what_input_costs(settings):
    settings.MODEL_PRICES = '{"m": {"input": 2, "output": 4}}'
    assert price_for("x", "m").cost(ModelTokens("m", 1_000_000, 500_000, 0)) == Decimal(2)


def test_model_prices_from_a_file(settings, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text('{"grok-4": {"input": 3, "output": 15, "cached": 0.75}}')
    settings.MODEL_PRICES = str(path)
    assert price_for("xai", "grok-4").cached == Decimal("0.75")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ("/no/such/file.json", "neither a JSON object nor a readable file"),
        ('{"m": 3}', "must be an object of prices"),
        ('{"m": {"inptu": 3}}', "unknown keys ['inptu']"),
        ('{"m": {"source": "x"}}', "names no price"),
        ('{"m": {"input": -1}}', "between 0 and 1,000,000"),
        ('{"m": {"input": true}}', "must be a number"),
        ('{"m": {"input": "cheap"}}', "must be a number"),
        ('{"m": {"input": "NaN"}}', "between 0 and 1,000,000"),
    ],
)
def test_a_bad_model_prices_says_what_is_wrong(value, says):
    with pytest.raises(ImproperlyConfigured, match="MODEL_PRICES") as refused:
        parse_model_prices(value)
    assert says in str(refused.value)


def test_the_site_does_not_start_with_a_bad_model_prices(settings):
    from django.apps import apps

    settings.MODEL_PRICES = '{"m": {"input": "free"}}'
    with pytest.raises(ImproperlyConfigured, match="must be a number"):
        apps.get_app_config("chats").ready()


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        ("0", "$0.00"),
        ("0.0042", "$0.0042"),
        ("0.45", "$0.45"),
        ("0.123456", "$0.1235"),
        ("12.345", "$12.35"),
        ("1234567.5", "$1,234,567.50"),
    ],
)
def test_dollars(amount, text):
    assert dollars(Decimal(amount)) == text


def test_cached_tokens_never_exceed_the_input_and_reasoning_is_output():
    (tokens,) = turn_tokens(
        [{"type": "m", "input_tokens": 10, "cached_tokens": 50, "output_tokens": 2,
          "reasoning_tokens": 5}]
    )  # fmt: skip
    assert (tokens.input, tokens.cached, tokens.output, tokens.total) == (10, 10, 7, 17)
