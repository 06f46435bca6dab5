"""Reads of usage: a user's month by agent and model, by day and by chat; a team's by member;
the admin's sums with their filters. Every total here is a sum of `TurnUsage` rows, so the
Usage page, the team's view, the admin and its CSV add up the same rows the same way."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum
from django.db.models.functions import TruncDate, TruncMonth
from django.utils import timezone

from chats.models import Chat, Team, TeamMembership
from chats.usage.limits import month_start, next_month_start
from chats.usage.models import TurnUsage, UsageWarning

MOST_EXPENSIVE_CHATS = 10


@dataclass(frozen=True)
class Month:
    """A calendar month in the site's time zone: [start, end)."""

    start: datetime
    end: datetime

    @classmethod
    def of(cls, moment: datetime) -> Month:
        return cls(month_start(moment), next_month_start(moment))

    @classmethod
    def this(cls) -> Month:
        return cls.of(timezone.now())

    def previous(self) -> Month:
        return Month.of(self.start - timedelta(days=1))

    @property
    def label(self) -> str:
        return f"{self.start:%B %Y}"


# The sums every view shows (named apart from the fields they add up, which SQL would confuse
# them with); `_sums` gives them back the fields' names. Answers are turns: one per turn,
# however many models it used.
TOTALS = {
    "answers": Count("turn_id", distinct=True),
    "sum_input": Sum("input_tokens"),
    "sum_cached": Sum("cached_tokens"),
    "sum_output": Sum("output_tokens"),
    "sum_tokens": Sum("tokens"),
    "sum_cost": Sum("cost"),
    "unpriced": Count("id", filter=Q(cost__isnull=True)),
}
SUMMED = {
    "sum_input": "input_tokens",
    "sum_cached": "cached_tokens",
    "sum_output": "output_tokens",
    "sum_tokens": "tokens",
    "sum_cost": "cost",
}


def _sums(row: dict[str, Any]) -> dict[str, Any]:
    """A row of TOTALS under the fields' names, zeros for empty sums (cost stays None when
    nothing was priced)."""
    for summed, name in SUMMED.items():
        row[name] = row.pop(summed, None)
    for name in ("input_tokens", "cached_tokens", "output_tokens", "tokens"):
        row[name] = row[name] or 0
    row["answers"] = row.get("answers") or 0
    row["unpriced"] = row.get("unpriced") or 0
    row["priced"] = row["cost"] is not None
    return row


def usage_in(*, month: Month, **filters: Any) -> QuerySet[TurnUsage]:
    return TurnUsage.objects.filter(
        created_at__gte=month.start, created_at__lt=month.end, **filters
    )


def usage_total(*, user, month: Month) -> dict[str, Any]:
    """The month's totals of one user."""
    return _sums(usage_in(month=month, user=user).aggregate(**TOTALS))


def usage_by_model(*, user, month: Month) -> list[dict[str, Any]]:
    """The month per agent and model, the most used first."""
    rows = (
        usage_in(month=month, user=user)
        .values("agent", "model")
        .annotate(**TOTALS)
        .order_by("-sum_tokens", "agent", "model")
    )
    return [_sums(row) for row in rows]


def usage_by_day(*, user, month: Month) -> list[dict[str, Any]]:
    """Tokens and cost per day and agent, in day order."""
    rows = (
        usage_in(month=month, user=user)
        .annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day", "agent")
        .annotate(sum_tokens=Sum("tokens"), sum_cost=Sum("cost"))
        .order_by("day", "agent")
    )
    return [_sums(row) for row in rows]


def usage_by_chat(*, user, month: Month, limit: int = MOST_EXPENSIVE_CHATS) -> list[dict]:
    """The month's most expensive chats (by cost, then tokens), with their titles; a chat
    deleted since is listed without one."""
    rows = (
        usage_in(month=month, user=user)
        .values("chat_id")
        .annotate(**TOTALS)
        .order_by(F("sum_cost").desc(nulls_last=True), "-sum_tokens", "-chat_id")[:limit]
    )
    rows = [_sums(row) for row in rows]
    titles = dict(
        Chat.objects.filter(pk__in=[r["chat_id"] for r in rows], owner=user).values_list(
            "pk", "title"
        )
    )
    for row in rows:
        row["exists"] = row["chat_id"] in titles
        row["title"] = titles.get(row["chat_id"], "")
    return rows


def usage_of_turns(*, turn_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Tokens and cost per turn (for what watches spent)."""
    rows = (
        TurnUsage.objects.filter(turn_id__in=turn_ids)
        .values("turn_id")
        .annotate(
            sum_tokens=TOTALS["sum_tokens"],
            sum_cost=TOTALS["sum_cost"],
            unpriced=TOTALS["unpriced"],
        )
        .order_by()
    )
    return {row["turn_id"]: _sums(row) for row in rows}


# --- Teams --------------------------------------------------------------------------------------


def teams_owned(*, user) -> list[Team]:
    return list(
        Team.objects.filter(
            memberships__user=user, memberships__role=TeamMembership.Role.OWNER
        ).order_by("name")
    )


def team_usage_by_member(*, team: Team, month: Month) -> list[dict[str, Any]]:
    """Each member's month (members who used nothing included), the most used first."""
    members = list(
        TeamMembership.objects.filter(team=team).select_related("user").order_by("user__username")
    )
    sums = {
        row["user_id"]: _sums(row)
        for row in usage_in(month=month, user_id__in=[m.user_id for m in members])
        .values("user_id")
        .annotate(**TOTALS)
        .order_by()
    }
    rows = [{"user": m.user, "role": m.role, **sums.get(m.user_id, _sums({}))} for m in members]
    return sorted(rows, key=lambda r: -r["tokens"])


# --- The admin ----------------------------------------------------------------------------------


def usage_for_review(
    *, user=None, team: Team | None = None, agent: str = "", month: date | None = None
) -> list[dict[str, Any]]:
    """Sums per user, month, agent and model, newest month first, for the review admin and its
    CSV; each filter narrows the rows (a team: its members' usage)."""
    rows = TurnUsage.objects.all()
    if user is not None:
        rows = rows.filter(user=user)
    if team is not None:
        rows = rows.filter(user__team_memberships__team=team)
    if agent:
        rows = rows.filter(agent=agent)
    if month is not None:
        moment = timezone.make_aware(datetime(month.year, month.month, 1))
        chosen = Month.of(moment)
        rows = rows.filter(created_at__gte=chosen.start, created_at__lt=chosen.end)
    grouped = (
        rows.annotate(month=TruncMonth("created_at"))
        .values("month", "user__username", "agent", "model")
        .annotate(**TOTALS)
        .order_by("-month", "user__username", "agent", "model")
    )
    return [_sums(row) for row in grouped]


def review_totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The total of `usage_for_review` rows (answers: each row's turns, added)."""
    total: dict[str, Any] = {"answers": 0, "unpriced": 0}
    for key in ("input_tokens", "cached_tokens", "output_tokens", "tokens"):
        total[key] = sum(row[key] for row in rows)
    for row in rows:
        total["answers"] += row["answers"]
        total["unpriced"] += row["unpriced"]
    costs = [row["cost"] for row in rows if row["cost"] is not None]
    total["cost"] = sum(costs, Decimal(0)) if costs else None
    total["priced"] = bool(costs)
    return total


def usage_warning_this_month(*, user) -> UsageWarning | None:
    """This month's 80% warning of the user, if they were warned (shown under its turn)."""
    return UsageWarning.objects.filter(user=user, month=month_start().date()).first()
