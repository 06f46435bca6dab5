"""Writes of API tokens: create one (shown once), revoke, and authenticate a request's token.

A token is `rsk_` and 32 random bytes (`secrets.token_urlsafe`: 256 bits, 43 characters). Only
its SHA-256 is stored. A fast hash is enough: a slow one (PBKDF2, Argon2) makes guessing a
low-entropy secret such as a password expensive, but 2**256 tokens cannot be enumerated at any
speed, so a copy of the table gives no token back. And a fast hash lets each request find its
token by one indexed lookup of the digest rather than a slow check against every row.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from chats.api.models import ApiToken

PREFIX = "rsk_"  # also a shape chats/agent/redaction.py masks wherever text is logged or shown
TOKEN_BYTES = 32
MAX_TOKEN_CHARS = 200  # past this a header is not one of our tokens: no hashing, no query
LAST_USED_EVERY = timedelta(minutes=1)
NAME_MAX_CHARS = 100
SCOPES = tuple(ApiToken.Scope.values)


class TokenError(ValueError):
    """A token that cannot be made as asked; the message says why, in the user's words."""


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def api_token_create(
    *, owner, name: str, scopes: Iterable[str], expires_at: datetime | None = None
) -> tuple[ApiToken, str]:
    """Create a token; return it and its value, which is never stored nor shown again."""
    name = " ".join(name.split())
    if not name or len(name) > NAME_MAX_CHARS:
        raise TokenError(f"A token needs a name of 1 to {NAME_MAX_CHARS} characters.")
    scopes = sorted(set(scopes), key=SCOPES.index) if set(scopes) <= set(SCOPES) else None
    if not scopes:
        raise TokenError("Choose the token's scopes: read, ask or both.")
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenError("The expiry must be in the future.")
    raw = PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                owner=owner,
                name=name,
                digest=token_digest(raw),
                hint=raw[: len(PREFIX) + 4],
                scopes=scopes,
                expires_at=expires_at,
            )
    except IntegrityError as error:
        raise TokenError(f"You have a token named {name!r} already; revoke it first.") from error
    return token, raw


def api_token_revoke(*, token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_token_revoke_named(*, owner, name: str) -> int:
    """Revoke the owner's unrevoked token of that name; return how many were (0 or 1)."""
    tokens = ApiToken.objects.filter(owner=owner, name=" ".join(name.split()))
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def api_token_authenticate(*, raw: str) -> ApiToken | None:
    """The usable token with this value (its owner loaded), or None; notes its use at most
    once a minute."""
    if not raw.startswith(PREFIX) or len(raw) > MAX_TOKEN_CHARS:
        return None
    now = timezone.now()
    token = (
        ApiToken.objects.usable(now)
        .select_related("owner")
        .filter(digest=token_digest(raw))
        .first()
    )
    if token is None:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
        token.last_used_at = now
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token
