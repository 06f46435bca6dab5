"""20 questions sent at once by one user start no more turns than the limit allows, plus those
already running: each in a transaction of its own, at the same moment (as from many pages and
workers), or together in one batch (as the page's asks are). On PostgreSQL too
(TEST_DATABASE_URL=postgres://…)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from chats.errors import ErrorCode, TurnStartError
from chats.models import Chat, Turn
from chats.services import TurnAsk, turn_start, turn_start_many
from tests.chats.usage.spending import running, spend

pytestmark = pytest.mark.django_db(transaction=True)

QUESTIONS = 20


@pytest.fixture
def one_answer_used(user, settings):
    """One answer of 1,000 tokens used; 3,500 allowed: two more questions of about 1,000 fit."""
    settings.AGENT_MAX_CONCURRENT_TURNS = 50  # the usage limit is the one that binds
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 3_500
    spend(user, 1_000)
    return [Chat.objects.create(owner=user) for _ in range(QUESTIONS)]


def ask_at_once(chats: list[Chat]) -> list[str]:
    """Each chat asks in a thread (a connection and transaction) of its own, all released
    together; returns each outcome: "started" or the refusal's code."""
    gate = threading.Barrier(len(chats))

    def ask(chat: Chat) -> str:
        try:
            gate.wait()
            turn_start(chat=chat, question="Q", research_effort="lite")
            return "started"
        except TurnStartError as refused:
            return refused.code
        finally:
            connection.close()

    with ThreadPoolExecutor(len(chats)) as pool:
        return list(pool.map(ask, chats))


def test_twenty_at_once_start_only_what_the_limit_allows(user, one_answer_used):
    outcomes = ask_at_once(one_answer_used)
    assert outcomes.count("started") == 2
    assert outcomes.count(ErrorCode.USAGE_LIMIT) == QUESTIONS - 2
    assert Turn.objects.streaming().filter(chat__owner=user).count() == 2


def test_answers_already_running_hold_their_share(user, one_answer_used):
    running(user)
    outcomes = ask_at_once(one_answer_used)
    assert outcomes.count("started") == 1
    assert Turn.objects.streaming().filter(chat__owner=user).count() == 2


def test_twenty_in_one_batch_start_only_what_the_limit_allows(user, one_answer_used):
    asks = [TurnAsk(chat, "Q", "lite") for chat in one_answer_used]
    outcomes = turn_start_many(asks)
    started = [o for o in outcomes if not isinstance(o, TurnStartError)]
    assert len(started) == 2
    assert {o.code for o in outcomes if isinstance(o, TurnStartError)} == {ErrorCode.USAGE_LIMIT}
