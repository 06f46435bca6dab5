"""The scheduled side of watches: every write that queues a watch's run (setting a watch,
claiming a due one, retrying soon, resuming), and the task that runs it.

The queue is django-tasks (the backport of Django's tasks framework) with its database backend
(django-tasks-db): chosen because it keeps its queue in the site's own database, SQLite or
PostgreSQL alike, so it needs no broker, survives restarts, and claims each queued task for one
worker (SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL).

Each watch has one task queued for its next due time; claiming the watch queues the one after,
so the chain outlives a run that crashes. A task for a watch that is no longer due (run by
`run_watches --all`, paused, deleted, or queued twice) does nothing: the claim is a
conditional UPDATE of the watch (`watch_claim`).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone
from django_tasks import task

from chats.locks import lock_users
from chats.models import Turn
from chats.run.rerun import can_rerun
from chats.watch.models import Watch
from chats.watch.runs import run_claimed_watches
from chats.watch.schedule import next_run_after
from chats.watch.services import WatchError


@task()
def run_due_watch(watch_id: int) -> str:
    """Run the watch if it is due and nobody runs it yet; say what happened."""
    watch = watch_claim(watch_id=watch_id, due_only=True)
    if watch is None:
        return "not due, or already running"
    (outcome,) = run_claimed([watch])
    return outcome


def schedule_watch(*, watch_id: int, at: datetime) -> None:
    """Queue the watch's run for `at`, once the caller's transaction commits."""
    transaction.on_commit(lambda: run_due_watch.using(run_after=at).enqueue(watch_id), robust=True)


def run_claimed(watches: list[Watch]) -> list[str]:
    """Run watches this caller claimed (`runs.run_claimed_watches`), queue another try soon of
    those a limit refused, and return each one's outcome (a WatchRun state)."""
    outcomes = run_claimed_watches(watches)
    for watch, outcome in zip(watches, outcomes, strict=True):
        if outcome.retry_soon:
            watch_retry_soon(watch=watch)
    return [outcome.state for outcome in outcomes]


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
    if time_of_day.tzinfo is not None:  # a time of day is in the site's time zone, no other
        raise WatchError(
            f"Choose a time of day such as 09:00, in the site's time zone ({settings.TIME_ZONE}),"
            " with no offset."
        )
    now = timezone.now()
    due = next_run_after(every=every, time_of_day=time_of_day, weekday=weekday, after=now)
    limit = settings.WATCH_MAX_PER_USER
    try:
        with transaction.atomic():
            lock_users([owner.pk])  # two new watches at once cannot both see room for one more
            if Watch.objects.filter(owner=owner).count() >= limit:
                raise WatchError(
                    f"You have {limit} watches already. Delete one on the Changes page first."
                )
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


def watch_retry_soon(*, watch: Watch) -> None:
    """A run a limit refused (too many answers being written): try again a little later."""
    at = timezone.now() + timedelta(minutes=settings.WATCH_RETRY_MINUTES)
    with transaction.atomic():
        updated = Watch.objects.filter(pk=watch.pk, next_run_at__gt=at).update(next_run_at=at)
        if updated:
            schedule_watch(watch_id=watch.pk, at=at)


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
