"""Reads of API tokens."""

from __future__ import annotations

from django.db.models import F

from chats.api.models import ApiToken


def api_tokens_for_user(*, user) -> list[ApiToken]:
    """The user's tokens, newest first, revoked ones last."""
    tokens = ApiToken.objects.filter(owner=user)
    return list(tokens.order_by(F("revoked_at").asc(nulls_first=True), "-created_at", "-id"))


def api_token_is_usable(*, token_id: int) -> bool:
    """Whether the token may still be used (not revoked or expired, its account active): what a
    turn the token starts checks, as a page's ask checks its session."""
    return ApiToken.objects.usable().filter(pk=token_id).exists()
