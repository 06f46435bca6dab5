"""How many watches an analyst may set holds when their "Watch" requests arrive at once: each
request in a thread (a connection and transaction) of its own, released together. On
PostgreSQL too (TEST_DATABASE_URL=postgres://…)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from django.test import Client as HttpClient
from django.urls import reverse

from chats.models import Chat, Watch
from tests.chats.watch.answers import answered_turn

pytestmark = pytest.mark.django_db(transaction=True)

REQUESTS = 10


def test_ten_watch_requests_at_once_set_no_more_watches_than_the_limit(user, settings):
    settings.WATCH_MAX_PER_USER = 3
    turns = [answered_turn(Chat.objects.create(owner=user)) for _ in range(REQUESTS)]
    browsers = []
    for _ in turns:
        browser = HttpClient()
        browser.force_login(user)
        browsers.append(browser)
    gate = threading.Barrier(REQUESTS)

    def watch(browser: HttpClient, turn) -> int:
        url = reverse("watch_new", args=[turn.chat_id, turn.pk])
        try:
            gate.wait()
            return browser.post(url, {"every": "day", "time_of_day": "09:00"}).status_code
        finally:
            connection.close()

    with ThreadPoolExecutor(REQUESTS) as pool:
        statuses = list(pool.map(watch, browsers, turns))

    assert Watch.objects.filter(owner=user).count() == 3
    assert sorted(statuses) == [302] * 3 + [400] * (REQUESTS - 3)
