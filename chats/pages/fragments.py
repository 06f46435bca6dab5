"""The page layer's templates for the HTML the live and run layers send pages: a chart, a
research plan, a turn's card (registered with `chats.live.fragments` when the app is ready)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.template.loader import render_to_string

from chats.live.fragments import Fragments

if TYPE_CHECKING:  # not at run time: chats.apps imports this module before the models load
    from chats.selectors import BranchTurn


def render_charts(charts: list[dict[str, Any]]) -> str:
    """Return charts (`chats.answer.charts.chart_for_turn`) as every page shows them."""
    return render_to_string("chats/_charts.html", {"charts": charts})


def render_plan(title: str, steps: list[dict[str, str]]) -> str:
    """Return the research plan as both a streaming and a finished turn show it."""
    return render_to_string("chats/_plan.html", {"title": title, "steps": steps})


def render_turn_card(item: BranchTurn) -> str:
    """A turn's card as its chat's page shows it, with its place among its versions."""
    return render_to_string("chats/_turn.html", {"item": item})


PAGE_FRAGMENTS = Fragments(charts=render_charts, plan=render_plan, turn_card=render_turn_card)
