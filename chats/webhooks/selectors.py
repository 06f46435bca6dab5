"""Reads of webhooks: a user's endpoints, and their deliveries, newest first."""

from __future__ import annotations

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404

from chats.webhooks.models import WebhookDelivery, WebhookEndpoint

RECENT_DELIVERIES = 20  # per endpoint, on the API tokens page


def webhook_endpoints_for_user(*, user, recent: int = RECENT_DELIVERIES) -> list[WebhookEndpoint]:
    """The user's endpoints, each with its `recent` newest deliveries (`recent_deliveries`), in
    two queries."""
    newest = WebhookDelivery.objects.order_by("-created_at", "-id")[:recent]
    deliveries = Prefetch("deliveries", queryset=newest, to_attr="recent_deliveries")
    return list(WebhookEndpoint.objects.filter(owner=user).prefetch_related(deliveries))


def webhook_endpoints_of_user(*, user) -> list[WebhookEndpoint]:
    return list(WebhookEndpoint.objects.filter(owner=user))


def webhook_endpoint_get_for_user(*, user, endpoint_id: int) -> WebhookEndpoint:
    """The user's endpoint, or Http404: another user's endpoint does not exist for them."""
    return get_object_or_404(WebhookEndpoint, pk=endpoint_id, owner=user)


def webhook_deliveries(*, endpoint: WebhookEndpoint, limit: int = 100) -> list[WebhookDelivery]:
    return list(endpoint.deliveries.order_by("-created_at", "-id")[:limit])
