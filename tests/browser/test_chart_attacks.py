"""Hostile chart specs in real Chromium: each is drawn within its bounds or shown as its table.

A stand-in agent sends every attack of `tests/chats/answer/chart_attacks.py` (expressions in
date objects, a backtracking regex, huge impute, maxbins, tickCount, repeat and density step
counts, an oversized width) and specs near the bounds that are drawn. On the chat page, the
shared link, the print page and the admin, every chart must end up drawn or shown as its table
with "This chart could not be drawn safely", and no drawn view may be wider than the bound
allows. How long each takes to draw is timed by `bench/chart_drawing.py` (goal: under 1 s).
"""

from __future__ import annotations

from playwright.sync_api import expect

from demo_agent.scripted import Reply
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer
from tests.chats.answer.chart_attacks import ATTACKS, DRAWABLE

UNSAFE = "This chart could not be drawn safely."

# Every figure is drawn (or failed, and shows its table), or was refused by the server.
ALL_SETTLED = """() => {
  const figures = [...document.querySelectorAll("figure[data-chart]")];
  return figures.length > 0 && figures.every((f) =>
    !f.querySelector("[data-chart-view]") || ["drawn", "failed"].includes(f.dataset.drawn));
}"""


def chart(title: str, spec: dict) -> dict:
    return {"type": "CHART", "chart_id": title[:40], "title": title, "vega_lite_spec": spec}


def assert_every_chart_drawn_or_tabled(page) -> None:
    page.wait_for_function(ALL_SETTLED, timeout=30_000)
    figures = page.locator("figure[data-chart]")
    expect(figures).to_have_count(len(ATTACKS) + len(DRAWABLE))
    for index, title in enumerate([*ATTACKS, *DRAWABLE]):
        figure = figures.nth(index)
        expect(figure.locator(".chart-title")).to_have_text(title)
        if title in ATTACKS:
            expect(figure.locator(".chart-view")).to_have_count(0)
            expect(figure.locator(".chart-note")).to_contain_text(UNSAFE)
            expect(figure.locator("details.chart-data table")).to_be_attached()
        else:
            assert figure.get_attribute("data-drawn") == "drawn", title
            expect(figure.locator(".chart-view svg")).to_be_attached()
    widths = page.eval_on_selector_all(
        "figure[data-chart] .chart-view svg", "(svgs) => svgs.map((s) => s.width.baseVal.value)"
    )
    assert widths and max(widths) <= 2 * 2000 + 400, widths  # a view's size, axes and padding


def test_hostile_charts_are_drawn_bounded_or_shown_as_tables_on_every_page(
    page, site, analyst, upstream
):
    from chats.library.services import chat_share
    from chats.models import Turn

    analyst.is_staff = analyst.is_superuser = True
    analyst.save()
    upstream.queue(
        Reply.events(
            {"type": "ANSWER", "content": "An answer.\n\nWith charts."},
            *(chart(title, spec) for title, spec in ATTACKS.items()),
            *(chart(title, spec) for title, spec in DRAWABLE.items()),
            {"type": "COMPLETE", "checkpoint_id": "k", "consumption": []},
        )
    )
    log_in(page, site)
    new_chat(page)
    ask(page, "Draw these")
    wait_for_answer(page)
    stored = {chart["title"]: chart for chart in Turn.objects.get().charts}
    assert all(stored[title]["spec"] is None for title in ATTACKS)
    assert all(stored[title]["spec"] for title in DRAWABLE)
    page.reload()  # the finished turn as stored, drawn from scratch
    assert_every_chart_drawn_or_tabled(page)

    turn = Turn.objects.get()
    share = chat_share(chat=turn.chat, user=analyst)
    for path in (
        f"/shared/{share.token}/",
        f"/chats/{turn.chat_id}/print/",
        f"/admin/chats/turn/{turn.pk}/change/",
    ):
        page.goto(f"{site}{path}")
        assert_every_chart_drawn_or_tabled(page)
    assert page.js_errors == []
