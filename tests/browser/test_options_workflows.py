"""Question options and Workflows in real Chromium: the options reach the request body as
documented and are remembered; a workflow runs end to end and resumes after a reload."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from chats.models import Chat, OutputSchema, Turn
from demo_agent.scripted import Reply, ScriptedAgent, answer_stream
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer
from tests.servers import serve_asgi

SCHEMA = {"type": "object", "properties": {"revenue": {"type": "string"}}}


@pytest.fixture
def stand_in(site, settings):
    app = ScriptedAgent(lambda request: Reply.events(*answer_stream("Revenue rose.")))
    with serve_asgi(app) as url:
        settings.RESEARCH_AGENT_URL = f"{url}/v1/research-agent"
        yield app


def test_options_set_in_the_page_reach_the_request_as_documented(page, site, analyst, stand_in):
    OutputSchema.objects.create(owner=analyst, name="Revenue table", schema=SCHEMA)
    log_in(page, site)
    new_chat(page)
    page.get_by_role("button", name="Options").click()
    page.get_by_label("Model").select_option("pro")
    page.get_by_label("From").fill("2026-01-01")
    page.get_by_label("To").fill("2026-06-30")
    page.get_by_label("Entities: any of").fill("NVIDIA, AMD")
    page.get_by_label("Entities: none of").fill("Apple")
    page.get_by_label("Sources").fill("Reuters")
    page.get_by_label("Tags").fill("earnings")
    page.get_by_label("Freshness boost").fill("6")
    page.get_by_label("Expected output").fill("bullet points")
    page.get_by_label("Charts").check()
    page.get_by_label("Structured output").select_option(label="Revenue table")
    ask(page, "How did NVIDIA do?")
    wait_for_answer(page)

    payload = stand_in.payloads[0]
    assert payload["model_name"] == "pro"
    assert payload["expected_output"] == "bullet points"
    assert payload["structured_output_schema"] == SCHEMA
    assert payload["tools_configs"] == {
        "search": {
            "query_filters": {
                "period": {"start": "2026-01-01", "end": "2026-06-30"},
                "entities": {"any_of": ["NVIDIA", "AMD"], "none_of": ["Apple"]},
                "content": {"sources": {"any_of": ["Reuters"]}},
                "tags": {"any_of": ["earnings"]},
            },
            "ranking_parameters": {"freshness_boost": 6},
        },
        "python_code_execution": {"enabled": True, "chart_generation_enabled": True},
    }

    # Remembered per chat: after a reload the panel shows them, and the next ask sends them.
    page.reload()
    page.get_by_role("button", name="Options").click()
    expect(page.get_by_label("Model")).to_have_value("pro")
    expect(page.get_by_label("Entities: any of")).to_have_value("NVIDIA, AMD")
    expect(page.get_by_label("Charts")).to_be_checked()
    page.get_by_label("Charts").uncheck()
    ask(page, "And margins?")
    expect(page.locator(".turn")).to_have_count(2)
    wait_for_answer(page, 1)
    assert stand_in.payloads[1]["model_name"] == "pro"
    assert "python_code_execution" not in stand_in.payloads[1]["tools_configs"]
    assert Chat.objects.get(owner=analyst).options["model"] == "pro"


def test_from_after_to_is_refused_in_the_page(page, site, analyst, stand_in):
    log_in(page, site)
    new_chat(page)
    page.get_by_role("button", name="Options").click()
    page.get_by_label("From").fill("2026-06-30")
    page.get_by_label("To").fill("2026-01-01")
    ask(page, "How did NVIDIA do?")
    expect(page.get_by_text("The From date must not be after the To date.")).to_be_visible()
    assert stand_in.payloads == []


def test_a_workflow_runs_and_resumes_after_a_reload(page, site, analyst):
    log_in(page, site)
    page.get_by_role("link", name="Workflows").click()
    card = page.get_by_role("region", name="Earnings brief")
    card.get_by_label("Company").fill("NVIDIA")
    card.get_by_label("Time range").select_option("last_365_days")
    card.get_by_role("button", name="Run Earnings brief").click()
    page.wait_for_url(re.compile(r".*/chats/\d+/$"))

    turn = page.locator(".turn").first
    # Streaming: the agent's activity shows while the answer is still to come.
    expect(turn.locator("[data-activity] li").first).to_be_visible(timeout=30_000)
    # Usually mid-stream; on a fast database the short demo run may already have finished,
    # and the page must show the same whole answer either way.
    page.reload()
    answer = wait_for_answer(page, 0, timeout=60_000)
    expect(answer.locator(".answer.cited")).to_contain_text("NVIDIA")
    stored = Turn.objects.get(chat__owner=analyst)
    assert stored.status == Turn.Status.COMPLETE
    assert stored.execution_id.startswith("exec-")
    assert page.js_errors == []
