"""Reads of teams: a user's teams with their members and shared chats (the "Team" page), and
what a chat page shows about sharing it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Exists, Max, OuterRef, Prefetch
from django.shortcuts import get_object_or_404

from chats.models import Chat, Turn
from chats.teams.models import Team, TeamChatShare, TeamMembership


@dataclass
class SharedChat:
    share: TeamChatShare
    last_answer_at: datetime | None


@dataclass
class TeamView:
    """One of the user's teams, as the Team page shows it."""

    team: Team
    role: str
    members: list[TeamMembership] = field(default_factory=list)
    chats: list[SharedChat] = field(default_factory=list)

    @property
    def is_owner(self) -> bool:
        return self.role == TeamMembership.Role.OWNER


def teams_for_user(*, user) -> list[TeamView]:
    """The user's teams, each with its members and the chats shared with it (newest first)."""
    memberships = (
        TeamMembership.objects.filter(user=user)
        .select_related("team")
        .prefetch_related(
            Prefetch(
                "team__memberships",
                queryset=TeamMembership.objects.select_related("user").order_by(
                    "-role", "user__username"
                ),
            )
        )
        .order_by("team__name")
    )
    views = {
        m.team_id: TeamView(m.team, m.role, list(m.team.memberships.all())) for m in memberships
    }
    shares = (
        TeamChatShare.objects.filter(team_id__in=views)
        .select_related("chat", "shared_by")
        .annotate(last_answer_at=Max("chat__turns__finished_at"))
        .order_by("-created_at", "-id")
    )
    for share in shares:
        views[share.team_id].chats.append(SharedChat(share, share.last_answer_at))
    return list(views.values())


def team_get_for_member(*, user, team_id: int) -> Team:
    """One of the user's teams, or Http404."""
    return get_object_or_404(Team.objects.filter(memberships__user=user), pk=team_id)


@dataclass(frozen=True)
class ChatSharing:
    """What the chat page says about sharing with teams: for its owner, which of their teams
    it is shared with and which not; for a reader, the teams it reaches them through."""

    shared_teams: list[Team]
    unshared_teams: list[Team]
    reader_teams: list[Team]


def chat_sharing(*, chat: Chat, user) -> ChatSharing:
    """One query, or none for a user in no team (`chat_get_readable`'s `reader_in_teams`)."""
    if not getattr(chat, "reader_in_teams", True):
        return ChatSharing([], [], [])
    shared_here = TeamChatShare.objects.filter(team=OuterRef("pk"), chat=chat)
    mine = list(
        Team.objects.filter(memberships__user=user)
        .annotate(shared=Exists(shared_here))
        .order_by("name")
    )
    shared = [team for team in mine if team.shared]
    if chat.owner_id == user.pk:
        return ChatSharing(shared, [team for team in mine if not team.shared], [])
    return ChatSharing([], [], shared)


def turn_readable(*, user, chat_id: int, turn_id: int) -> Turn:
    """A finished answer of a chat the user may read, or Http404."""
    chat = get_object_or_404(Chat.objects.readable_by(user), pk=chat_id)
    return get_object_or_404(Turn, pk=turn_id, chat=chat, status=Turn.Status.COMPLETE)
