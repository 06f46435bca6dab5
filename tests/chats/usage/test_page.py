"""The Usage page: this month and last, by agent and model, by day (a chart drawn as answers'
charts are), the most expensive chats, what watches spent; a team owner's view of the team."""

from __future__ import annotations

import html
import json
from datetime import time, timedelta
from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.models import Chat, Team, TeamMembership, WatchRun
from chats.usage.limits import month_start
from chats.watch.tasks import watch_create
from tests.chats.usage.spending import spend

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(client, user):
    client.force_login(user)
    return client


def page(browser, **query) -> str:
    response = browser.get(reverse("usage"), query)
    assert response.status_code == HTTPStatus.OK
    return response.content.decode()


def table(text: str, table_id: str) -> str:
    start = text.index(f'id="{table_id}"')
    return text[start : text.index("</table>", start)]


def test_the_page_needs_a_login_and_the_header_links_it(browser):
    assert f'<a href="{reverse("usage")}">Usage</a>' in page(browser)
    browser.logout()
    assert browser.get(reverse("usage")).status_code == HTTPStatus.FOUND


def test_this_month_by_agent_and_model_with_costs_or_price_unknown(browser, user, other_user):
    spend(user, 1_000, model="base")
    spend(user, 3_000, model="base")
    spend(user, 2_000, agent="anthropic", model="claude-sonnet-4-6", cost="0.0123")
    spend(other_user, 999_999)  # not theirs to see
    text = page(browser)
    rows = table(text, "usage-by-model")
    assert "<td>base</td><td>2</td><td>3,000</td><td>0</td><td>1,000</td><td>4,000</td>" in rows
    assert "<td>price unknown</td>" in rows
    assert "<td>claude-sonnet-4-6</td>" in rows and "$0.0123" in rows
    assert "<dd data-tokens>6,000</dd>" in text
    assert "<dd data-cost>$0.0123 + price unknown</dd>" in text
    assert "999,999" not in text


def test_price_unknown_never_shows_a_cost(browser, user):
    spend(user, 5_000)
    text = page(browser)
    assert "<dd data-cost>price unknown</dd>" in text
    assert "$" not in table(text, "usage-by-model")


def test_the_daily_chart_is_an_answer_chart_made_safe(browser, user):
    spend(user, 1_500)
    text = page(browser)
    assert 'data-chart-view role="img"' in text
    spec = json.loads(html.unescape(text.split('data-spec="')[1].split('"')[0]))
    assert spec["mark"] == {"type": "bar"}
    values = spec["data"]["values"]
    today = [v for v in values if v["tokens"] == 1_500]
    assert len(today) == 1 and today[0]["agent"] == "Bigdata Research Agent (demo)"
    assert values[0]["day"] == f"{month_start():%Y-%m-%d}"  # every day of the month so far
    assert "vega-lite.min.js" in text and "charts.js" in text
    assert "<summary>Data table</summary>" in text


def test_last_month_is_a_click_away(browser, user):
    spend(user, 7_777, when=month_start() - timedelta(days=2))
    text = page(browser)
    assert "<dd data-tokens>7,777</dd>" in text  # its total, beside this month's
    assert f"No answers in {month_start():%B %Y}." in text
    last = page(browser, month="last")
    assert "7,777" in table(last, "usage-by-model")


def test_the_most_expensive_chats_come_first(browser, user):
    cheap = Chat.objects.create(owner=user, title="Cheap")
    dear = Chat.objects.create(owner=user, title="Dear")
    unpriced = Chat.objects.create(owner=user, title="Unpriced")
    spend(user, 9_000, chat=unpriced)
    spend(user, 100, agent="anthropic", cost="0.01", chat=cheap)
    spend(user, 100, agent="anthropic", cost="2.00", chat=dear)
    gone = spend(user, 50, agent="anthropic", cost="1.00").chat
    gone.delete()
    rows = table(page(browser), "usage-by-chat")
    order = [rows.index(name) for name in ("Dear", "A deleted chat", "Cheap", "Unpriced")]
    assert order == sorted(order)


def test_what_watches_spent(browser, user):
    first = spend(user, 1_000)
    watch = watch_create(owner=user, turn=first, every="day", time_of_day=time(9))
    for _ in range(2):
        run_turn = spend(user, 2_000, chat=first.chat)
        WatchRun.objects.create(watch=watch, turn=run_turn, state=WatchRun.State.UNCHANGED)
    rows = table(page(browser), "usage-by-watch")
    assert "<td>2</td><td>4,000</td><td>price unknown</td>" in rows


def test_a_team_owner_sees_the_team_by_member_and_a_member_does_not(
    browser, client, user, other_user, django_user_model
):
    team = Team.objects.create(name="research")
    TeamMembership.objects.create(team=team, user=user, role=TeamMembership.Role.OWNER)
    TeamMembership.objects.create(team=team, user=other_user)
    outsider = django_user_model.objects.create_user("outsider")
    spend(other_user, 4_321)
    spend(outsider, 8_888)
    text = page(browser)
    assert "Team research: by member" in text
    assert "intruder" in text and "4,321" in text and "8,888" not in text
    client.force_login(other_user)
    assert "Team research" not in page(client)
