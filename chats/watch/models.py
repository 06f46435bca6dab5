"""Watches: a finished answer re-run on a schedule, each run a new version compared with the last.

A watch's `next_run_at` is when it is due; whoever runs it first claims it with one conditional
UPDATE (`services.watch_claim`), so a due watch runs once however many workers look at it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Watch(models.Model):
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="watches"
    )
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="watches")
    # The version the analyst chose to watch; every run is a new sibling of it.
    turn = models.ForeignKey("chats.Turn", on_delete=models.CASCADE, related_name="watches")

    class Every(models.TextChoices):
        DAY = "day", "day"
        WEEK = "week", "week"

    every = models.CharField(max_length=8, choices=Every.choices, default=Every.DAY)
    time_of_day = models.TimeField(help_text="In the site's time zone (TIME_ZONE).")
    weekday = models.PositiveSmallIntegerField(
        default=0, help_text="Weekly watches: 0 is Monday, 6 is Sunday."
    )

    class State(models.TextChoices):
        ACTIVE = "active", "active"
        PAUSED = "paused", "paused"
        STOPPED = "stopped", "stopped after repeated failures"

    state = models.CharField(
        max_length=8, choices=State.choices, default=State.ACTIVE, db_index=True
    )
    # Why the site paused it (a run refused for the monthly usage limit); empty otherwise.
    paused_reason = models.CharField(max_length=300, blank=True)
    next_run_at = models.DateTimeField(db_index=True)
    # Set while a run is under way (a claim); a lapsed one belongs to a process that died.
    running_until = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveSmallIntegerField(default=0)
    # "E-mail me when it changes": its owner is e-mailed about each change (and about the watch
    # stopping) when the site sends e-mail (WATCH_EMAIL).
    email_changes = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "turn"], name="one_watch_per_turn_and_user")
        ]

    def __str__(self) -> str:
        return f"Watch {self.pk}: {self.turn.question[:60]}"

    @property
    def schedule_label(self) -> str:
        """ "Every day at 09:00" or "Every week on Monday at 09:00"."""
        at = self.time_of_day.strftime("%H:%M")
        if self.every == self.Every.WEEK:
            return f"Every week on {WEEKDAYS[self.weekday]} at {at}"
        return f"Every day at {at}"


WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


class WatchRun(models.Model):
    watch = models.ForeignKey(Watch, on_delete=models.CASCADE, related_name="runs")
    # The version this run asked for, and the newest finished version before it.
    turn = models.ForeignKey(
        "chats.Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    previous_turn = models.ForeignKey(
        "chats.Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class State(models.TextChoices):
        RUNNING = "running", "running"
        CHANGED = "changed", "figures or sources changed"
        UNCHANGED = "unchanged", "no figures or sources changed"
        FAILED = "failed", "failed"
        SKIPPED = "skipped", "skipped (a limit)"

    state = models.CharField(
        max_length=10, choices=State.choices, default=State.RUNNING, db_index=True
    )
    summary = models.CharField(max_length=300, blank=True)
    figures = models.CharField(max_length=500, blank=True, help_text="The changed figures.")
    comparison = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A change the analyst has not seen yet counts in the header's "Changes" link.
    seen_at = models.DateTimeField(null=True, blank=True)
    # Claimed before this run's e-mail is sent (`chats.watch.notify`): a run is e-mailed once,
    # however often its task is retried.
    emailed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"Run {self.pk} of watch {self.watch_id}: {self.state}"
