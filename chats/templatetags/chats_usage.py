"""Template filters of the Usage page: counts with thousands separators, and costs that say
"price unknown" rather than show a cost nobody priced."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import template

from chats.usage.prices import dollars

register = template.Library()

PRICE_UNKNOWN = "price unknown"


@register.filter
def tokens(value: int | None) -> str:
    return f"{value or 0:,}"


@register.filter
def dollars_or_unknown(cost: Decimal | None, row: Any = None) -> str:
    """A cost, with "price unknown" for what of `row` (a sum with `unpriced`) has no price."""
    unpriced = (row.get("unpriced") if isinstance(row, dict) else getattr(row, "unpriced", 0)) or 0
    if cost is None:
        return PRICE_UNKNOWN if unpriced else dollars(Decimal(0))
    return f"{dollars(cost)} + {PRICE_UNKNOWN}" if unpriced else dollars(cost)


@register.filter
def listed(value: Any) -> list[Any]:
    return [value]
