"""Webhook endpoints, their deliveries, and the turns whose end was asked to be sent."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class WebhookEndpoint(models.Model):
    class Event(models.TextChoices):
        TURN_FINISHED = "turn.finished", "turn.finished: a turn started through the API ended"
        WATCH_CHANGED = (
            "watch.changed",
            "watch.changed: a watched question's figures or sources moved",
        )

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=2000)
    events = models.JSONField(default=list)
    # The Standard Webhooks signing secret (`whsec_` and base64): shown to the user once.
    secret = models.CharField(max_length=100, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event sent to one endpoint: every attempt signs the same body under the same id."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed: no attempt left"

    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=40)
    # The `webhook-id` header: the same on every attempt, so a receiver can drop repeats.
    message_id = models.CharField(max_length=40, unique=True)
    # The request body, as sent: kept as text, so that every attempt signs the same bytes.
    body = models.TextField()
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.event} to {self.endpoint_id}: {self.status}"


class TurnWebhook(models.Model):
    """A turn whose end is sent to its owner's `turn.finished` endpoints (asked by the API)."""

    turn = models.OneToOneField(
        "chats.Turn", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"turn.finished of turn {self.turn_id}"
