"""Reads of watches: the analyst's watches with their latest runs, and the unseen changes."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q
from django.shortcuts import get_object_or_404

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
