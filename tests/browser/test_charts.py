"""Charts and structured output in real Chromium, under the site's CSP (script-src 'self').

The site's policy has no 'unsafe-eval', so Vega must draw without `new Function`/eval
(vega-interpreter), and no inline style may be needed; any violation fails the test. Three
agents: the demo agent (asked for charts the way the API documents it), a scripted stand-in with
a chart that arrives before the answer completes, and a hostile one whose specs point at a
second loopback server.
"""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from demo_agent import DemoAgentApp
from demo_agent.scripted import DEFAULT_CHAT_ID, Reply, ScriptedAgent, Sleep
from demo_agent.wire import sse_event
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer
from tests.servers import serve_asgi

CHARTS_ON = {"python_code_execution": {"enabled": True, "chart_generation_enabled": True}}


@pytest.fixture
def csp_site(site, page):
    """The site, with its own CSP; every violation Chromium reports fails the test."""
    response = page.request.get(f"{site}/login/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    yield site
    assert violations == []


@pytest.fixture
def elsewhere():
    """Another origin, standing for a remote host: it records every request that reaches it."""
    app = ScriptedAgent(lambda request: Reply(status=200, body=["[]"]))
    with serve_asgi(app) as url:
        app.url = url
        yield app


def watch_requests(page):
    urls: list[str] = []
    page.on("request", lambda request: urls.append(request.url))
    return urls


def test_the_demo_agent_draws_a_chart_in_the_answer_that_survives_a_reload(
    page, csp_site, analyst, upstream
):
    # The site does not send the Charts option yet (the composer's options come separately):
    # the stand-in forwards each request to a real demo agent with charts asked for.
    with serve_asgi(DemoAgentApp("demo-secret", pace=0)) as demo_url:

        def forward(request):
            body = {**request.json, "tools_configs": CHARTS_ON}
            response = httpx.post(
                f"{demo_url}/v1/research-agent",
                json=body,
                headers={"X-API-KEY": "demo-key"},
                timeout=30,
            )
            return Reply(body=[response.content])

        upstream.respond = forward
        requests = watch_requests(page)
        log_in(page, csp_site)
        new_chat(page)
        ask(page, "Compare NVIDIA and Apple revenue")
        turn = wait_for_answer(page)
        figure = turn.locator("figure.chart")
        expect(figure.locator(".chart-view svg")).to_be_visible()
        expect(figure.locator(".chart-title")).to_have_text(
            "Consensus revenue for the next reported quarter"
        )
        # Placed after the answer block holding its end: the first paragraph.
        expect(turn.locator(".answer.cited > figure.chart")).to_have_count(1)
        placed_after = figure.evaluate("(f) => f.previousElementSibling.tagName")
        assert placed_after == "P"
        # The data table, for screen readers and copying.
        figure.locator("summary").click()
        table = figure.get_by_role("table")
        expect(table.get_by_role("columnheader", name="company")).to_be_visible()
        expect(table.get_by_role("cell", name="NVIDIA")).to_be_visible()
        # PNG and SVG downloads.
        for kind in ("SVG", "PNG"):
            with page.expect_download() as download:
                figure.get_by_role("button", name=kind).click()
            assert download.value.suggested_filename.endswith(f".{kind.lower()}")

        page.reload()
        kept = page.locator(".turn").first
        expect(kept.locator(".answer.cited > figure.chart .chart-view svg")).to_be_visible()
        assert upstream.payloads[0]["message"] == "Compare NVIDIA and Apple revenue"
    assert all(url.startswith(csp_site) for url in requests), requests
    assert page.js_errors == []


def test_a_chart_draws_as_it_arrives_and_structured_output_is_a_table(
    page, csp_site, analyst, upstream
):
    chart = {
        "type": "CHART",
        "chart_id": "c1",
        "title": "Segment revenue",
        "chart_type": "line",
        "caption": "US$ bn",
        "data_points": 3,
        "start": 0,
        "end": 5,
        "vega_lite_spec": {
            "data": {"values": [{"q": "Q1", "v": 1}, {"q": "Q2", "v": 3}, {"q": "Q3", "v": 2}]},
            "mark": "line",
            "encoding": {
                "x": {"field": "q", "type": "ordinal"},
                "y": {"field": "v", "type": "quantitative"},
            },
        },
    }
    structured = [
        {"ticker": "NVDA", "revenue": 75.4, "segments": ["dc", "gaming"]},
        {"ticker": "AAPL", "eps": 2.71},
    ]
    body = [
        sse_event(DEFAULT_CHAT_ID, {"type": "ANSWER", "content": "Grew.\n\nThen slowed."}),
        sse_event(DEFAULT_CHAT_ID, chart),
        sse_event(DEFAULT_CHAT_ID, {"type": "STRUCTURED_OUTPUT", "content": structured}),
        Sleep(3),  # the chart is on the page while the answer is still streaming
        sse_event(
            DEFAULT_CHAT_ID,
            {
                "type": "COMPLETE",
                "checkpoint_id": "k",
                "consumption": [
                    {"type": "base", "input_tokens": 1234, "output_tokens": 567, "cached_tokens": 0}
                ],
            },
        ),
    ]
    upstream.queue(Reply(body=body))
    log_in(page, csp_site)
    new_chat(page)
    ask(page, "Chart it")
    live = page.locator('.turn[data-status="streaming"] [data-live-charts] figure.chart')
    expect(live.locator(".chart-view svg")).to_be_visible()

    turn = wait_for_answer(page)
    expect(turn.locator(".answer.cited > figure.chart .chart-view svg")).to_be_visible()
    # A three-point chart takes the answer's width (its spec sets none), not Vega's default.
    chart_width, answer_width = page.evaluate(
        """() => [document.querySelector('.answer.cited figure.chart .chart-view svg'),
                  document.querySelector('.answer.cited')]
                 .map((element) => element.getBoundingClientRect().width)"""
    )
    assert chart_width >= 0.9 * answer_width > 500
    output = turn.locator(".structured-output")
    expect(output.get_by_role("columnheader", name="segments")).to_be_visible()
    expect(output.get_by_role("cell", name='["dc","gaming"]')).to_be_visible()
    expect(output.get_by_role("link", name="CSV")).to_have_attribute(
        "href", re.compile(r"/structured\.csv$")
    )
    expect(turn.locator(".usage")).to_have_text("Tokens: base 1,234 in / 567 out")

    page.reload()
    kept = page.locator(".turn").first
    expect(kept.locator(".structured-output table")).to_be_visible()
    expect(kept.locator("figure.chart .chart-view svg")).to_be_visible()
    assert page.js_errors == []


def test_hostile_charts_draw_nothing_unsafe_and_fetch_nothing(
    page, csp_site, analyst, upstream, elsewhere
):
    remote = f"{elsewhere.url}/data.json"
    script_title = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
    hostile = [
        {  # remote data: refused whole, the table of its data points instead
            "type": "CHART",
            "title": "Remote",
            "vega_lite_spec": {"data": {"url": remote}, "mark": "bar"},
            "data_points": [{"x": "a", "y": 1}],
        },
        {  # drawable once its url, href, image layer, expressions and loader config are gone
            "type": "CHART",
            "title": script_title,
            "caption": script_title,
            "vega_lite_spec": {
                "title": script_title,
                "data": {"values": [{"x": "a", "y": 1, "link": remote}], "url": remote},
                "mark": {"type": "bar", "href": remote},
                "encoding": {
                    "x": {"field": "x", "type": "nominal"},
                    "y": {"field": "y", "type": "quantitative"},
                    "href": {"field": "link"},
                    "tooltip": {"signal": "window.__pwned=3"},
                    "color": {"value": {"expr": "window.__pwned=4"}},
                },
                "params": [{"name": "p", "expr": "window.__pwned=5"}],
                "config": {"loader": {"baseURL": elsewhere.url}},
                "usermeta": {"embedOptions": {"loader": {"baseURL": elsewhere.url}}},
            },
        },
        {  # an image mark: refused
            "type": "CHART",
            "title": "Image",
            "vega_lite_spec": {
                "data": {"values": [{"u": remote}]},
                "mark": "image",
                "encoding": {"url": {"field": "u"}},
            },
        },
        {  # huge data: refused, a capped table
            "type": "CHART",
            "title": "Huge",
            "vega_lite_spec": {
                "data": {"values": [{"i": i} for i in range(6000)]},
                "mark": "point",
            },
        },
        {  # an expression computing the data: refused, the table of its data
            "type": "CHART",
            "title": "Computed",
            "vega_lite_spec": {
                "data": {"values": [{"x": "a", "y": 1}]},
                "transform": [{"calculate": "window.__pwned=6", "as": "z"}],
                "mark": "bar",
            },
        },
    ]
    upstream.queue(
        Reply.events(
            {"type": "ANSWER", "content": "An answer."},
            *hostile,
            {"type": "COMPLETE", "checkpoint_id": "k", "consumption": []},
        )
    )
    requests = watch_requests(page)
    log_in(page, csp_site)
    new_chat(page)
    ask(page, "Draw these")
    turn = wait_for_answer(page)
    figures = turn.locator("figure.chart")
    expect(figures).to_have_count(5)
    expect(figures.nth(1).locator(".chart-view svg")).to_be_visible()  # drawn, made safe
    for index in (0, 2, 3, 4):
        expect(figures.nth(index).locator(".chart-view")).to_have_count(0)
        expect(figures.nth(index).locator(".chart-note")).to_be_visible()
    expect(figures.nth(0).get_by_role("cell", name="a")).to_be_visible()
    expect(figures.nth(3).get_by_text("Showing 1,000 of 6,000 rows.")).to_be_attached()
    expect(figures.nth(4).locator(".chart-note")).to_contain_text(
        "This chart could not be drawn safely."
    )
    expect(figures.nth(1).locator(".chart-title")).to_have_text(script_title)
    page.reload()
    turn = page.locator(".turn").first
    expect(turn.locator("figure.chart").nth(1).locator(".chart-view svg")).to_be_visible()
    page.wait_for_timeout(500)

    # The browser's own wall, should a spec ever reach it unsanitised: the loader refuses.
    page.evaluate(
        """([url, image]) => {
          const box = document.createElement("div");
          box.dataset.charts = "";
          box.innerHTML =
            '<figure data-chart data-failed-text="Not drawn."><div data-chart-view></div></figure>';
          box.querySelector("[data-chart-view]").dataset.spec = JSON.stringify({
            data: {url}, mark: "point", encoding: {x: {field: "x", type: "nominal"}},
          });
          const second = box.firstElementChild.cloneNode(true);
          second.querySelector("[data-chart-view]").dataset.spec = JSON.stringify({
            data: {values: [{u: image}]}, mark: "image",
            encoding: {url: {field: "u", type: "nominal"}},
          });
          box.append(second);
          document.getElementById("thread").append(box);
        }""",
        [remote, f"{elsewhere.url}/image.png"],
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('#thread > [data-charts] figure')]"
        ".every((f) => f.dataset.drawn && f.dataset.drawn !== 'pending')"
    )
    page.wait_for_timeout(500)

    assert page.evaluate("window.__pwned") is None
    assert turn.locator("figure.chart img, figure.chart script, figure.chart a[href]").count() == 0
    assert elsewhere.requests == []
    assert not [url for url in requests if not url.startswith(csp_site)], requests
    assert page.js_errors == []


def test_the_admin_turn_page_draws_the_chart(page, csp_site, django_user_model):
    from chats.agent.events import event_from_data
    from chats.answer.charts import chart_for_turn
    from chats.models import Chat, Turn

    boss = django_user_model.objects.create_superuser("boss", password="boss-pass-77")
    spec = {"data": {"values": [{"a": "x", "b": 2}]}, "mark": "bar"}
    chart = event_from_data({"type": "CHART", "title": "Admin chart", "vega_lite_spec": spec})
    turn = Turn.objects.create(
        chat=Chat.objects.create(owner=boss),
        question="q",
        status="complete",
        answer_text="a",
        answer_html="<p>a</p>",
        charts=[chart_for_turn(chart, "a")],
    )
    log_in(page, csp_site, "boss", "boss-pass-77")
    page.goto(f"{csp_site}/admin/chats/turn/{turn.pk}/change/")
    expect(page.locator("figure.chart .chart-view svg")).to_be_visible()
    assert page.js_errors == []
