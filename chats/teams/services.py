"""Writes of teams: make one, add and remove members, share chats with it, follow the identity
provider's groups. Whoever loses access to a chat this way has their open pages of it closed
(`access_ended`), in any process, as a logout closes a user's pages."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from chats.live.protocol import access_changed, publish, user_group
from chats.models import Chat, Turn
from chats.services import chat_create
from chats.teams.models import Team, TeamChatShare, TeamMembership

logger = logging.getLogger(__name__)

TEAM_NAME_MAX_CHARS = 150


class TeamError(ValueError):
    """A team action refused; the message is shown to the user."""


def team_create(*, name: str, owner) -> Team:
    """Make a team; its maker is its first owner."""
    name = " ".join(name.split())
    if not name:
        raise TeamError("Give the team a name.")
    if len(name) > TEAM_NAME_MAX_CHARS:
        raise TeamError(f"A team's name has at most {TEAM_NAME_MAX_CHARS} characters.")
    try:
        with transaction.atomic():
            team = Team.objects.create(name=name)
            TeamMembership.objects.create(team=team, user=owner, role=TeamMembership.Role.OWNER)
    except IntegrityError as error:
        raise TeamError(f"A team named “{name}” exists already.") from error
    return team


def team_member_add(*, team: Team, by, username: str, role: str = TeamMembership.Role.MEMBER):
    """An owner adds a user, by username, as a member or an owner."""
    _require_owner(team=team, user=by)
    if role not in TeamMembership.Role.values:
        raise TeamError("A member's role is owner or member.")
    user = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if user is None:
        raise TeamError(f"There is no user named “{username.strip()}”.")
    membership, created = TeamMembership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    if not created:
        raise TeamError(f"{user.get_username()} is in {team.name} already.")
    return membership


def team_member_remove(*, team: Team, by, user_id: int) -> None:
    """An owner removes a member, or a member leaves. A team keeps at least one owner when it
    has other members (the admin can always change a team)."""
    if by.pk != user_id:
        _require_owner(team=team, user=by)
    with transaction.atomic():
        membership = (
            TeamMembership.objects.select_for_update().filter(team=team, user_id=user_id).first()
        )
        if membership is None:
            return
        if membership.role == TeamMembership.Role.OWNER:
            others = TeamMembership.objects.filter(team=team).exclude(pk=membership.pk)
            if others.exists() and not others.filter(role=TeamMembership.Role.OWNER).exists():
                raise TeamError(f"Make another member an owner of {team.name} first.")
        membership.delete()
        access_ended(user_ids=[user_id])


def team_chat_share(*, chat: Chat, team: Team, user) -> TeamChatShare:
    """The chat's owner shares it with a team they are in: its members read it, live."""
    if chat.owner_id != user.pk:
        raise TeamError("Only the chat's owner can share it.")
    if not TeamMembership.objects.filter(team=team, user=user).exists():
        raise TeamError(f"You are not in {team.name}.")
    share, _ = TeamChatShare.objects.get_or_create(
        team=team, chat=chat, defaults={"shared_by": user}
    )
    return share


def team_chat_unshare(*, chat: Chat, team: Team) -> None:
    """Stop sharing the chat with the team: its members' open pages of it close."""
    with transaction.atomic():
        deleted, _ = TeamChatShare.objects.filter(team=team, chat=chat).delete()
        if deleted:
            members = TeamMembership.objects.filter(team=team).exclude(user_id=chat.owner_id)
            access_ended(user_ids=list(members.values_list("user_id", flat=True)))


def chat_continue(*, user, turn: Turn) -> Chat:
    """ "Continue in my chats": a new chat of the user's own that goes on from a finished answer
    of a chat they read. Its first question is sent with that answer's checkpoint (or, to other
    agents, that answer's branch: `chats.services.turn_start_many`); the chat it came from is
    left as it was."""
    if turn.status != Turn.Status.COMPLETE:
        raise TeamError("Only a finished answer can be continued.")
    with transaction.atomic():
        chat = chat_create(owner=user, provider=turn.chat.provider)
        chat.continued_from = turn
        chat.title = turn.chat.title
        chat.save(update_fields=["continued_from", "title"])
    return chat


def team_memberships_sync(*, user, groups: Iterable[str]) -> None:
    """Make the user's teams follow the identity provider's groups (OIDC_TEAMS_CLAIM): a team
    per group, made the first time a group is seen; a membership the provider made goes when
    its group does. Memberships an owner or the admin made are left alone."""
    names = {" ".join(str(g).split())[:TEAM_NAME_MAX_CHARS] for g in groups} - {""}
    with transaction.atomic():
        for name in sorted(names):
            team, _ = Team.objects.get_or_create(name=name)
            TeamMembership.objects.get_or_create(
                team=team, user=user, defaults={"from_provider": True}
            )
        gone = TeamMembership.objects.filter(user=user, from_provider=True).exclude(
            team__name__in=names
        )
        if gone.delete()[0]:
            access_ended(user_ids=[user.pk])


def access_ended(*, user_ids: list[int]) -> None:
    """Once the caller's transaction commits, tell these users' open pages, in any process, to
    check that they may still read their chat; those that may not are closed."""
    if user_ids:
        transaction.on_commit(lambda: _tell_pages(user_ids), robust=True)


def _tell_pages(user_ids: list[int]) -> None:
    for user_id in user_ids:
        try:
            async_to_sync(publish)(user_group(user_id), access_changed())
        except Exception:  # the next request and every ask check access anyway
            logger.exception("Could not tell the pages of user %s that access ended", user_id)


def _require_owner(*, team: Team, user) -> None:
    owner = TeamMembership.Role.OWNER
    if not TeamMembership.objects.filter(team=team, user=user, role=owner).exists():
        raise TeamError(f"Only an owner of {team.name} can change its members.")
