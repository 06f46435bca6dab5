"""Token consumption: the line under each answer and the admin's sums per user and month.

COMPLETE's `consumption` is a list with one entry per model tier:
`{"type": "base", "input_tokens", "output_tokens", "cached_tokens"}`.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any

from django.db.models.functions import TruncMonth

from chats.models import Turn


def tier_usage(consumption: Any) -> list[tuple[str, int, int]]:
    """(tier, input tokens, output tokens) for each tier that used any."""
    usage = []
    for entry in consumption if isinstance(consumption, list) else ():
        if not isinstance(entry, dict):
            continue
        tier = str(entry.get("type") or entry.get("model") or "tokens")[:40]
        tokens_in, tokens_out = (
            _count(entry.get("input_tokens")),
            _count(entry.get("output_tokens")),
        )
        if tokens_in or tokens_out:
            usage.append((tier, tokens_in, tokens_out))
    return usage


def usage_line(consumption: Any) -> str:
    """ "Tokens: base 1,234 in / 567 out" ("" when the answer reported none)."""
    parts = [f"{tier} {i:,} in / {o:,} out" for tier, i, o in tier_usage(consumption)]
    return "Tokens: " + " · ".join(parts) if parts else ""


def usage_by_user_month(turns=None) -> list[dict[str, Any]]:
    """Sum token use per user, month and tier, newest month first.

    One query: consumption is a JSON list whose shape varies by provider, so the sums are made
    here rather than in SQL (portable across SQLite and PostgreSQL).
    """
    turns = Turn.objects.all() if turns is None else turns
    rows = (
        turns.exclude(consumption=[])
        .annotate(month=TruncMonth("created_at"))
        .values_list("chat__owner__username", "month", "consumption")
    )
    sums: dict[tuple[str, date, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for username, month, consumption in rows.iterator(chunk_size=2000):
        for tier, tokens_in, tokens_out in tier_usage(consumption):
            total = sums[(username, month.date() if hasattr(month, "date") else month, tier)]
            total[0] += tokens_in
            total[1] += tokens_out
            total[2] += 1
    ordered = sorted(
        sums.items(), key=lambda item: (-item[0][1].toordinal(), item[0][0], item[0][2])
    )
    return [
        {
            "user": user,
            "month": month,
            "tier": tier,
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "answers": answers,
        }
        for (user, month, tier), (tokens_in, tokens_out, answers) in ordered
    ]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
