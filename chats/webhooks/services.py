"""Writes of webhooks: endpoints, a turn's ask for `turn.finished`, and each event's deliveries.

An event is recorded as one delivery per subscribed endpoint, in the transaction of what it
tells (a turn's finish, a watch run's record), and each delivery's first attempt is queued once
that transaction commits (`tasks.webhook_deliver`): an event is sent only if it happened, and
never lost between the two.
"""

from __future__ import annotations

import base64
import json
import secrets
import uuid
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from chats.locks import lock_users
from chats.models import Turn
from chats.outbound import Refused, checked_url
from chats.webhooks.models import TurnWebhook, WebhookDelivery, WebhookEndpoint
from chats.webhooks.tasks import webhook_deliver

EVENTS = tuple(WebhookEndpoint.Event.values)
SECRET_BYTES = 32  # Standard Webhooks: 24 to 64 bytes


class WebhookError(ValueError):
    """An endpoint that cannot be added as asked; the message says why, in the user's words."""


def webhook_endpoint_create(
    *, owner, url: str, events: Iterable[str]
) -> tuple[WebhookEndpoint, str]:
    """Add an endpoint; return it and its signing secret (shown to the user once).

    The URL must pass the address rules (`chats.outbound`): http(s), and no private, loopback or
    otherwise non-public address unless its host is in WEBHOOK_ALLOWED_HOSTS.
    """
    events = sorted(set(events), key=EVENTS.index) if set(events) <= set(EVENTS) else None
    if not events:
        raise WebhookError(f"Choose the endpoint's events: {', '.join(EVENTS)}.")
    if len(url) > WebhookEndpoint._meta.get_field("url").max_length:
        raise WebhookError("That URL is too long.")
    try:
        url = async_to_sync(checked_url)(url.strip(), allowed_hosts=settings.WEBHOOK_ALLOWED_HOSTS)
    except Refused as refused:
        raise WebhookError(f"That URL cannot receive webhooks: {refused}.") from refused
    limit = settings.WEBHOOK_MAX_PER_USER
    with transaction.atomic():
        lock_users([owner.pk])  # two new endpoints at once cannot both see room for one more
        if WebhookEndpoint.objects.filter(owner=owner).count() >= limit:
            endpoints = "endpoint" if limit == 1 else "endpoints"
            raise WebhookError(f"You have {limit} webhook {endpoints} already; delete one first.")
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
        endpoint = WebhookEndpoint.objects.create(
            owner=owner, url=url, events=events, secret=secret
        )
    return endpoint, secret


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint) -> None:
    endpoint.delete()  # its queued attempts find no delivery and do nothing


@transaction.atomic
def turn_webhook_request(*, turn: Turn) -> None:
    """Send `turn.finished` to the owner's endpoints when this turn ends (already, if it has).

    The turn's row is locked as a finish locks it, so either the finish sees the request or the
    request sees the finished turn: the event is recorded once either way.
    """
    locked = Turn.objects.select_for_update().select_related("chat").get(pk=turn.pk)
    _, created = TurnWebhook.objects.get_or_create(turn=locked)
    if created and locked.is_finished:
        _record(locked.chat.owner_id, "turn.finished", _turn_finished(locked))


def webhooks_turns_finished(*, turns: list[Turn]) -> None:
    """Record `turn.finished` for the turns among these that asked for it (inside the
    transaction that stores their finish; one query when none did)."""
    asked = set(
        TurnWebhook.objects.filter(turn_id__in=[t.pk for t in turns]).values_list(
            "turn_id", flat=True
        )
    )
    for turn in turns:
        if turn.pk in asked:
            _record(turn.chat.owner_id, "turn.finished", _turn_finished(turn))


def webhooks_watch_changed(
    *,
    owner_id: int,
    watch_id: int,
    chat_id: int,
    question: str,
    turn_id: int,
    previous_turn_id: int,
    comparison: dict[str, Any],
) -> None:
    """Record `watch.changed` for a watch run whose figures or sources moved: the change's
    summary, the figures that moved and the sources added and dropped (`comparison`, as the run
    stores it), and links to Compare, the turn and its chat."""
    compare = reverse("turn_compare", args=[chat_id, turn_id])
    data = {
        "watch_id": watch_id,
        "chat_id": chat_id,
        "turn_id": turn_id,
        "previous_turn_id": previous_turn_id,
        "question": question,
        **comparison,  # summary, figures_changed/added/gone, sources_added/dropped
        "links": {
            "compare": _site_url(f"{compare}?a={previous_turn_id}&b={turn_id}"),
            "turn": _site_url(f"/api/v1/turns/{turn_id}"),
            "chat": _site_url(reverse("chat_detail", args=[chat_id]) + f"#turn-{turn_id}"),
        },
    }
    with transaction.atomic():
        _record(owner_id, "watch.changed", data)


def _turn_finished(turn: Turn) -> dict[str, Any]:
    return {
        "turn_id": turn.pk,
        "chat_id": turn.chat_id,
        "status": turn.status,
        "question": turn.question,
        "error": turn.error,
        "finished_at": turn.finished_at.isoformat() if turn.finished_at else None,
        "links": {
            "turn": _site_url(f"/api/v1/turns/{turn.pk}"),
            "chat": _site_url(reverse("chat_detail", args=[turn.chat_id]) + f"#turn-{turn.pk}"),
        },
    }


def _site_url(path: str) -> str:
    return f"{settings.SITE_URL.rstrip('/')}{path}"


def _record(owner_id: int, event: str, data: dict[str, Any]) -> None:
    """One delivery per endpoint of the owner that takes `event`; each attempted once the
    caller's transaction commits."""
    endpoints = [e for e in WebhookEndpoint.objects.filter(owner_id=owner_id) if event in e.events]
    if not endpoints:
        return
    now = timezone.now()
    body = json.dumps(
        {"type": event, "timestamp": now.isoformat(), "data": data},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    deliveries = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(
                endpoint=endpoint,
                event=event,
                message_id=f"msg_{uuid.uuid4().hex}",
                body=body,
                created_at=now,
                next_attempt_at=now,
            )
            for endpoint in endpoints
        ]
    )
    for delivery in deliveries:
        transaction.on_commit(lambda pk=delivery.pk: webhook_deliver.enqueue(pk), robust=True)
