"""The "Usage" page: what the user's answers used this month and last, by agent and model, by
day (a chart drawn as the answers' charts are), by chat, and by watch; a team owner also sees
their team's usage by member."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from chats.agent.events import ChartEvent
from chats.agent.providers import agent_label
from chats.answer.charts import chart_for_turn
from chats.usage.limits import limits_for_users, resets_on
from chats.usage.selectors import (
    Month,
    team_usage_by_member,
    teams_owned,
    usage_by_chat,
    usage_by_day,
    usage_by_model,
    usage_total,
)
from chats.watch.selectors import watch_spending


@require_GET
@login_required
def usage_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    this = Month.this()
    last = this.previous()
    month = last if request.GET.get("month") == "last" else this
    by_model = usage_by_model(user=user, month=month)
    for row in by_model:
        row["agent_label"] = agent_label(row["agent"])
    (limits,) = limits_for_users(user_ids=[user.pk]).values()
    context: dict[str, Any] = {
        "month": month,
        "showing_last": month is last,
        "this_month": this,
        "last_month": last,
        "this_total": usage_total(user=user, month=this),
        "last_total": usage_total(user=user, month=last),
        "by_model": by_model,
        "chats": usage_by_chat(user=user, month=month),
        "watches": watch_spending(user=user, month=month),
        "chart": daily_chart(usage_by_day(user=user, month=month), month),
        "limits": limits,
        "resets_on": resets_on(),
        "teams": [
            (team, team_usage_by_member(team=team, month=month)) for team in teams_owned(user=user)
        ],
    }
    return render(request, "chats/usage.html", context)


def daily_chart(rows: list[dict[str, Any]], month: Month) -> dict[str, Any] | None:
    """Tokens per day of the month (up to today), stacked by agent, as an answer's chart is
    stored: its Vega-Lite spec through the same allow-list, its data as a table beside it."""
    if not rows:
        return None
    last_day = min(timezone.localdate(), (month.end - timedelta(days=1)).date())
    values = [
        {
            "day": f"{row['day']:%Y-%m-%d}",
            "agent": agent_label(row["agent"]),
            "tokens": row["tokens"],
        }
        for row in rows
    ]
    used_days = {value["day"] for value in values}
    day = month.start.date()
    while day <= last_day:  # every day shown, those without an answer at 0
        if f"{day:%Y-%m-%d}" not in used_days:
            values.append({"day": f"{day:%Y-%m-%d}", "agent": values[0]["agent"], "tokens": 0})
        day += timedelta(days=1)
    values.sort(key=lambda value: (value["day"], value["agent"]))
    spec = {
        "data": {"values": values},
        "mark": {"type": "bar"},
        "encoding": {
            "x": {
                "field": "day",
                "type": "ordinal",
                "timeUnit": "utcdate",  # the day of the month: "29"
                "title": month.label,
                "axis": {"labelAngle": 0},
            },
            "y": {"field": "tokens", "type": "quantitative", "title": "Tokens"},
            "color": {"field": "agent", "type": "nominal", "title": "Agent"},
        },
        "height": 220,
    }
    event = ChartEvent(
        chart_id="usage-by-day", title=f"Tokens per day, {month.label}", vega_lite_spec=spec
    )
    return chart_for_turn(event)
