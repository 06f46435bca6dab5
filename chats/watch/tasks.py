"""The scheduled side of watches, on django-tasks (the backport of Django's tasks framework)
with its database backend (django-tasks-db): chosen because it keeps its queue in the site's
own database, SQLite or PostgreSQL alike, so it needs no broker, survives restarts, and claims
each queued task for one worker (SELECT ... FOR UPDATE SKIP LOCKED on PostgreSQL).

Each watch has one task queued for its next due time; claiming the watch queues the one after,
so the chain outlives a run that crashes. A task for a watch that is no longer due (run by
`run_watches --all`, paused, deleted, or queued twice) does nothing: the claim is a
conditional UPDATE of the watch (`services.watch_claim`).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django_tasks import task


@task()
def run_due_watch(watch_id: int) -> str:
    """Run the watch if it is due and nobody runs it yet; say what happened."""
    from chats.watch.runs import run_claimed_watches
    from chats.watch.services import watch_claim

    watch = watch_claim(watch_id=watch_id, due_only=True)
    if watch is None:
        return "not due, or already running"
    (outcome,) = run_claimed_watches([watch])
    return outcome


def schedule_watch(*, watch_id: int, at: datetime) -> None:
    """Queue the watch's run for `at`, once the caller's transaction commits."""
    transaction.on_commit(lambda: run_due_watch.using(run_after=at).enqueue(watch_id), robust=True)
