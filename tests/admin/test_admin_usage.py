"""The admin's usage: sums per user, month, agent and model, filtered by user, team, agent and
month; its CSV has the same rows and totals (and equals the user's own Usage page); the
users' and teams' monthly limits."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.models import Team, TeamMembership, UsageLimit
from chats.usage.limits import Limits, limits_for_users, month_start
from tests.chats.usage.spending import spend

pytestmark = pytest.mark.django_db

URL = reverse("admin:chats_turn_usage")


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("analyst")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("intruder")


@pytest.fixture
def usage(user, other_user, django_user_model):
    """This month and last, two users, a team of one of them, two agents, priced and not."""
    team = Team.objects.create(name="research")
    TeamMembership.objects.create(team=team, user=user)
    last = month_start() - timedelta(days=3)
    spend(user, 1_000)
    spend(user, 2_000)
    spend(user, 400, agent="anthropic", model="claude-sonnet-4-6", cost="0.01234567")
    spend(user, 9_000, when=last)
    spend(other_user, 5_000, agent="anthropic", model="claude-sonnet-4-6", cost="1.5")
    spend(other_user, 300, model='=HYPERLINK("http://evil.example")')  # a model is the agent's
    return team


def shown(client, **query) -> str:
    response = client.get(URL, query)
    assert response.status_code == HTTPStatus.OK
    return response.content.decode()


def total_cells(text: str) -> list[str]:
    row = text[text.index('id="usage-total"') :]
    return re.findall(r"<td>(.*?)</td>", row[: row.index("</tr>")])


def downloaded(client, **query) -> list[list[str]]:
    response = client.get(URL, {**query, "format": "csv"})
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return list(csv.reader(io.StringIO(response.content.decode())))


def test_only_reviewers_see_it(client, user, reviewer, usage):
    client.force_login(user)
    assert client.get(URL).status_code == HTTPStatus.FOUND  # to the admin's login
    client.force_login(reviewer)
    assert client.get(URL).status_code == HTTPStatus.OK


def test_filters_by_user_team_agent_and_month(admin_client, user, usage):
    this = f"{month_start():%Y-%m}"
    everything = shown(admin_client)
    assert everything.count("<tr><td>") == 5  # ann: base and sonnet this month, base last; bob: 2
    by_user = shown(admin_client, user="analyst")
    assert "intruder" not in by_user.split('id="usage"')[1]
    assert total_cells(by_user)[4] == "12400"
    by_team = shown(admin_client, team=str(usage.pk))
    assert total_cells(by_team) == total_cells(by_user)  # the team is the analyst alone
    by_agent = shown(admin_client, agent="anthropic")
    assert total_cells(by_agent)[:5] == ["2", "4050", "0", "1350", "5400"]
    assert total_cells(by_agent)[5] == "1.51234567"
    by_month = shown(admin_client, user="analyst", month=this)
    assert total_cells(by_month)[:5] == ["3", "2550", "0", "850", "3400"]
    for nothing in ({"user": "no-such-user"}, {"team": "999"}, {"team": "x"}):
        assert "No usage matches these filters." in shown(admin_client, **nothing)
    assert "No usage matches these filters." not in shown(admin_client, month="not-a-month")


@pytest.mark.parametrize(
    "query",
    [{}, {"user": "analyst"}, {"agent": "bigdata"}, {"month": "this"}, {"team": "team"}],
)
def test_the_csv_totals_equal_the_pages(admin_client, usage, query):
    query = {
        key: {"this": f"{month_start():%Y-%m}", "team": str(usage.pk)}.get(value, value)
        for key, value in query.items()
    }
    rows = downloaded(admin_client, **query)
    header, body, total = rows[0], rows[1:-1], rows[-1]
    assert header == [
        "Month", "User", "Agent", "Model", "Answers", "Input tokens", "Cached tokens",
        "Output tokens", "Tokens", "Cost (USD)", "Answers of unknown price",
    ]  # fmt: skip
    assert total[0] == "Total"
    assert total[4:] == total_cells(shown(admin_client, **query))
    for column in range(4, 9):  # the total is the sum of the rows
        assert int(total[column]) == sum(int(row[column]) for row in body)
    priced = [Decimal(row[9]) for row in body if row[9] != "price unknown"]
    assert total[9] == ("price unknown" if not priced else f"{sum(priced).normalize():f}")


def test_the_csv_equals_the_users_own_usage_page(admin_client, client, user, usage):
    (total,) = [r for r in downloaded(admin_client, user="analyst", month=f"{month_start():%Y-%m}")
                if r[0] == "Total"]  # fmt: skip
    client.force_login(user)
    page = client.get(reverse("usage")).content.decode()
    this_month = page[page.index('id="this-month"') : page.index('id="last-month"')]
    assert f"<dd data-tokens>{int(total[8]):,}</dd>" in this_month
    assert f"<dd data-answers>{int(total[4]):,}</dd>" in this_month


def test_no_csv_cell_is_a_formula(admin_client, usage):
    cells = [cell for row in downloaded(admin_client) for cell in row]
    assert '\'=HYPERLINK("http://evil.example")' in cells
    assert not any(cell.lstrip().startswith(("=", "+", "-", "@")) for cell in cells)


def test_a_per_user_override_in_the_admin_lifts_the_limit_for_that_user_alone(
    admin_client, user, other_user, settings
):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_000
    add = reverse("admin:chats_usagelimit_add")
    response = admin_client.post(
        add, {"user": user.pk, "monthly_tokens": "", "monthly_cost": "", "note": "pilot"}
    )
    assert response.status_code == HTTPStatus.FOUND, response.content.decode()[-2000:]
    limits = limits_for_users(user_ids=[user.pk, other_user.pk])
    assert limits == {user.pk: Limits(None, None), other_user.pk: Limits(1_000, None)}
    changelist = admin_client.get(reverse("admin:chats_usagelimit_changelist")).content.decode()
    assert "pilot" in changelist


def test_an_override_is_of_a_user_or_a_team(admin_client, user):
    team = Team.objects.create(name="desk")
    add = reverse("admin:chats_usagelimit_add")
    both = admin_client.post(add, {"user": user.pk, "team": team.pk, "monthly_tokens": "5"})
    neither = admin_client.post(add, {"monthly_tokens": "5"})
    for response in (both, neither):
        assert response.status_code == HTTPStatus.OK  # the form again, saying why
        assert "A limit is of one user or of one team: choose one." in response.content.decode()
    assert not UsageLimit.objects.exists()
