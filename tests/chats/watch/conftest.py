"""Fixtures of the watch tests: a watched answer, and its analyst's browser."""

from __future__ import annotations

from datetime import time

import pytest
from django.test import Client as HttpClient

from chats.watch.tasks import watch_create
from tests.chats.watch.answers import answered_turn


@pytest.fixture
def watched(user, chat):
    turn = answered_turn(chat)
    return watch_create(owner=user, turn=turn, every="day", time_of_day=time(9, 0))


@pytest.fixture
def browser(user):
    client = HttpClient()
    client.force_login(user)
    return client
