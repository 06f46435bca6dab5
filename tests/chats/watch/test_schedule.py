"""When a watch is due: its time of day, every day or week, queued on the task queue."""

from __future__ import annotations

from datetime import time

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chats.watch.schedule import next_run_after

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_watch_is_due_at_its_time_and_queued_on_the_task_queue(watched):
    assert watched.next_run_at > timezone.now()
    assert timezone.localtime(watched.next_run_at).time() == time(9, 0)
    queued = DBTaskResult.objects.get()
    assert queued.task_path == "chats.watch.tasks.run_due_watch"
    assert queued.args_kwargs["args"] == [watched.pk]
    assert queued.run_after == watched.next_run_at


def test_next_run_every_day_and_every_week():
    after = timezone.make_aware(timezone.datetime(2026, 11, 27, 10, 0))  # a Friday
    assert next_run_after(every="day", time_of_day=time(9), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 28, 9, 0))
    )
    assert next_run_after(every="day", time_of_day=time(11), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 27, 11, 0))
    )
    assert next_run_after(every="week", time_of_day=time(9), weekday=0, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 30, 9, 0))
    )
    assert next_run_after(every="week", time_of_day=time(11), weekday=4, after=after) == (
        timezone.make_aware(timezone.datetime(2026, 11, 27, 11, 0))
    )
