"""The turn's admin page shows its charts and structured output as the user saw them."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from django.urls import reverse

from chats.agent.events import event_from_data
from chats.answer.charts import chart_for_turn
from chats.models import Chat, Turn

pytestmark = pytest.mark.django_db


def test_a_turn_page_shows_charts_structured_output_and_the_scripts_to_draw_them(
    client, reviewer, django_user_model
):
    owner = django_user_model.objects.create_user("owner")
    chart = event_from_data(
        {
            "type": "CHART",
            "title": "Revenue <script>",
            "caption": "US$ bn",
            "vega_lite_spec": {"data": {"values": [{"a": "x", "b": 2}]}, "mark": "bar"},
        }
    )
    turn = Turn.objects.create(
        chat=Chat.objects.create(owner=owner),
        question="q",
        status="complete",
        answer_text="a",
        answer_html="<p>a</p>",
        charts=[chart_for_turn(chart, "a")],
        structured_output={"ticker": "=NVDA", "beat": True},
    )
    client.force_login(reviewer)
    response = client.get(reverse("admin:chats_turn_change", args=[turn.pk]))
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    assert 'class="chart"' in html and "Revenue &lt;script&gt;" in html
    assert "<script>" not in html.split("Revenue", 1)[1].split("</figure>", 1)[0]
    assert '<th scope="row">ticker</th><td>=NVDA</td>' in html
    assert "structured.csv" not in html  # downloads are the owner's, on the chat page
    for script in ("chats/vendor/vega.min.js", "chats/vendor/vega-interpreter.min.js"):
        assert script in html
    assert html.index("vega.min.js") < html.index("chats/charts.js")
