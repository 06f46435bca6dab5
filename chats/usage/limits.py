"""Monthly limits: whose apply, and the check every way of starting a turn goes through.

A user's limits are their own override (`UsageLimit` with `user`), else the most generous of
their teams' overrides (a team's limit is a limit for each of its members: one member cannot
spend the others' share, and the check needs no lock beyond the asker's own), else the site's
USAGE_MONTHLY_LIMIT_TOKENS and USAGE_MONTHLY_LIMIT_COST. A month is a calendar month in the
site's TIME_ZONE.

The check is predictive, under the owner's row lock that `chats.services.turn_start_many` takes:
a question is refused when this month's usage, plus what the owner's running answers are
expected to use, plus what this question is expected to use, would pass a limit. A question is
expected to use the owner's average per answer this month on that agent (else on any agent;
with no answer yet this month, nothing). Each turn started reserves its estimate, so a burst of
questions starts no more turns than the limit allows; a turn already running finishes and is
counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.utils import timezone

from chats.errors import ErrorCode, TurnStartError
from chats.models import Turn
from chats.usage.models import TurnUsage, UsageLimit
from chats.usage.prices import dollars

WARN_AT = Decimal("0.8")  # of a limit: the page warns once a month


@dataclass(frozen=True)
class Limits:
    """A user's monthly limits; None: no limit of that kind."""

    tokens: int | None = None
    cost: Decimal | None = None

    def __bool__(self) -> bool:
        return self.tokens is not None or self.cost is not None


def site_limits() -> Limits:
    return Limits(settings.USAGE_MONTHLY_LIMIT_TOKENS, settings.USAGE_MONTHLY_LIMIT_COST)


def limits_for_users(*, user_ids: list[int]) -> dict[int, Limits]:
    """Each user's limits (one query): their own override, their teams', or the site's."""
    own: dict[int, Limits] = {}
    teams: dict[int, list[Limits]] = {}
    overrides = UsageLimit.objects.filter(
        Q(user_id__in=user_ids) | Q(team__memberships__user_id__in=user_ids)
    ).values_list("user_id", "team__memberships__user_id", "monthly_tokens", "monthly_cost")
    for user_id, member_id, tokens, cost in overrides:
        if user_id is not None:
            own[user_id] = Limits(tokens, cost)
        elif member_id is not None:
            teams.setdefault(member_id, []).append(Limits(tokens, cost))
    site = site_limits()
    found = {}
    for user_id in user_ids:
        if user_id in own:
            found[user_id] = own[user_id]
        elif user_id in teams:
            found[user_id] = _most_generous(teams[user_id])
        else:
            found[user_id] = site
    return found


def _most_generous(limits: list[Limits]) -> Limits:
    tokens = [limit.tokens for limit in limits]
    costs = [limit.cost for limit in limits]
    return Limits(
        None if None in tokens else max(t for t in tokens if t is not None),
        None if None in costs else max(c for c in costs if c is not None),
    )


# --- The month ----------------------------------------------------------------------------------


def month_start(now: datetime | None = None) -> datetime:
    """The first moment of `now`'s calendar month, in the site's time zone."""
    local = timezone.localtime(now or timezone.now())
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month_start(now: datetime | None = None) -> datetime:
    start = month_start(now)
    if start.month == 12:
        return start.replace(year=start.year + 1, month=1)
    return start.replace(month=start.month + 1)


def resets_on(now: datetime | None = None) -> str:
    """ "1 December": when this month's limits start again."""
    return f"1 {next_month_start(now):%B}"


# --- Spent this month -----------------------------------------------------------------------------


