"""Storing what finished turns used: one row per turn and model, priced as it finishes.

Called by `chats.services.turn_finish_many` inside the finish's own transaction, for every turn
of the batch at once: one INSERT for the batch, and the metrics counted once when it commits.
Storing priced rows at finish, rather than pricing `Turn.consumption` when read, keeps each cost
as it was priced then (a price changed later does not rewrite last month), and makes this
month's usage an indexed sum, cheap enough for the limit check under the asker's row lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from chats.metrics import COST, TOKENS
from chats.models import Turn
from chats.usage.limits import (
    WARN_AT,
    limits_for_users,
    month_start,
    resets_on,
    spent_this_month,
)
from chats.usage.models import TurnUsage, UsageWarning
from chats.usage.prices import dollars, price_for
from chats.usage.tokens import ModelTokens, turn_tokens

CENT_FRACTION = Decimal("0.00000001")  # what TurnUsage.cost keeps


def usage_record_for_turns(*, turns: Iterable[Turn], now: datetime | None = None) -> None:
    """Store the usage of turns finishing in this transaction (their `chat` loaded), count it
    in the metrics once it commits, and warn each owner whose usage passed 80% of a limit.

    A turn that is warned carries the warning as `usage_warning` (not a field): its finished
    card shows it.
    """
    now = now or timezone.now()
    rows: list[TurnUsage] = []
    last_turn: dict[int, Turn] = {}
    for turn in turns:
        agent = turn.chat.provider
        for tokens in per_model(turn_tokens(turn.consumption)):
            price = price_for(agent, tokens.model)
            rows.append(
                TurnUsage(
                    user_id=turn.chat.owner_id,
                    chat_id=turn.chat_id,
                    turn_id=turn.pk,
                    agent=agent,
                    model=tokens.model,
                    input_tokens=tokens.input,
                    cached_tokens=tokens.cached,
                    output_tokens=tokens.output,
                    tokens=tokens.total,
                    cost=None if price is None else price.cost(tokens).quantize(CENT_FRACTION),
                    created_at=now,
                )
            )
            last_turn[turn.chat.owner_id] = turn
    if not rows:
        return
    TurnUsage.objects.bulk_create(rows)
    transaction.on_commit(lambda: _count(rows))
    _warn(last_turn, now)


def per_model(found: list[ModelTokens]) -> list[ModelTokens]:
    """One entry per model: an agent that lists a model twice is summed."""
    merged: dict[str, ModelTokens] = {}
    for tokens in found:
        seen = merged.get(tokens.model)
        merged[tokens.model] = (
            tokens
            if seen is None
            else ModelTokens(
                tokens.model,
                seen.input + tokens.input,
                seen.cached + tokens.cached,
                seen.output + tokens.output,
            )
        )
    return list(merged.values())


def _count(rows: list[TurnUsage]) -> None:
    cost: dict[str, Decimal] = {}
    for row in rows:
        for kind, value in (
            ("input", row.input_tokens - row.cached_tokens),
            ("cached", row.cached_tokens),
            ("output", row.output_tokens),
        ):
            if value:
                TOKENS.labels(agent=row.agent, model=row.model, kind=kind).inc(value)
        if row.cost is not None:
            cost[row.agent] = cost.get(row.agent, Decimal(0)) + row.cost
    for agent, amount in cost.items():
        COST.labels(agent=agent).inc(float(amount))


def _warn(last_turn: dict[int, Turn], now: datetime) -> None:
    """Once a month, tell each user whose usage this month reached 80% of a limit."""
    limits = {uid: lim for uid, lim in limits_for_users(user_ids=list(last_turn)).items() if lim}
    if not limits:
        return
    month = month_start(now).date()
    warned = set(
        UsageWarning.objects.filter(user_id__in=list(limits), month=month).values_list(
            "user_id", flat=True
        )
    )
    due = [uid for uid in limits if uid not in warned]
    spent = spent_this_month(user_ids=due, now=now) if due else {}
    for user_id in due:
        used_tokens = sum(s.tokens for s in spent.get(user_id, {}).values())
        used_cost = sum((s.cost for s in spent.get(user_id, {}).values()), Decimal(0))
        limit, message = limits[user_id], ""
        if limit.tokens is not None and used_tokens >= WARN_AT * limit.tokens:
            share = used_tokens * 100 // limit.tokens
            message = (
                f"You have used {used_tokens:,} of your {limit.tokens:,} tokens this month"
                f" ({share}%); the limit resets on {resets_on(now)}."
            )
        elif limit.cost is not None and used_cost >= WARN_AT * limit.cost:
            share = int(used_cost * 100 // limit.cost)
            message = (
                f"You have spent {dollars(used_cost)} of your {dollars(limit.cost)} this month"
                f" ({share}%); the limit resets on {resets_on(now)}."
            )
        if not message:
            continue
        turn = last_turn[user_id]
        _, created = UsageWarning.objects.get_or_create(
            user_id=user_id, month=month, defaults={"turn_id": turn.pk, "message": message}
        )
        if created:
            turn.usage_warning = message
