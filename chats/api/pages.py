"""The "API tokens" page (linked from the header): the user's tokens and webhook endpoints.

A new token or endpoint secret is shown once, in the answer to the form that made it (never
stored in a way that could show it again). Every action is a POST with the CSRF token, on the
user's own tokens and endpoints (anyone else's is a 404).
"""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from chats.api.models import ApiToken
from chats.api.selectors import api_tokens_for_user
from chats.api.services import TokenError, api_token_create, api_token_revoke
from chats.webhooks.models import WebhookEndpoint
from chats.webhooks.selectors import webhook_endpoint_get_for_user, webhook_endpoints_for_user
from chats.webhooks.services import WebhookError, webhook_endpoint_create, webhook_endpoint_delete

EXPIRIES = [("", "Never"), ("7", "In 7 days"), ("30", "In 30 days"), ("90", "In 90 days"),
            ("365", "In a year")]  # fmt: skip


def _page(request: HttpRequest, status: int = HTTPStatus.OK, **shown) -> HttpResponse:
    context = {
        "tokens": api_tokens_for_user(user=request.user),
        "endpoints": webhook_endpoints_for_user(user=request.user),
        "scopes": ApiToken.Scope.choices,
        "events": WebhookEndpoint.Event.choices,
        "expiries": EXPIRIES,
        "now": timezone.now(),
        **shown,
    }
    return render(request, "chats/api_tokens.html", context, status=status)


@require_GET
@login_required
def api_tokens(request: HttpRequest) -> HttpResponse:
    return _page(request)


@require_POST
@login_required
def api_token_new(request: HttpRequest) -> HttpResponse:
    days = request.POST.get("expires_days", "")
    expires_at = None
    if days in dict(EXPIRIES) and days:
        expires_at = timezone.now() + timedelta(days=int(days))
    try:
        token, raw = api_token_create(
            owner=request.user,
            name=request.POST.get("name", ""),
            scopes=request.POST.getlist("scopes"),
            expires_at=expires_at,
        )
    except TokenError as error:
        return _page(request, HTTPStatus.BAD_REQUEST, token_error=str(error))
    return _page(request, HTTPStatus.CREATED, new_token=raw, new_token_name=token.name)


@require_POST
@login_required
def api_token_revoke_view(request: HttpRequest, token_id: int) -> HttpResponse:
    api_token_revoke(token=get_object_or_404(ApiToken, pk=token_id, owner=request.user))
    return redirect("api_tokens")


@require_POST
@login_required
def webhook_new(request: HttpRequest) -> HttpResponse:
    try:
        endpoint, secret = webhook_endpoint_create(
            owner=request.user,
            url=request.POST.get("url", ""),
            events=request.POST.getlist("events"),
        )
    except WebhookError as error:
        return _page(request, HTTPStatus.BAD_REQUEST, webhook_error=str(error))
    return _page(request, HTTPStatus.CREATED, new_secret=secret, new_secret_url=endpoint.url)


@require_POST
@login_required
def webhook_delete(request: HttpRequest, webhook_id: int) -> HttpResponse:
    endpoint = webhook_endpoint_get_for_user(user=request.user, endpoint_id=webhook_id)
    webhook_endpoint_delete(endpoint=endpoint)
    return redirect("api_tokens")
