"""A team, who belongs to it, and the chats shared with it. Owners manage its members; everyone
in it reads what is shared with it (`chats.models.ChatQuerySet.readable_by`)."""

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
    # Made from the identity provider's groups (OIDC_TEAMS_CLAIM): the next sign-in whose
    # groups leave the team out removes it. Memberships an owner or the admin made stay.
    from_provider = models.BooleanField(default=False)

    class Meta:
        ordering = ["team__name", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "user"], name="one_membership_per_team_and_user"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class TeamChatShare(models.Model):
    """A chat its owner shares with a team: every member reads it live, read-only, until the
    owner stops sharing it (the row is deleted) or the member leaves the team."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="chat_shares")
    chat = models.ForeignKey("chats.Chat", on_delete=models.CASCADE, related_name="team_shares")
    shared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "chat"], name="one_share_per_team_and_chat")
        ]

    def __str__(self) -> str:
        return f"Chat {self.chat_id} shared with {self.team}"
