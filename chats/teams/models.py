"""A team and who belongs to it. Owners manage its members; everyone in it reads what is
shared with it."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Team(models.Model):
    name = models.CharField(max_length=150, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "owner"
        MEMBER = "member", "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team__name", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user"], name="one_membership_per_team_and_user"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
