"""When a watch is next due: its time of day, every day or every week, in the site's time zone."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django.utils import timezone

DAY, WEEK = "day", "week"


def next_run_after(*, every: str, time_of_day: time, weekday: int, after: datetime) -> datetime:
    """The first moment strictly after `after` that is the watch's time of day (and, for a
    weekly watch, its weekday)."""
    local = timezone.localtime(after)
    candidate = local.replace(
        hour=time_of_day.hour, minute=time_of_day.minute, second=0, microsecond=0
    )
    if every == WEEK:
        candidate += timedelta(days=(weekday - candidate.weekday()) % 7)
        if candidate <= local:
            candidate += timedelta(days=7)
    elif candidate <= local:
        candidate += timedelta(days=1)
    # Re-localise: a day or a week later may fall on the other side of a DST change.
    naive = candidate.replace(tzinfo=None)
    return timezone.make_aware(naive, timezone.get_current_timezone())
