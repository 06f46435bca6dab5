"""Usage in real Chromium: the second question refused before the agent is called, the 80%
warning under the answer that crossed it, and the Usage page with its chart drawn."""

from __future__ import annotations

from playwright.sync_api import expect

from chats.usage.limits import resets_on
from demo_agent.scripted import Reply, answer_stream
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer


def answer(tokens_in: int = 900, tokens_out: int = 100) -> Reply:
    messages = answer_stream("Revenue rose 12% to $4.1 billion.")
    usage = {"type": "base", "input_tokens": tokens_in, "output_tokens": tokens_out}
    messages[-1] = {**messages[-1], "consumption": [usage]}
    return Reply.events(*messages, pause=0.02)


def test_the_second_question_gets_the_limit_message_before_the_agent_is_called(
    page, site, analyst, upstream, settings
):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 1_001  # just above one answer's 1,000
    upstream.queue(answer())
    log_in(page, site)
    new_chat(page)
    ask(page, "How did revenue do?")
    first = wait_for_answer(page)
    expect(first.locator(".usage")).to_have_text("Tokens: base 900 in / 100 out")

    ask(page, "And margins?")
    expect(page.locator("#connection")).to_have_text(
        "You have used 1,000 of your 1,001 tokens this month and a question uses about 1,000,"
        f" so this one would pass the limit; the limit resets on {resets_on()}."
    )
    first.get_by_role("button", name="Re-run").click()
    expect(first.get_by_role("button", name="Re-run")).to_be_enabled()
    assert len(upstream.requests) == 1  # the first answer only
    expect(page.locator(".turn")).to_have_count(1)
    assert page.js_errors == []


def test_the_80_percent_warning_is_shown_under_the_answer_that_crossed_it(
    page, site, analyst, upstream, settings
):
    settings.USAGE_MONTHLY_LIMIT_TOKENS = 10_000
    upstream.queue(answer(3_000, 1_000), answer(3_500, 1_000))
    log_in(page, site)
    new_chat(page)
    ask(page, "How did revenue do?")
    expect(wait_for_answer(page).locator(".usage-warning")).to_have_count(0)
    ask(page, "And margins?")
    expect(page.locator(".turn")).to_have_count(2)
    warning = wait_for_answer(page, 1).locator(".usage-warning")
    expect(warning).to_contain_text("You have used 8,500 of your 10,000 tokens this month (85%)")
    page.reload()
    expect(page.locator(".usage-warning")).to_have_count(1)
    expect(page.locator(".turn").nth(1).locator(".usage-warning")).to_be_visible()


def test_the_usage_page_shows_the_answers_tokens_and_draws_the_chart(page, site, analyst, upstream):
    upstream.queue(answer(), answer(1_800, 200))
    log_in(page, site)
    new_chat(page)
    for index, question in enumerate(("How did revenue do?", "And margins?")):
        ask(page, question)
        expect(page.locator(".turn")).to_have_count(index + 1)
        wait_for_answer(page, index)
    page.get_by_role("link", name="Usage").click()
    expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    this_month = page.locator(".usage-month").first
    expect(this_month.locator("[data-answers]")).to_have_text("2")
    expect(this_month.locator("[data-tokens]")).to_have_text("3,000")
    expect(this_month.locator("[data-cost]")).to_have_text("price unknown")
    expect(page.locator("#usage-by-model")).to_contain_text("price unknown")
    expect(page.locator(".chart-view svg")).to_have_count(1)  # drawn by Vega-Lite
    expect(page.locator(".chart-view svg .mark-rect path").first).to_be_attached()
    assert page.js_errors == []