@dataclass
class Spent:
    """What a user's finished answers used this month, on one agent or all."""

    tokens: int = 0
    cost: Decimal = Decimal(0)
    answers: int = 0
    priced_answers: int = 0

    def add(self, other: Spent) -> None:
        self.tokens += other.tokens
        self.cost += other.cost
        self.answers += other.answers
        self.priced_answers += other.priced_answers

    @property
    def tokens_per_answer(self) -> int:
        return -(-self.tokens // self.answers) if self.answers else 0

    @property
    def cost_per_answer(self) -> Decimal:
        return self.cost / self.priced_answers if self.priced_answers else Decimal(0)


def spent_this_month(*, user_ids: list[int], now: datetime) -> dict[int, dict[str, Spent]]:
    """Each user's usage since the month began, per agent (one query)."""
    rows = (
        TurnUsage.objects.filter(user_id__in=user_ids, created_at__gte=month_start(now))
        .values("user_id", "agent")
        .annotate(
            sum_tokens=Sum("tokens"),
            sum_cost=Sum("cost"),
            answers=Count("turn_id", distinct=True),
            priced=Count("turn_id", distinct=True, filter=Q(cost__isnull=False)),
        )
        .order_by()
    )
    spent: dict[int, dict[str, Spent]] = {}
    for row in rows:
        spent.setdefault(row["user_id"], {})[row["agent"]] = Spent(
            row["sum_tokens"] or 0, row["sum_cost"] or Decimal(0), row["answers"], row["priced"]
        )
    return spent


# --- The check ------------------------------------------------------------------------------------


@dataclass
class Budget:
    """One user's limits and this month's usage, and the estimates of the turns started since."""

    limits: Limits
    by_agent: dict[str, Spent]
    now: datetime
    reserved_tokens: int = 0
    reserved_cost: Decimal = Decimal(0)
    running: int = 0
    used: Spent = field(init=False)

    def __post_init__(self) -> None:
        self.used = Spent()
        for spent in self.by_agent.values():
            self.used.add(spent)

    def estimate(self, agent: str) -> tuple[int, Decimal]:
        """What a question to `agent` is expected to use: the average answer this month there,
        else on any agent, else nothing."""
        basis = self.by_agent.get(agent)
        if basis is None or not basis.answers:
            basis = self.used
        return basis.tokens_per_answer, basis.cost_per_answer

    def reserve(self, agent: str) -> None:
        tokens, cost = self.estimate(agent)
        self.reserved_tokens += tokens
        self.reserved_cost += cost
        self.running += 1

    def admit(self, agent: str) -> None:
        """Reserve a question's estimate, or raise TurnStartError (USAGE_LIMIT) saying why not."""
        tokens, cost = self.estimate(agent)
        limit = self.limits
        if limit.tokens is not None:
            if self.used.tokens >= limit.tokens:
                raise _refusal(used_up_tokens(self.used.tokens, limit.tokens, self.now))
            if self.used.tokens + self.reserved_tokens + tokens > limit.tokens:
                raise _refusal(
                    f"You have used {self.used.tokens:,} of your {limit.tokens:,} tokens this"
                    f" month{self._running_text(f'{self.reserved_tokens:,} tokens')} and a"
                    f" question uses about {tokens:,}, so this one would pass the limit;"
                    f" the limit resets on {resets_on(self.now)}."
                )
        if limit.cost is not None:
            if self.used.cost >= limit.cost:
                raise _refusal(used_up_cost(self.used.cost, limit.cost, self.now))
            if self.used.cost + self.reserved_cost + cost > limit.cost:
                raise _refusal(
                    f"You have spent {dollars(self.used.cost)} of your {dollars(limit.cost)}"
                    f" this month{self._running_text(dollars(self.reserved_cost))} and a"
                    f" question costs about {dollars(cost)}, so this one would pass the limit;"
                    f" the limit resets on {resets_on(self.now)}."
                )
        self.reserve(agent)

    def _running_text(self, amount: str) -> str:
        if not self.running:
            return ""
        answers = "answer" if self.running == 1 else "answers"
        return f", {self.running} {answers} being written will use about {amount} more"


def used_up_tokens(used: int, limit: int, now: datetime) -> str:
    return (
        f"You have used {used:,} of your {limit:,} tokens this month;"
        f" the limit resets on {resets_on(now)}."
    )


def used_up_cost(used: Decimal, limit: Decimal, now: datetime) -> str:
    return (
        f"You have spent {dollars(used)} of your {dollars(limit)} this month;"
        f" the limit resets on {resets_on(now)}."
    )


def _refusal(message: str) -> TurnStartError:
    return TurnStartError(message, ErrorCode.USAGE_LIMIT)


class UsageBudgets:
    """The budgets of the users asking in one `turn_start_many` call, whose rows it has locked."""

    def __init__(self, budgets: dict[int, Budget]) -> None:
        self.budgets = budgets

    def admit(self, *, owner_id: int, agent: str) -> None:
        """Count a new turn of `owner_id` on `agent`, or raise TurnStartError (USAGE_LIMIT)."""
        budget = self.budgets.get(owner_id)
        if budget is not None:
            budget.admit(agent)


def usage_budgets(*, owner_ids: list[int], now: datetime | None = None) -> UsageBudgets:
    """The owners' budgets, read under their row locks: one query when none has a limit, three
    when some have (their usage this month, and their running turns' agents)."""
    now = now or timezone.now()
    limits = {uid: lim for uid, lim in limits_for_users(user_ids=owner_ids).items() if lim}
    if not limits:
        return UsageBudgets({})
    limited = list(limits)
    spent = spent_this_month(user_ids=limited, now=now)
    budgets = {uid: Budget(limits[uid], spent.get(uid, {}), now) for uid in limited}
    # A streaming turn whose lease lapsed belongs to a dead process: it runs no more.
    running = Turn.objects.streaming().filter(lease_expires_at__gt=now, chat__owner_id__in=limited)
    for owner_id, agent in running.values_list("chat__owner_id", "chat__provider"):
        budgets[owner_id].reserve(agent)
    return UsageBudgets(budgets)
