"""Finished turns' usage: one row per turn and model, priced as it finishes, stored in the
finish's own transaction with one INSERT for the batch, counted once in the metrics, and the
80% warning given once a month."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client import REGISTRY

from chats.agent.providers.bigdata import event_from_message
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn, TurnUsage, UsageWarning
from chats.run.finishes import Finish, finish_turn, store_finishes
from chats.run.rendering import turn_end
from chats.services import turn_start
from chats.usage.limits import month_start, resets_on
from demo_agent.scripted import answer_stream

pytestmark = pytest.mark.django_db(transaction=True)

SONNET = {"type": "claude-sonnet-4-6", "input_tokens": 1_000_000, "output_tokens": 100_000,
          "cached_tokens": 200_000}  # fmt: skip


def transcript(*consumption: dict) -> Transcript:
    messages = answer_stream("An answer.")
    messages[-1] = {**messages[-1], "consumption": list(consumption)}
    return Transcript.from_events(event_from_message(m) for m in messages)


def finished(chat: Chat, *consumption: dict) -> Turn:
    started = turn_start(chat=chat, question="Q", research_effort="standard")
    return finish_turn(
        turn_id=started.turn.pk, transcript=transcript(*consumption), status=Turn.Status.COMPLETE
    )


def tier(name: str, tokens_in: int, tokens_out: int) -> dict:
    return {"type": name, "input_tokens": tokens_in, "output_tokens": tokens_out}


def test_each_model_of_a_finished_turn_is_a_row_priced_as_it_finishes(user):
    chat = Chat.objects.create(owner=user, provider="anthropic")
    turn = finished(chat, SONNET, tier("claude-haiku-x", 10, 5), tier("claude-haiku-x", 1, 1))
    rows = {row.model: row for row in TurnUsage.objects.filter(turn=turn)}
    sonnet, haiku = rows["claude-sonnet-4-6"], rows["claude-haiku-x"]
    assert (sonnet.user, sonnet.chat_id, sonnet.agent) == (user, chat.pk, "anthropic")
    assert (sonnet.input_tokens, sonnet.cached_tokens, sonnet.output_tokens) == (
        1_000_000, 200_000, 100_000,
    )  # fmt: skip
    assert sonnet.tokens == 1_100_000 and sonnet.cost == Decimal("3.96")
    assert sonnet.created_at == turn.finished_at
    assert (haiku.input_tokens, haiku.output_tokens, haiku.cost) == (11, 6, None)  # unknown


def test_a_turn_that_reported_nothing_has_no_row(user, chat):
    finished(chat)
    finished(chat, tier("base", 0, 0))
    assert not TurnUsage.objects.exists()


def test_a_later_price_does_not_change_what_was_spent(user, settings):
    chat = Chat.objects.create(owner=user, provider="anthropic")
    finished(chat, SONNET)
    settings.MODEL_PRICES = '{"claude-sonnet-4-6": {"input": 30, "output": 150}}'
    finished(chat, SONNET)
    assert list(TurnUsage.objects.order_by("id").values_list("cost", flat=True)) == [
        Decimal("3.96"),
        Decimal("45.00"),  # cached tokens at the input price: none of their own
    ]


def test_deleting_a_chat_does_not_give_back_what_it_spent(user, chat):
    finished(chat, tier("base", 700, 300))
    chat.delete()
    assert TurnUsage.objects.get().tokens == 1000


def started_turns(django_user_model, count: int, prefix: str):
    users = [django_user_model.objects.create_user(f"{prefix}{i}") for i in range(count)]
    return [
        turn_start(chat=Chat.objects.create(owner=u), question="Q", research_effort="lite")
        for u in users
    ]


def test_a_batch_of_finishes_stores_its_usage_in_one_insert(django_user_model):
    """The finish path: usage adds the same queries to a batch of ten as to one."""
    one = started_turns(django_user_model, 1, "a")
    ten = started_turns(django_user_model, 10, "b")

    def finishes(turns):
        return [
            Finish(
                turn_end(s.turn.pk, transcript(tier("base", 90, 10)), Turn.Status.COMPLETE),
                s.siblings,
            )
            for s in turns
        ]

    with CaptureQueriesContext(connection) as alone:
        store_finishes(finishes(one))
    with CaptureQueriesContext(connection) as together:
        store_finishes(finishes(ten))
    # The turns' UPDATE, their chats', usage's INSERT and limits: as for one turn.
    assert len(together.captured_queries) == len(alone.captured_queries)
    inserts = [q for q in together.captured_queries if 'INSERT INTO "chats_turnusage"' in q["sql"]]
    assert len(inserts) == 1
    assert TurnUsage.objects.count() == 11


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_metrics_count_tokens_by_kind_and_priced_cost(user):
    chat = Chat.objects.create(owner=user, provider="anthropic")
    labels = {"agent": "anthropic", "model": "claude-sonnet-4-6"}
    before = {
        kind: sample("researchsite_tokens_total", **labels, kind=kind)
        for kind in ("input", "cached", "output")
    }
    cost_before = sample("researchsite_cost_total", agent="anthropic")
    finished(chat, SONNET)
    assert sample("researchsite_tokens_total", **labels, kind="input") - before["input"] == 800_000
    assert sample("researchsite_tokens_total", **labels, kind="cached") - before["cached"] == (
        200_000
    )
    assert sample("researchsite_tokens_total", **labels, kind="output") - before["output"] == (
        100_000
    )
    assert sample("researchsite_cost_total", agent="anthropic") - cost_before == pytest.approx(3.96)
    unknown = sample("researchsite_cost_total", agent="bigdata")
    finished(Chat.objects.create(owner=user), tier("base", 5, 5))
    assert sample("researchsite_cost_total", agent="bigdata") == unknown  # no cost made up


def test_the_warning_comes_once_a_month_past_80_percent(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 10_000
    chat = Chat.objects.create(owner=user)
    first = finished(chat, tier("base", 3_000, 1_000))  # 40%
    assert first.usage_warning == "" and not UsageWarning.objects.exists()
    second = finished(chat, tier("base", 3_500, 1_000))  # 85%
    assert second.usage_warning == (
        "You have used 8,500 of your 10,000 tokens this month (85%);"
        f" the limit resets on {resets_on()}."
    )
    warning = UsageWarning.objects.get()
    assert (warning.turn, warning.month) == (second, month_start().date())
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 16_000  # room for one more answer
    third = finished(chat, tier("base", 4_000, 1_000))  # 84% of the new limit: told already
    assert third.usage_warning == ""
    assert UsageWarning.objects.count() == 1


def test_the_warning_is_shown_under_its_turn_live_and_after_a_reload(user, settings, client):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000
    chat = Chat.objects.create(owner=user)
    started = turn_start(chat=chat, question="Q", research_effort="lite")
    (stored,) = store_finishes(
        [Finish(turn_end(started.turn.pk, transcript(tier("base", 900, 50)), "complete"))]
    )
    card = stored.card
    assert "You have used 950 of your 1,000 tokens this month (95%)" in card["html"]
    client.force_login(user)
    page = client.get(f"/chats/{chat.pk}/").content.decode()
    assert page.count("usage-warning") == 1
    assert "You have used 950 of your 1,000 tokens this month (95%)" in page


def test_a_cost_limit_warns_in_dollars(user, settings):
    settings.USAGE_MONTHLY_LIMIT_COST = Decimal("4")
    turn = finished(Chat.objects.create(owner=user, provider="anthropic"), SONNET)
    assert turn.usage_warning.startswith("You have spent $3.96 of your $4.00 this month (99%);")


def test_turns_finished_before_keep_their_usage():
    """The migration reads the consumption of turns finished before usage was recorded."""
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user("old")
    chat = Chat.objects.create(owner=owner, provider="anthropic")
    old = Turn.objects.create(chat=chat, question="q", status="complete", consumption=[SONNET])
    Turn.objects.create(chat=chat, question="q", consumption=[SONNET])  # still streaming
    migration = importlib.import_module("chats.migrations.0017_usage")
    migration.usage_of_finished_turns(apps, None)
    row = TurnUsage.objects.get()
    assert (row.turn_id, row.user, row.tokens, row.cost) == (
        old.pk, owner, 1_100_000, Decimal("3.96"),
    )  # fmt: skip
