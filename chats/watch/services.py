"""Writes of watches: set one, claim a due one (exactly once), record its runs, pause, delete."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from chats.models import Turn
from chats.run.rerun import can_rerun
from chats.watch.models import Watch, WatchRun
from chats.watch.schedule import next_run_after
from chats.watch.tasks import schedule_watch


class WatchError(ValueError):
    """A watch refused; the message is shown to the analyst."""


def watch_create(
    *,
    owner,
    turn: Turn,
    every: str,
    time_of_day: time,
    weekday: int = 0,
    email_changes: bool = True,
) -> Watch:
    """Watch `turn` (one of the owner's finished answers): re-run it every day or week, and
    e-mail its owner about its changes if `email_changes` (when the site sends e-mail)."""
    if turn.chat.owner_id != owner.pk:
        raise WatchError("That answer is not yours to watch.")
    if not can_rerun(turn) or turn.status != Turn.Status.COMPLETE:
        raise WatchError("Only a finished answer can be watched.")
    if every not in Watch.Every.values:
        raise WatchError("Every must be 'day' or 'week'.")
    if not 0 <= weekday <= 6:
        raise WatchError("Choose a day of the week.")
    if Watch.objects.filter(owner=owner).count() >= settings.WATCH_MAX_PER_USER:
        raise WatchError(
            f"You have {settings.WATCH_MAX_PER_USER} watches already. Delete one on the"
            " Changes page first."
        )
    now = timezone.now()
    due = next_run_after(every=every, time_of_day=time_of_day, weekday=weekday, after=now)
    try:
        with transaction.atomic():
            watch = Watch.objects.create(
                owner=owner,
                chat=turn.chat,
                turn=turn,
                every=every,
                time_of_day=time_of_day,
                weekday=weekday,
                next_run_at=due,
                email_changes=email_changes,
            )
            schedule_watch(watch_id=watch.pk, at=due)
    except IntegrityError as error:
        raise WatchError("You are watching this answer already.") from error
    return watch


def watch_claim(*, watch_id: int, due_only: bool, now: datetime | None = None) -> Watch | None:
    """Claim the watch for one run, or return None when it is not to be run by this caller.

    One conditional UPDATE: only an active watch that no run holds (and, with `due_only`, that
    is due) is claimed, so however many workers and commands try at once, one of them gets it.
    A due watch's next due time moves on, and that run is queued, in the same transaction.
    """
    now = now or timezone.now()
    watch = Watch.objects.filter(pk=watch_id, state=Watch.State.ACTIVE).first()
    if watch is None:
        return None
    following = next_run_after(
        every=watch.every, time_of_day=watch.time_of_day, weekday=watch.weekday, after=now
    )
    claimable = Watch.objects.filter(pk=watch_id, state=Watch.State.ACTIVE).filter(
        Q(running_until__isnull=True) | Q(running_until__lt=now)
    )
    if due_only:
        claimable = claimable.filter(next_run_at__lte=now)
    # A run holds the watch at most as long as a turn may stream, and a little more.
    held_until = now + timedelta(seconds=settings.AGENT_MAX_TURN_SECONDS + 300)
    with transaction.atomic():
        claimed = claimable.update(
            running_until=held_until,
            last_run_at=now,
            next_run_at=Case(
                When(next_run_at__lte=now, then=Value(following)), default=F("next_run_at")
            ),
        )
        if not claimed:
            return None
        schedule_watch(watch_id=watch_id, at=following)
    return Watch.objects.select_related("chat", "owner").get(pk=watch_id)


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


def watch_retry_soon(*, watch: Watch) -> None:
    """A run a limit refused (too many answers being written): try again a little later."""
    at = timezone.now() + timedelta(minutes=settings.WATCH_RETRY_MINUTES)
    with transaction.atomic():
        updated = Watch.objects.filter(pk=watch.pk, next_run_at__gt=at).update(next_run_at=at)
        if updated:
            schedule_watch(watch_id=watch.pk, at=at)


def watch_pause(*, watch: Watch, reason: str = "") -> None:
    """Paused until resumed; `reason` says why when the site paused it (a usage limit)."""
    Watch.objects.filter(pk=watch.pk).update(state=Watch.State.PAUSED, paused_reason=reason[:300])


def watch_resume(*, watch: Watch) -> None:
    """Active again (also after it stopped for failures), from its next due time."""
    due = next_run_after(
        every=watch.every, time_of_day=watch.time_of_day, weekday=watch.weekday,
        after=timezone.now(),
    )  # fmt: skip
    with transaction.atomic():
        Watch.objects.filter(pk=watch.pk).update(
            state=Watch.State.ACTIVE, next_run_at=due, consecutive_failures=0, paused_reason=""
        )
        schedule_watch(watch_id=watch.pk, at=due)


def watch_email_set(*, watch: Watch, email_changes: bool) -> None:
    Watch.objects.filter(pk=watch.pk).update(email_changes=email_changes)


def watch_delete(*, watch: Watch) -> None:
    watch.delete()  # its queued task finds no watch and does nothing


def changes_mark_seen(*, user, run_ids: list[int]) -> None:
    WatchRun.objects.filter(pk__in=run_ids, watch__owner=user, seen_at__isnull=True).update(
        seen_at=timezone.now()
    )
