"""Pages of teams: the "Team" page (members, shared chats), sharing a chat with a team, and
"Continue in my chats". Every action is a POST (CSRF-checked); a team the user is not in, or a
chat they may not read, is a 404."""

from __future__ import annotations

from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chats.selectors import chat_get_for_user
from chats.teams.models import Team, TeamMembership
from chats.teams.selectors import team_get_for_member, teams_for_user, turn_readable
from chats.teams.services import (
    TeamError,
    chat_continue,
    team_chat_share,
    team_chat_unshare,
    team_create,
    team_member_add,
    team_member_remove,
)


@require_GET
@login_required
def team_page(request: HttpRequest) -> HttpResponse:
    return _team_page(request)


@require_POST
@login_required
def team_new(request: HttpRequest) -> HttpResponse:
    try:
        team_create(name=request.POST.get("name", ""), owner=request.user)
    except TeamError as refused:
        return _team_page(request, error=str(refused))
    return redirect("team_page")


@require_POST
@login_required
def team_member_add_view(request: HttpRequest, team_id: int) -> HttpResponse:
    team = team_get_for_member(user=request.user, team_id=team_id)
    try:
        team_member_add(
            team=team,
            by=request.user,
            username=request.POST.get("username", ""),
            role=request.POST.get("role", TeamMembership.Role.MEMBER),
        )
    except TeamError as refused:
        return _team_page(request, error=str(refused))
    return redirect("team_page")


@require_POST
@login_required
def team_member_remove_view(request: HttpRequest, team_id: int, user_id: int) -> HttpResponse:
    """An owner removes a member, or a member leaves (their own id)."""
    team = team_get_for_member(user=request.user, team_id=team_id)
    try:
        team_member_remove(team=team, by=request.user, user_id=user_id)
    except TeamError as refused:
        return _team_page(request, error=str(refused))
    return redirect("team_page")


@require_POST
@login_required
def chat_team_share_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    """ "Share with team": the chat's owner shares it with one of their teams."""
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    team = get_object_or_404(Team, pk=_id(request.POST.get("team_id")))
    try:
        team_chat_share(chat=chat, team=team, user=request.user)
    except TeamError as refused:
        return HttpResponse(str(refused), status=HTTPStatus.FORBIDDEN, content_type="text/plain")
    return redirect(reverse("chat_detail", args=[chat.pk]) + "#team-sharing")


@require_POST
@login_required
def chat_team_unshare_view(request: HttpRequest, chat_id: int) -> HttpResponse:
    """The chat's owner stops sharing it with a team; its members' open pages close."""
    chat = chat_get_for_user(user=request.user, chat_id=chat_id)
    team = get_object_or_404(Team, pk=_id(request.POST.get("team_id")))
    team_chat_unshare(chat=chat, team=team)
    return redirect(reverse("chat_detail", args=[chat.pk]) + "#team-sharing")


@require_POST
@login_required
def chat_continue_view(request: HttpRequest, chat_id: int, turn_id: int) -> HttpResponse:
    """ "Continue in my chats": a chat of the user's own from this answer; the page goes there."""
    turn = turn_readable(user=request.user, chat_id=chat_id, turn_id=turn_id)
    try:
        chat = chat_continue(user=request.user, turn=turn)
    except TeamError as refused:
        return JsonResponse({"error": str(refused)}, status=HTTPStatus.BAD_REQUEST)
    url = reverse("chat_detail", args=[chat.pk])
    if request.headers.get("Accept") == "application/json":
        return JsonResponse({"url": url})
    return redirect(url)


def _team_page(request: HttpRequest, *, error: str = "") -> HttpResponse:
    context = {
        "teams": teams_for_user(user=request.user),
        "error": error,
        "roles": TeamMembership.Role.choices,
    }
    status = HTTPStatus.BAD_REQUEST if error else HTTPStatus.OK
    return render(request, "chats/team.html", context, status=status)


def _id(value: str | None) -> int:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 19 else 0
