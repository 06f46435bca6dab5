"""How many webhook endpoints an analyst may add holds when their requests arrive at once: each
in a thread (a connection and transaction) of its own, released together. On PostgreSQL too
(TEST_DATABASE_URL=postgres://…), where only the owner's row lock serialises them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from chats.webhooks.models import WebhookEndpoint
from chats.webhooks.services import WebhookError, webhook_endpoint_create

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTS = 10


def test_ten_endpoints_added_at_once_make_no_more_than_the_limit(user, settings):
    settings.WEBHOOK_MAX_PER_USER = 1
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1:9"]
    gate = threading.Barrier(REQUESTS)

    def add(number: int) -> str:
        try:
            gate.wait()
            webhook_endpoint_create(
                owner=user, url=f"http://127.0.0.1:9/hooks/{number}", events=["turn.finished"]
            )
            return "added"
        except WebhookError as refused:
            return str(refused)
        finally:
            connection.close()

    with ThreadPoolExecutor(REQUESTS) as pool:
        outcomes = list(pool.map(add, range(REQUESTS)))

    assert WebhookEndpoint.objects.filter(owner=user).count() == 1
    assert sorted(outcomes) == ["You have 1 webhook endpoint already; delete one first."] * (
        REQUESTS - 1
    ) + ["added"]
