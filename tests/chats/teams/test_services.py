"""Teams' writes: members and owners, sharing, and teams that follow the provider's groups."""

from __future__ import annotations

import pytest

from chats.teams.models import Team, TeamMembership
from chats.teams.services import (
    TeamError,
    team_chat_share,
    team_create,
    team_member_add,
    team_member_remove,
    team_memberships_sync,
)

pytestmark = pytest.mark.django_db


def members(team: Team) -> dict[str, str]:
    return {m.user.username: m.role for m in team.memberships.select_related("user")}


def test_the_maker_of_a_team_owns_it_and_names_are_unique(alice, bob):
    team = team_create(name="  Macro   desk ", owner=alice)
    assert (team.name, members(team)) == ("Macro desk", {"alice": "owner"})
    with pytest.raises(TeamError, match="exists already"):
        team_create(name="Macro desk", owner=bob)
    with pytest.raises(TeamError, match="name"):
        team_create(name="   ", owner=bob)


def test_only_owners_add_and_remove_members(alice, bob, carol, research):
    with pytest.raises(TeamError, match="Only an owner"):
        team_member_add(team=research, by=bob, username="carol")
    team_member_add(team=research, by=alice, username="carol")
    with pytest.raises(TeamError, match="in research already"):
        team_member_add(team=research, by=alice, username="carol")
    with pytest.raises(TeamError, match="no user named"):
        team_member_add(team=research, by=alice, username="nobody")
    with pytest.raises(TeamError, match="Only an owner"):
        team_member_remove(team=research, by=bob, user_id=carol.pk)
    team_member_remove(team=research, by=alice, user_id=carol.pk)
    team_member_remove(team=research, by=bob, user_id=bob.pk)  # anyone may leave
    assert members(research) == {"alice": "owner"}


def test_the_last_owner_cannot_leave_members_behind(alice, research):
    with pytest.raises(TeamError, match="another member an owner"):
        team_member_remove(team=research, by=alice, user_id=alice.pk)


def test_only_the_owner_shares_a_chat_and_only_with_their_team(alice, bob, carol, shared_chat):
    other = team_create(name="others", owner=carol)
    with pytest.raises(TeamError, match="Only the chat's owner"):
        team_chat_share(chat=shared_chat, team=other, user=bob)
    with pytest.raises(TeamError, match="not in others"):
        team_chat_share(chat=shared_chat, team=other, user=alice)


def test_teams_follow_the_providers_groups(alice, bob, research):
    team_memberships_sync(user=bob, groups=["research", "macro"])
    macro = Team.objects.get(name="macro")  # made the first time the group is seen
    assert members(macro) == {"bob": "member"}
    assert TeamMembership.objects.get(team=macro, user=bob).from_provider
    # research was an owner's doing: the provider does not take it away.
    team_memberships_sync(user=bob, groups=[])
    assert members(research) == {"alice": "owner", "bob": "member"}
    assert members(macro) == {}


def test_a_provider_membership_goes_with_its_group(carol):
    team_memberships_sync(user=carol, groups=["research-desk"])
    team_memberships_sync(user=carol, groups=["research-desk"])  # every sign-in: no duplicate
    assert carol.team_memberships.count() == 1
    team_memberships_sync(user=carol, groups=["other"])
    assert [m.team.name for m in carol.team_memberships.all()] == ["other"]
