"""The price table, and what a model's tokens in one turn cost.

Prices are US dollars per million tokens (input, output, cached input) and per request, as the
providers publish them. The built-in table holds only prices read on the provider's own pricing
pages, each with its source and the date it was read; every other model (the Research Agent's
tiers and the demo agent's included: no price of theirs is published there) is "price unknown"
until `MODEL_PRICES` names it. An unknown model's tokens are counted, never priced.

`MODEL_PRICES` (a JSON object, or the path of a file holding one) adds models and overrides
built-in ones, model by model:

    {"gpt-4.1": {"input": 2, "output": 8, "cached": 0.5},
     "bigdata/pro": {"request": 0.05, "source": "our contract", "date": "2026-11-01"}}

A key is a model as the agent reports it (`type` in its consumption), or `agent/model` for one
agent's model only (the Research Agent's `base` and `pro`). A model reported with a date
(`gpt-4.1-2025-04-14`) takes the price of the model without it when it has none of its own.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from chats.usage.tokens import ModelTokens

MILLION = Decimal(1_000_000)
PRICE_KINDS = ("input", "output", "cached", "request")
_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


@dataclass(frozen=True)
class Price:
    """What a model costs: dollars per million tokens, and per request (one per turn)."""

    input: Decimal = Decimal(0)
    output: Decimal = Decimal(0)
    cached: Decimal | None = None  # None: cached tokens cost what input tokens cost
    request: Decimal = Decimal(0)
    source: str = ""  # where the price was read
    date: str = ""  # when (YYYY-MM-DD)

    def cost(self, tokens: ModelTokens) -> Decimal:
        """What these tokens cost, in dollars."""
        cached_price = self.input if self.cached is None else self.cached
        per_million = (
            (tokens.input - tokens.cached) * self.input
            + tokens.cached * cached_price
            + tokens.output * self.output
        )
        return per_million / MILLION + self.request


# Read on the providers' own pages on 2026-11-29. The default models of Gemini
# (gemini-2.5-flash), OpenAI (gpt-4.1) and xAI (grok-4), and the Research Agent's tiers, are
# left to MODEL_PRICES: their providers' own pricing pages were not among those this table could
# be checked against, and a figure taken second-hand is not put here (README, "Usage and cost").
BUILT_IN_PRICES: dict[str, Price] = {
    # Anthropic's model page lists $3 input and $15 output per million tokens; its pricing page
    # prices cache hits at a tenth of the input price.
    "claude-sonnet-4-6": Price(
        input=Decimal("3"),
        output=Decimal("15"),
        cached=Decimal("0.30"),
        source="https://platform.claude.com/docs/en/about-claude/pricing",
        date="2026-11-29",
    ),
}


def dollars(amount: Decimal) -> str:
    """ "$12.34"; under a dollar, up to four decimals ("$0.0042", "$0.45"), so that an answer's
    cost of a fraction of a cent does not read $0.00."""
    if abs(amount) >= 1:
        return f"${amount.quantize(Decimal('0.01'), ROUND_HALF_UP):,}"
    text = f"{amount.quantize(Decimal('0.0001'), ROUND_HALF_UP)}"
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


def price_for(agent: str, model: str) -> Price | None:
    """The model's price (`agent/model` first, then `model`, then without a date), or None."""
    table = price_table()
    for key in (f"{agent}/{model}", model):
        for name in (key, _DATE_SUFFIX.sub("", key)):
            if name in table:
                return table[name]
    return None


def price_table() -> dict[str, Price]:
    """The built-in prices with MODEL_PRICES over them."""
    return _price_table(settings.MODEL_PRICES)


@cache
def _price_table(configured: str) -> dict[str, Price]:
    return {**BUILT_IN_PRICES, **parse_model_prices(configured)}


def parse_model_prices(value: str) -> dict[str, Price]:
    """MODEL_PRICES as prices; ImproperlyConfigured, saying what is wrong, when it cannot be."""
    text = value.strip()
    if not text:
        return {}
    if not text.startswith(("{", "[")):  # a path, then
        try:
            text = Path(text).read_text()
        except OSError as error:
            raise ImproperlyConfigured(
                f"MODEL_PRICES is neither a JSON object nor a readable file ({error})."
            ) from error
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ImproperlyConfigured(f"MODEL_PRICES is not valid JSON: {error}.") from error
    if not isinstance(document, dict):
        raise ImproperlyConfigured("MODEL_PRICES must be a JSON object: model → prices.")
    return {str(model): _price(str(model), entry) for model, entry in document.items()}


def _price(model: str, entry: Any) -> Price:
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"MODEL_PRICES[{model!r}] must be an object of prices.")
    unknown = set(entry) - {*PRICE_KINDS, "source", "date"}
    if unknown:
        raise ImproperlyConfigured(
            f"MODEL_PRICES[{model!r}] has unknown keys {sorted(unknown)}; prices are"
            f" {', '.join(PRICE_KINDS)} (dollars per million tokens, and per request)."
        )
    if not set(entry) & set(PRICE_KINDS):
        raise ImproperlyConfigured(f"MODEL_PRICES[{model!r}] names no price.")
    prices = {kind: _amount(model, kind, entry[kind]) for kind in PRICE_KINDS if kind in entry}
    return Price(
        **prices, source=str(entry.get("source", "MODEL_PRICES")), date=str(entry.get("date", ""))
    )


def _amount(model: str, kind: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ImproperlyConfigured(f"MODEL_PRICES[{model!r}][{kind!r}] must be a number.")
    try:
        amount = Decimal(str(value))
    except InvalidOperation as error:
        raise ImproperlyConfigured(
            f"MODEL_PRICES[{model!r}][{kind!r}] must be a number, not {value!r}."
        ) from error
    if not amount.is_finite() or amount < 0 or amount > 1_000_000:
        raise ImproperlyConfigured(
            f"MODEL_PRICES[{model!r}][{kind!r}] must be between 0 and 1,000,000 dollars."
        )
    return amount
