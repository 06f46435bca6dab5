"""Who is asking: the request's bearer token, its scopes, and its rate.

A token is read from the `Authorization: Bearer <token>` header only: never from a cookie (so a
page of another site cannot make a signed-in browser call the API: no CSRF exposure) and never
from the URL, where proxies and browsers would log it. A URL that carries one is refused.

Each token's requests share one token bucket per process, the page's own frames-per-second
limit (WS_MAX_FRAMES_PER_SECOND, `chats.live.limits.FrameRate`): a script is limited as its
owner's open page is. A bucket is kept in the memory of the process the request reached, as a
page's socket's is, so behind several workers a token can be served up to that many times the
rate (a page's sockets are too: one bucket each).
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError, AuthorizationError, HttpError
from ninja.security.base import AuthBase
from ninja.throttling import BaseThrottle

from chats.api.models import ApiToken
from chats.api.services import PREFIX, api_token_authenticate
from chats.live.limits import FrameRate
from chats.loop.database_thread import on_database_thread

NOT_SENT = "Send an API token as the header 'Authorization: Bearer <token>'."
NOT_VALID = "This API token is not valid: it is unknown, revoked or expired."


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header's value, else None."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def refuse_token_in_url(query_string: str) -> None:
    """A token in the URL has been sent where it gets logged: refuse it, to be revoked."""
    if PREFIX in query_string:
        raise HttpError(
            400,
            "API tokens go in the Authorization header, never in the URL; revoke this one.",
        )


async def token_with_scope(authorization: str | None, query_string: str, scope: str) -> ApiToken:
    """The usable token of an `Authorization` header's value, holding `scope`; else
    AuthenticationError (401), AuthorizationError (403), or HttpError 400 for a token in the URL.
    The owner is `token.owner`."""
    refuse_token_in_url(query_string)
    raw = bearer_token(authorization)
    if raw is None:
        raise AuthenticationError(message=NOT_SENT)
    token = await on_database_thread(api_token_authenticate, raw=raw)
    if token is None:
        raise AuthenticationError(message=NOT_VALID)
    if not token.has_scope(scope):
        raise AuthorizationError(message=f"This API token lacks the '{scope}' scope.")
    return token


class BearerToken(AuthBase):
    """django-ninja's authentication of an endpoint: a token with `scope` (OpenAPI: bearer)."""

    openapi_type = "http"
    openapi_scheme = "bearer"

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__()
        self.is_async = True

    async def __call__(self, request: HttpRequest) -> ApiToken:
        query_string = request.META.get("QUERY_STRING", "")
        return await token_with_scope(
            request.headers.get("Authorization"), query_string, self.scope
        )


READ = BearerToken(ApiToken.Scope.READ)
ASK = BearerToken(ApiToken.Scope.ASK)


class TokenRates:
    """This process's token buckets, one per token."""

    def __init__(self) -> None:
        self.buckets: dict[int, FrameRate] = {}

    def allow(self, token: ApiToken) -> bool:
        bucket = self.buckets.get(token.pk)
        if bucket is None:
            bucket = self.buckets[token.pk] = FrameRate(settings.WS_MAX_FRAMES_PER_SECOND)
        return bucket.allow()


token_rates = TokenRates()


class TokenRate(BaseThrottle):
    """django-ninja's throttle of every endpoint: the token's bucket (429 with Retry-After)."""

    def allow_request(self, request: HttpRequest) -> bool:
        token = getattr(request, "auth", None)
        return not isinstance(token, ApiToken) or token_rates.allow(token)

    def wait(self) -> float:
        return 1 / settings.WS_MAX_FRAMES_PER_SECOND  # a token comes back this soon
