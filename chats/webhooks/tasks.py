"""Delivering webhooks on django-tasks (the queue the watches use, in the site's own database):
one attempt per task, signed by the Standard Webhooks scheme with the `standardwebhooks` library
(`webhook-id`, `webhook-timestamp`, `webhook-signature`), posted under the address rules of
`chats/outbound.py`. A failed attempt queues the next after the next of WEBHOOK_RETRY_SECONDS;
when they are spent the delivery is failed. Every attempt is recorded on the delivery.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils import timezone
from django_tasks import task
from standardwebhooks.webhooks import Webhook

from chats.outbound import Refused, fetchable_url, guarded_client
from chats.webhooks.models import WebhookDelivery

logger = logging.getLogger(__name__)

USER_AGENT = "ResearchSite-Webhooks/1.0"
ERROR_MAX_CHARS = 500


@task()
def webhook_deliver(delivery_id: int) -> str:
    """Make the delivery's next attempt, if it is still pending; say how it went."""
    delivery = (
        WebhookDelivery.objects.select_related("endpoint")
        .filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING)
        .first()
    )
    if delivery is None:
        return "not pending (delivered, failed or deleted)"
    status_code, error = async_to_sync(_post)(delivery)
    return _record_attempt(delivery, status_code, error)


def signed_headers(delivery: WebhookDelivery, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: its id, now, and the signature of both with
    the body."""
    signature = Webhook(delivery.endpoint.secret).sign(delivery.message_id, now, delivery.body)
    return {
        "webhook-id": delivery.message_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }


async def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """POST the delivery once; return the response's status (None: no response) and what went
    wrong ("" when it was taken: a 2xx)."""
    headers = {"User-Agent": USER_AGENT, "Content-Type": "application/json"}
    try:
        url = fetchable_url(delivery.endpoint.url)
        client = await guarded_client(
            allowed_hosts=settings.WEBHOOK_ALLOWED_HOSTS,
            timeout_seconds=settings.WEBHOOK_TIMEOUT_SECONDS,
            max_connections=1,
            headers=headers,
        )
        async with client:
            signed = signed_headers(delivery, datetime.now(UTC))
            body = delivery.body.encode()
            # The response's body is never read: its status says whether the event was taken.
            async with client.stream("POST", url, content=body, headers=signed) as response:
                status = response.status_code
    except Refused as refused:
        return None, str(refused)
    except Exception as error:  # httpx's errors, a timeout: the endpoint did not answer
        return None, f"{type(error).__name__}: {error}"[:ERROR_MAX_CHARS]
    if 200 <= status < 300:
        return status, ""
    if 300 <= status < 400:  # not followed: the endpoint's URL must be the one that answers
        return status, f"HTTP {status} (redirects are not followed)"
    return status, f"HTTP {status}"


def _record_attempt(delivery: WebhookDelivery, status_code: int | None, error: str) -> str:
    now = timezone.now()
    attempts = delivery.attempts + 1
    schedule = settings.WEBHOOK_RETRY_SECONDS
    fields = {
        "attempts": attempts,
        "last_attempt_at": now,
        "last_status_code": status_code,
        "last_error": error,
        "next_attempt_at": None,
    }
    if not error:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now)
    elif attempts <= len(schedule):
        fields["next_attempt_at"] = now + timedelta(seconds=schedule[attempts - 1])
    else:
        fields["status"] = WebhookDelivery.Status.FAILED
    if not WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields):
        return "deleted meanwhile"
    if error and fields["next_attempt_at"] is not None:
        webhook_deliver.using(run_after=fields["next_attempt_at"]).enqueue(delivery.pk)
        logger.info("Webhook %s: attempt %d failed (%s)", delivery.message_id, attempts, error)
        return f"attempt {attempts} failed: {error}"
    return f"{fields.get('status', delivery.status)} after {attempts} attempts"
