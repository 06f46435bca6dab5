"""Writes of watches that queue no run: record a run's start and end, pause, e-mail, delete,
mark seen. The writes that queue a run (set a watch, claim, retry, resume) are the scheduled
side, `chats/watch/tasks.py`."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chats.models import Turn
from chats.watch.models import Watch, WatchRun


class WatchError(ValueError):
    """A watch refused; the message is shown to the analyst."""


def watch_run_begin(*, watch: Watch, previous: Turn | None) -> WatchRun:
    return WatchRun.objects.create(watch=watch, previous_turn=previous)


def watch_run_end(
    *,
    run: WatchRun,
    state: str,
    turn: Turn | None = None,
    comparison: dict | None = None,
    summary: str = "",
    figures: str = "",
    error: str = "",
) -> WatchRun:
    """Record how the run ended and release the watch; stop it after repeated failures."""
    with transaction.atomic():
        run.turn = turn
        run.state = state
        run.summary = summary[:300]
        run.figures = figures[:500]
        run.comparison = comparison or {}
        run.error = error
        run.finished_at = timezone.now()
        run.save()
        watch = Watch.objects.select_for_update().get(pk=run.watch_id)
        watch.running_until = None
        # A change, or the failure that stops the watch, is the one run the Changes page tells
        # the analyst about: what it supersedes no longer counts as unseen.
        supersedes = state == WatchRun.State.CHANGED
        if state == WatchRun.State.FAILED:
            watch.consecutive_failures += 1
            if watch.consecutive_failures >= settings.WATCH_MAX_FAILURES:
                watch.state = Watch.State.STOPPED
                supersedes = True
        elif state in (WatchRun.State.CHANGED, WatchRun.State.UNCHANGED):
            watch.consecutive_failures = 0
        if supersedes:
            earlier = WatchRun.objects.filter(watch=watch, seen_at__isnull=True)
            earlier.exclude(pk=run.pk).update(seen_at=run.finished_at)
        watch.save(update_fields=["running_until", "consecutive_failures", "state"])
    run.watch = watch
    return run


def watch_pause(*, watch: Watch, reason: str = "") -> None:
    """Paused until resumed; `reason` says why when the site paused it (a usage limit)."""
    Watch.objects.filter(pk=watch.pk).update(state=Watch.State.PAUSED, paused_reason=reason[:300])


def watch_email_set(*, watch: Watch, email_changes: bool) -> None:
    Watch.objects.filter(pk=watch.pk).update(email_changes=email_changes)


def watch_delete(*, watch: Watch) -> None:
    watch.delete()  # its queued task finds no watch and does nothing


def changes_mark_seen(*, user, run_ids: list[int]) -> None:
    WatchRun.objects.filter(pk__in=run_ids, watch__owner=user, seen_at__isnull=True).update(
        seen_at=timezone.now()
    )
