"""The review admin's usage: sums per user, month, agent and model, filtered by user, team, agent
and month, with the same rows as CSV; and the users' and teams' monthly limits."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.http import urlencode

from chats.agent.providers import agent_label
from chats.answer.structured_output import structured_csv
from chats.models import Team, TurnUsage, UsageLimit
from chats.usage.selectors import review_totals, usage_for_review

PRICE_UNKNOWN = "price unknown"
FILTERS = ("user", "team", "agent", "month")


def usage_review_view(request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
    """The admin's usage page, or its CSV (`format=csv`), for the filters in the query."""
    filters, chosen = _filters(request)
    rows = [] if filters is None else usage_for_review(**filters)
    total = review_totals(rows)
    for row in [*rows, total]:
        row["cost_text"] = cost_text(row["cost"])
    if request.GET.get("format") == "csv":
        response = HttpResponse(_csv(rows, total), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="usage.csv"'
        return response
    months = TurnUsage.objects.dates("created_at", "month", order="DESC")
    context = {
        **context,
        "title": "Usage per user and month",
        "rows": rows,
        "total": total,
        "chosen": chosen,
        "users": get_user_model().objects.filter(turn_usage__isnull=False).distinct(),
        "teams": Team.objects.all(),
        "agents": [
            (agent, agent_label(agent))
            for agent in TurnUsage.objects.values_list("agent", flat=True).distinct().order_by()
        ],
        "months": [f"{month:%Y-%m}" for month in months],
        "csv_query": urlencode({**{k: v for k, v in chosen.items() if v}, "format": "csv"}),
    }
    return TemplateResponse(request, "admin/chats/turn/usage.html", context)


def _filters(request: HttpRequest) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The query's filters, and what it chose; None when it names a user or team that does not
    exist (no row matches)."""
    chosen = {name: request.GET.get(name, "").strip() for name in FILTERS}
    filters: dict[str, Any] = {}
    if chosen["user"]:
        filters["user"] = get_user_model().objects.filter(username=chosen["user"]).first()
    if chosen["team"]:
        team_id = chosen["team"]
        found = team_id.isdecimal() and len(team_id) < 19
        filters["team"] = Team.objects.filter(pk=int(team_id)).first() if found else None
    if None in filters.values():
        return None, chosen
    if chosen["agent"]:
        filters["agent"] = chosen["agent"]
    if chosen["month"]:
        try:
            filters["month"] = date.fromisoformat(f"{chosen['month']}-01")
        except ValueError:
            chosen["month"] = ""
    return filters, chosen


COLUMNS = (
    ("month", "Month"),
    ("user", "User"),
    ("agent", "Agent"),
    ("model", "Model"),
    ("answers", "Answers"),
    ("input_tokens", "Input tokens"),
    ("cached_tokens", "Cached tokens"),
    ("output_tokens", "Output tokens"),
    ("tokens", "Tokens"),
    ("cost", "Cost (USD)"),
    ("unpriced", "Answers of unknown price"),
)


def cost_text(cost: Decimal | None) -> str:
    """A cost as the page and the CSV write it: exact dollars, or "price unknown"."""
    return PRICE_UNKNOWN if cost is None else f"{cost.normalize():f}"


def _csv(rows: list[dict[str, Any]], total: dict[str, Any]) -> str:
    """The rows and their total through the site's CSV writer (numbers as numbers, no cell a
    spreadsheet would run as a formula: a username or a model is anyone's to choose)."""
    lines = []
    for row in rows:
        lines.append(
            {
                **{label: row.get(key) for key, label in COLUMNS},
                "Month": f"{row['month']:%Y-%m}",
                "User": row["user__username"],
                "Cost (USD)": row["cost_text"],
            }
        )
    lines.append(
        {
            **{label: total.get(key) for key, label in COLUMNS},
            "Month": "Total",
            "User": "",
            "Agent": "",
            "Model": "",
            "Cost (USD)": total["cost_text"],
        }
    )
    return structured_csv(lines)


@admin.register(UsageLimit)
class UsageLimitAdmin(admin.ModelAdmin):
    """A user's or a team's monthly limits, in place of the site's (permission-based)."""

    list_display = ("user", "team", "monthly_tokens", "monthly_cost", "note", "updated_at")
    list_select_related = ("user", "team")
    search_fields = ("user__username", "team__name", "note")
    fields = ("user", "team", "monthly_tokens", "monthly_cost", "note")
