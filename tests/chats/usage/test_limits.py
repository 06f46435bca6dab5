"""Whose limits apply (a user's own, their teams', the site's), and the predictive check:
this month's usage, plus the running answers' estimates, plus this question's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from chats.errors import ErrorCode, TurnStartError
from chats.models import Team, TeamMembership, UsageLimit
from chats.usage.limits import (
    Limits,
    limits_for_users,
    month_start,
    next_month_start,
    resets_on,
    usage_budgets,
)
from tests.chats.usage.spending import running, spend

pytestmark = pytest.mark.django_db


def limits_of(user) -> Limits:
    return limits_for_users(user_ids=[user.pk])[user.pk]


def test_the_sites_limits_apply_by_default(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000_000
    settings.USAGE_MONTHLY_LIMIT_COST = Decimal("25")
    assert limits_of(user) == Limits(1_000_000, Decimal("25"))
    settings.USAGE_MONTHLY_LIMIT_TOKENS = settings.USAGE_MONTHLY_LIMIT_COST = None
    assert not limits_of(user)


def test_a_users_own_override_wins_and_an_empty_field_is_no_limit(user, other_user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000
    team = Team.objects.create(name="research")
    TeamMembership.objects.create(team=team, user=user)
    UsageLimit.objects.create(team=team, monthly_tokens=5_000)
    UsageLimit.objects.create(user=user, monthly_tokens=None, monthly_cost=Decimal("3"))
    assert limits_of(user) == Limits(None, Decimal("3"))
    assert limits_of(other_user) == Limits(1_000, None)  # the site's


def test_the_most_generous_of_a_users_teams_applies(user, django_user_model):
    small, big, open_ = (Team.objects.create(name=n) for n in ("small", "big", "open"))
    for team in (small, big):
        TeamMembership.objects.create(team=team, user=user)
    UsageLimit.objects.create(team=small, monthly_tokens=1_000, monthly_cost=Decimal("9"))
    UsageLimit.objects.create(team=big, monthly_tokens=50_000, monthly_cost=Decimal("2"))
    assert limits_of(user) == Limits(50_000, Decimal("9"))
    TeamMembership.objects.create(team=open_, user=user)
    UsageLimit.objects.create(team=open_, monthly_tokens=None, monthly_cost=Decimal("1"))
    assert limits_of(user) == Limits(None, Decimal("9"))  # no token limit beats any
    outsider = django_user_model.objects.create_user("outsider")
    assert not limits_of(outsider)


def test_a_month_is_a_calendar_month_in_the_sites_time_zone(settings):
    settings.TIME_ZONE = "America/New_York"
    with timezone.override("America/New_York"):
        # 03:00 UTC on 1 December is still 30 November in New York.
        moment = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
        assert month_start(moment).isoformat() == "2026-11-01T00:00:00-04:00"
        assert resets_on(moment) == "1 December"
    assert next_month_start(datetime(2026, 12, 15, tzinfo=UTC)).date().isoformat() == "2027-01-01"


def admit(user, agent="bigdata"):
    usage_budgets(owner_ids=[user.pk]).admit(owner_id=user.pk, agent=agent)


def refusal(user, agent="bigdata") -> str:
    with pytest.raises(TurnStartError) as refused:
        admit(user, agent)
    assert refused.value.code == ErrorCode.USAGE_LIMIT
    return str(refused.value)


def test_a_used_up_limit_says_how_much_and_when_it_resets(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000_000
    spend(user, 1_020_000)
    assert refusal(user) == (
        "You have used 1,020,000 of your 1,000,000 tokens this month;"
        f" the limit resets on {resets_on()}."
    )


def test_a_question_expected_to_pass_the_limit_is_refused_before_it_is(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000_000
    spend(user, 300_000)
    spend(user, 300_000)  # an answer uses about 300,000
    admit(user)  # 600,000 + 300,000 fits
    spend(user, 300_000)
    assert refusal(user) == (
        "You have used 900,000 of your 1,000,000 tokens this month and a question uses about"
        f" 300,000, so this one would pass the limit; the limit resets on {resets_on()}."
    )


def test_running_answers_count_what_they_are_expected_to_use(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000_000
    spend(user, 200_000)
    running(user)
    running(user)
    # 200,000 used, two answers of about 200,000 running: a third would make 800,000; a fourth
    # 1,000,000 (allowed: the limit is not passed); a fifth is refused.
    budgets = usage_budgets(owner_ids=[user.pk])
    budgets.admit(owner_id=user.pk, agent="bigdata")
    budgets.admit(owner_id=user.pk, agent="bigdata")
    with pytest.raises(TurnStartError) as refused:
        budgets.admit(owner_id=user.pk, agent="bigdata")
    assert str(refused.value) == (
        "You have used 200,000 of your 1,000,000 tokens this month, 4 answers being written"
        " will use about 800,000 tokens more and a question uses about 200,000, so this one"
        f" would pass the limit; the limit resets on {resets_on()}."
    )


def test_the_estimate_is_the_agents_average_else_any_agents(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 100_000
    spend(user, 10_000, agent="gemini", model="gemini-2.5-flash")
    spend(user, 30_000, agent="gemini", model="gemini-2.5-flash")
    spend(user, 40_000, agent="anthropic", model="claude-sonnet-4-6")
    admit(user, "gemini")  # 80,000 + about 20,000: exactly the limit, not past it
    assert "a question uses about 40,000," in refusal(user, "anthropic")
    assert "a question uses about 26,667," in refusal(user, "llm-sdk")  # 80,000 over 3 answers


def test_last_months_usage_and_lapsed_turns_do_not_count(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 100_000
    spend(user, 5_000_000, when=month_start() - timedelta(seconds=1))
    lapsed = running(user)
    lapsed.lease_expires_at = timezone.now() - timedelta(seconds=1)
    lapsed.save()
    admit(user)


def test_no_history_allows_a_question_under_the_limit(user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 100_000
    admit(user)
    running(user)
    running(user)
    admit(user)  # nothing known of what an answer uses: nothing reserved


def test_a_cost_limit_counts_priced_usage(user, settings):
    settings.USAGE_MONTHLY_LIMIT_COST = Decimal("10")
    spend(user, 1_000, cost="4.00")
    spend(user, 1_000, cost="4.00")
    spend(user, 900_000)  # price unknown: counts no cost
    assert refusal(user) == (
        "You have spent $8.00 of your $10.00 this month and a question costs about $4.00, so"
        f" this one would pass the limit; the limit resets on {resets_on()}."
    )
    spend(user, 1_000, cost="2.50")
    assert refusal(user) == (
        f"You have spent $10.50 of your $10.00 this month; the limit resets on {resets_on()}."
    )


def test_other_users_usage_is_theirs(user, other_user, settings):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 100_000
    spend(other_user, 500_000)
    admit(user)


def test_the_check_costs_one_query_without_limits_and_three_with(
    user, other_user, settings, django_assert_num_queries
):
    spend(user, 1_000)
    running(user)
    with django_assert_num_queries(1):  # whose limits apply: nobody has one
        usage_budgets(owner_ids=[user.pk, other_user.pk])
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 100_000
    with django_assert_num_queries(3):  # and this month's usage, and the running turns' agents
        budgets = usage_budgets(owner_ids=[user.pk, other_user.pk])
    with django_assert_num_queries(0):
        budgets.admit(owner_id=user.pk, agent="bigdata")
        budgets.admit(owner_id=other_user.pk, agent="bigdata")
