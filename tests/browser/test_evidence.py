"""Checking an answer in Chromium: evidence cards on hover and keyboard focus, figure flags that
survive reload and show in the admin, the Copy button, the degraded notice, Escape to stop."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from demo_agent.scripted import Reply, Stall
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer
from tests.chats.conftest import sse
from tests.conftest import REVIEWER_PASSWORD

CLAIM_ONE = "Revenue rose 12% to $4.1 billion."
CLAIM_TWO = " Gross margin reached 38% in the third quarter."
ANSWER = CLAIM_ONE + CLAIM_TWO


def source(doc_id: str, name: str, passage: str) -> dict:
    return {
        "type": "BIGDATA",
        "id": doc_id,
        "hd": f"{name} results",
        "src_name": name,
        "ts": "2026-04-15T10:00:00Z",
        "url": f"https://news.example/{doc_id}",
        "chunks": [{"cnum": 0, "text": passage, "relevance": 0.91}],
    }


def answer_messages() -> list[dict]:
    supported = source(
        "d1", "Reuters", "Quarterly revenue rose 12 percent to $4.1bn, the company said."
    )
    unsupported = source("d2", "Dow Jones", "Gross margin was 35% in the third quarter.")
    end_one = len(CLAIM_ONE)
    return [
        {"type": "TOOL_ERROR", "tool_name": "search", "error": "timeout"},
        {"type": "ANSWER", "content": ANSWER},
        {
            "type": "GROUNDING",
            "references": [
                {"start": 0, "end": end_one, "tool_name": "search", "audit_id": "a",
                 "source": supported},
                {"start": end_one + 1, "end": len(ANSWER), "tool_name": "search", "audit_id": "a",
                 "source": unsupported},
            ],
        },
        {"type": "COMPLETE", "checkpoint_id": "k", "consumption": []},
    ]  # fmt: skip


def check_flags(answer) -> None:
    expect(answer.locator(".claim-flag")).to_have_count(1)
    expect(answer.locator(".claim-flag")).to_have_text("38% not found in its source")
    expect(answer.locator(".claim-summary")).to_have_text(
        "2 cited claims: 1 figure found, 1 not found."
    )


def test_an_analyst_checks_the_evidence_behind_each_claim(page, site, analyst, upstream, reviewer):
    upstream.queue(Reply.events(*answer_messages()))
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    log_in(page, site)
    new_chat(page)
    ask(page, "How did the quarter go?")
    turn = wait_for_answer(page)
    answer = turn.locator(".answer.cited")
    check_flags(answer)
    expect(turn.locator(".degraded")).to_contain_text("1 tool call failed")

    # Hover: the card names the source and shows its passage, shared words marked.
    markers = answer.locator("sup.footnote-ref a")
    markers.first.hover()
    card = page.locator(".evidence-popover")
    expect(card).to_be_visible()
    expect(card).to_contain_text("Reuters")
    expect(card.locator(".evidence-passage")).to_contain_text("12 percent to $4.1bn")
    expect(card.locator(".evidence-passage mark").first).to_be_visible()
    page.keyboard.press("Escape")
    expect(card).to_be_hidden()

    # Keyboard focus shows the second claim's card, with its check.
    markers.nth(1).focus()
    expect(card).to_be_visible()
    expect(card).to_contain_text("Dow Jones")
    expect(card).to_contain_text("38% not found in its source")
    expect(card.locator(".evidence-passage")).to_contain_text("35%")

    # Clicking a marker lists every claim citing that source.
    markers.nth(1).click()
    panel = page.locator(".evidence-panel")
    expect(panel).to_be_visible()
    expect(panel.locator("li")).to_have_count(1)
    expect(panel).to_contain_text("Gross margin reached 38%")
    panel.get_by_role("button", name="Close").click()

    # Copy puts the cited Markdown with its footnotes on the clipboard.
    turn.get_by_role("button", name="Copy").click()
    expect(turn.get_by_role("button", name="Copied")).to_be_visible()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith(CLAIM_ONE + "[^1]")
    assert "[^2]: [Dow Jones - 2026-04-15](https://news.example/d2)" in copied

    page.reload()
    check_flags(wait_for_answer(page).locator(".answer.cited"))

    # The reviewer sees the same flag, and the filter finds the answer.
    page.get_by_role("button", name="Log out").click()
    log_in(page, site, "reviewer", REVIEWER_PASSWORD)
    page.goto(f"{site}/admin/chats/turn/?check=figure+not+found")
    page.get_by_role("link", name="How did the quarter go?").click()
    check_flags(page.locator(".cited-answer"))
    assert page.js_errors == []


def test_escape_stops_a_streaming_answer(page, site, analyst, upstream):
    upstream.queue(Reply(body=[sse({"type": "ANSWER", "content": "Thinking about it"}), Stall()]))
    log_in(page, site)
    new_chat(page)
    ask(page, "Take your time")
    expect(page.locator("[data-answer]")).to_contain_text("Thinking about it")
    page.locator("body").press("Escape")
    turn = wait_for_answer(page)
    expect(turn).to_have_attribute("data-status", "stopped")
    expect(turn).to_contain_text(re.compile("Stopped"))
