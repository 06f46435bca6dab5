"""The demo agent's charts over real HTTP: only when asked, placed in the answer, safe to draw."""

from __future__ import annotations

from chats.agent.events import ChartEvent
from chats.answer.charts import answer_block_at, chart_for_turn, sanitize_spec
from demo_agent.charts import wants_charts

from .test_demo_agent import ask

CHARTS_ON = {"tools_configs": {"python_code_execution": {"chart_generation_enabled": True}}}


def test_no_chart_unless_the_request_asks_for_one(agent_url):
    reply = ask(agent_url, "How did NVIDIA's data center business do?")
    assert "CHART" not in reply.types


def test_asked_for_charts_it_sends_a_bar_chart_of_the_cited_companies(agent_url):
    reply = ask(agent_url, "Compare NVIDIA and Apple revenue", **CHARTS_ON)
    assert reply.types.count("CHART") == 1
    assert reply.types.index("CHART") > max(i for i, t in enumerate(reply.types) if t == "ANSWER")
    assert reply.types.index("CHART") < reply.types.index("COMPLETE")
    (chart,) = reply.transcript.charts
    assert isinstance(chart, ChartEvent) and chart.chart_type == "bar" and chart.title
    answer = reply.transcript.answer
    assert chart.start == 0 and 0 < chart.end <= len(answer)
    assert "\n\n" not in answer[: chart.end]  # the first paragraph
    companies = [row["company"] for row in chart.vega_lite_spec["data"]["values"]]
    assert {"NVIDIA", "Apple"} <= set(companies)
    assert chart.data_points == len(companies)
    # What the site will draw: the sanitiser keeps the whole chart.
    safe = sanitize_spec(chart.vega_lite_spec)
    assert safe["data"] == chart.vega_lite_spec["data"] and safe["mark"]["type"] == "bar"
    stored = chart_for_turn(chart, answer)
    assert stored["note"] == "" and stored["block"] == answer_block_at(answer, chart.end) == 0


def test_wants_charts_reads_only_the_documented_flag():
    assert wants_charts(CHARTS_ON)
    for body in (
        {},
        {"tools_configs": {"python_code_execution": {"chart_generation_enabled": "yes"}}},
        {"tools_configs": {"python_code_execution": {"enabled": True}}},
        {"tools_configs": []},
        [],
    ):
        assert not wants_charts(body)
