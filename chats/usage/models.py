"""Usage as it is kept: each finished turn's tokens and cost per model, the limits that override
the site's, and the 80% warning.

A `TurnUsage` row is written when its turn finishes (`chats.usage.records`), priced then, and
outlives its turn and chat: deleting a chat does not give back what its answers spent this month,
so `turn` and `chat` are kept as plain ids (no database constraint, nothing cascades).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class TurnUsage(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="turn_usage"
    )
    chat = models.ForeignKey(
        "chats.Chat", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    turn = models.ForeignKey(
        "chats.Turn", on_delete=models.DO_NOTHING, db_constraint=False, related_name="usage"
    )
    agent = models.CharField(max_length=32)
    model = models.CharField(max_length=100, help_text="As the agent reported it (its `type`).")
    input_tokens = models.PositiveBigIntegerField(help_text="Cached ones included.")
    cached_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField()
    tokens = models.PositiveBigIntegerField(help_text="Input and output: what the limit counts.")
    # In dollars, as priced when the turn finished; NULL: the model's price is unknown.
    cost = models.DecimalField(max_digits=18, decimal_places=8, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, help_text="When the turn finished.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"], name="turn_usage_user_time")]
        constraints = [
            models.UniqueConstraint(fields=["turn", "model"], name="one_usage_per_turn_and_model")
        ]

    def __str__(self) -> str:
        return f"{self.model}: {self.tokens} tokens (turn {self.turn_id})"


class UsageLimit(models.Model):
    """The monthly limits of one user or one team, in place of the site's settings.

    A user's own row wins; else the most generous of their teams' rows (a team's limit applies
    to each of its members, not to the team as a whole); else USAGE_MONTHLY_LIMIT_TOKENS and
    USAGE_MONTHLY_LIMIT_COST. Within a row, an empty field means no limit of that kind.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="usage_limit",
    )
    team = models.OneToOneField(
        "chats.Team", on_delete=models.CASCADE, null=True, blank=True, related_name="usage_limit"
    )
    monthly_tokens = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Tokens per calendar month; empty: no token limit."
    )
    monthly_cost = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        null=True,
        blank=True,
        help_text="Dollars of priced usage per calendar month; empty: no cost limit.",
    )
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(user__isnull=False, team__isnull=True)
                | models.Q(user__isnull=True, team__isnull=False),
                name="usage_limit_of_a_user_or_a_team",
                violation_error_message="A limit is of one user or of one team: choose one.",
            )
        ]

    def __str__(self) -> str:
        return f"Usage limit of {self.user or self.team}"


class UsageWarning(models.Model):
    """A user told on the page that they passed 80% of a monthly limit: once per month."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="usage_warnings"
    )
    month = models.DateField(help_text="The month's first day.")
    # The turn whose finish crossed 80%: the chat page shows the warning under it.
    turn = models.ForeignKey(
        "chats.Turn", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    message = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "month"], name="one_usage_warning_a_month")
        ]

    def __str__(self) -> str:
        return f"Usage warning of {self.user} for {self.month:%Y-%m}"
