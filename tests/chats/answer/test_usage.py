"""Token usage: the quiet line under an answer and the admin's sums per user and month."""

from __future__ import annotations

from datetime import UTC, datetime
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.answer.usage import usage_by_user_month, usage_line
from chats.models import Chat, Turn


def tier(name, tokens_in, tokens_out):
    return {"type": name, "input_tokens": tokens_in, "output_tokens": tokens_out}


def test_the_line_names_each_tier_that_used_tokens():
    line = usage_line([tier("base", 1234, 567), tier("pro", 0, 0), tier("pro2", 10, 2)])
    assert line == "Tokens: base 1,234 in / 567 out · pro2 10 in / 2 out"


@pytest.mark.parametrize("value", [None, [], [tier("base", 0, 0)], "x", [{"type": "base"}]])
def test_no_usage_is_no_line(value):
    assert usage_line(value) == ""


def test_odd_counts_are_ignored():
    assert usage_line([tier("base", "12", True), tier("pro", -3, 4)]) == "Tokens: pro 0 in / 4 out"


@pytest.mark.django_db
def test_usage_is_summed_per_user_month_and_tier(django_user_model, django_assert_num_queries):
    ann = django_user_model.objects.create_user("ann")
    bob = django_user_model.objects.create_user("bob")

    def answer(user, when, *tiers):
        chat = Chat.objects.create(owner=user)
        Turn.objects.create(chat=chat, question="q", created_at=when, consumption=list(tiers))

    october, november = (datetime(2026, m, 5, tzinfo=UTC) for m in (10, 11))
    answer(ann, october, tier("base", 100, 10))
    answer(ann, october, tier("base", 50, 5), tier("pro", 7, 1))
    answer(ann, november, tier("base", 1, 1))
    answer(bob, november, tier("base", 2, 2))
    answer(bob, november)  # no consumption reported
    with django_assert_num_queries(1):
        rows = usage_by_user_month()
    summary = [
        (
            r["user"],
            r["month"].month,
            r["tier"],
            r["input_tokens"],
            r["output_tokens"],
            r["answers"],
        )
        for r in rows
    ]
    assert summary == [
        ("ann", 11, "base", 1, 1, 1),
        ("bob", 11, "base", 2, 2, 1),
        ("ann", 10, "base", 150, 15, 2),
        ("ann", 10, "pro", 7, 1, 1),
    ]


@pytest.mark.django_db
def test_the_admin_lists_usage_for_reviewers_only(client, reviewer, user):
    chat = Chat.objects.create(owner=user)
    Turn.objects.create(chat=chat, question="q", consumption=[tier("base", 4321, 8)])
    url = reverse("admin:chats_turn_usage")
    client.force_login(user)
    assert client.get(url).status_code == HTTPStatus.FOUND  # not staff: to the admin login
    client.force_login(reviewer)
    response = client.get(url)
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    assert "<td>analyst</td>" in html and "<td>4321</td>" in html and "<td>base</td>" in html
    assert url in client.get(reverse("admin:chats_turn_changelist")).content.decode()
