"""API tokens: a user's keys to the API and the MCP server, stored as their SHA-256 digest."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiTokenQuerySet(models.QuerySet):
    def usable(self, now=None) -> ApiTokenQuerySet:
        """Tokens that may be used now: not revoked, not expired, of an active account."""
        now = now or timezone.now()
        return self.filter(revoked_at__isnull=True, owner__is_active=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    class Scope(models.TextChoices):
        READ = "read", "read: chats, answers, event streams, search, webhooks"
        ASK = "ask", "ask: questions, stop, organise chats, webhooks (the MCP server needs it)"

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The token itself is never stored: its SHA-256, hex (chats/api/services.py says why).
    digest = models.CharField(max_length=64, unique=True, editable=False)
    # Its first characters, to tell tokens apart on the page and in the admin.
    hint = models.CharField(max_length=16, editable=False)
    scopes = models.JSONField(default=list, help_text="Of 'read' and 'ask'.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Written at most once a minute per token: a script's every request need not write a row.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=models.Q(revoked_at__isnull=True),
                name="one_unrevoked_api_token_per_name",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()
