"""Reads of watches: the analyst's watches with their latest runs, the unseen changes, and what
the watches spent."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.db.models import Q
from django.shortcuts import get_object_or_404

from chats.usage.selectors import Month, usage_in, usage_of_turns
from chats.watch.models import Watch, WatchRun


def changes_unseen_count(*, user) -> int:
    """What the header's "Changes" link counts: the runs that changed figures or sources, and
    the runs that stopped a watch, that the analyst has not seen on the Changes page."""
    stopped_it = Q(state=WatchRun.State.FAILED, watch__state=Watch.State.STOPPED)
    return (
        WatchRun.objects.filter(watch__owner=user, seen_at__isnull=True)
        .filter(Q(state=WatchRun.State.CHANGED) | stopped_it)
        .count()
    )


@dataclass(frozen=True)
class WatchedQuestion:
    watch: Watch
    latest_change: WatchRun | None  # the newest run that changed figures or sources
    latest_run: WatchRun | None


def watched_questions(*, user) -> list[WatchedQuestion]:
    watches = list(
        Watch.objects.filter(owner=user).select_related("turn", "chat").order_by("-created_at")
    )
    runs: dict[int, list[WatchRun]] = {}
    for run in WatchRun.objects.filter(watch__in=watches).order_by("-started_at", "-id"):
        runs.setdefault(run.watch_id, []).append(run)
    return [
        WatchedQuestion(
            watch,
            next((r for r in runs.get(watch.pk, []) if r.state == WatchRun.State.CHANGED), None),
            (runs.get(watch.pk) or [None])[0],
        )
        for watch in watches
    ]


def watch_get_for_user(*, user, watch_id: int) -> Watch:
    return get_object_or_404(Watch.objects.filter(owner=user), pk=watch_id)


@dataclass(frozen=True)
class WatchSpending:
    watch: Watch
    runs: int
    tokens: int
    cost: Decimal | None  # None: no run's model had a known price
    unpriced: int  # the runs' usage rows of unknown price


def watch_spending(*, user, month: Month) -> list[WatchSpending]:
    """What each of the user's watches spent in the month (its runs' answers that finished in
    it), the most tokens first."""
    run_turns = WatchRun.objects.filter(watch__owner=user, turn__isnull=False).values("turn_id")
    used = usage_of_turns(
        turn_ids=usage_in(month=month, user=user, turn_id__in=run_turns).values("turn_id")
    )
    runs = WatchRun.objects.filter(turn_id__in=list(used)).select_related("watch__turn")
    by_watch: dict[int, list[WatchRun]] = {}
    for run in runs:
        by_watch.setdefault(run.watch_id, []).append(run)
    spending = []
    for watch_runs in by_watch.values():
        rows = [used[run.turn_id] for run in watch_runs]
        costs = [row["cost"] for row in rows if row["cost"] is not None]
        spending.append(
            WatchSpending(
                watch_runs[0].watch,
                len(watch_runs),
                sum(row["tokens"] for row in rows),
                sum(costs, Decimal(0)) if costs else None,
                sum(row["unpriced"] for row in rows),
            )
        )
    return sorted(spending, key=lambda s: -s.tokens)
