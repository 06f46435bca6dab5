"""A chat on another provider in Chromium: Google Gemini through its official SDK, against a
stand-in speaking Gemini's streaming wire format (the shared capture, paced)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from chats.models import Chat
from demo_agent.scripted import Reply, ScriptedAgent, Sleep
from tests.browser.conftest import ask, log_in, wait_for_answer
from tests.conftest import PROVIDERS_DIR
from tests.standins.gemini import serving_as_gemini

EXPECTED_TEXT = (
    "Samsung's foundry unit won a 2nm order 🎉 from a US chip designer.[1] 株価 rose 4% on the"
    " news.[1][2] Analysts called it a turning point.[3]"
)


@pytest.fixture
def gemini(settings):
    with serving_as_gemini(settings, ScriptedAgent()) as app:
        yield app


def paced_capture() -> Reply:
    lines = (PROVIDERS_DIR / "gemini.sse").read_bytes().splitlines(keepends=True)
    body: list = []
    for line in lines:
        body += [line, Sleep(0.25)] if line.strip() else [line]
    return Reply(body=body, headers={"Content-Type": "text/event-stream"})


def test_a_gemini_chat_streams_then_shows_placed_footnotes_that_survive_reload(
    page, site, analyst, gemini
):
    gemini.queue(paced_capture())
    log_in(page, site)
    page.get_by_label("Agent").first.select_option("gemini")
    page.get_by_role("button", name="New chat").first.click()
    page.wait_for_url("**/chats/*/")
    expect(page.locator(".chat-agent")).to_have_text("Agent: Google Gemini")
    assert Chat.objects.get().provider == "gemini"

    ask(page, "What did Samsung win?")
    # The answer streams in before the citations arrive with the last chunk.
    expect(page.locator("[data-answer]")).to_contain_text("foundry unit", timeout=15_000)
    answer = wait_for_answer(page).locator(".answer.cited")
    paragraph = answer.locator("p").first
    expect(paragraph).to_have_text(EXPECTED_TEXT)
    sources = answer.locator(".footnotes li")
    expect(sources).to_have_count(3)
    expect(sources.nth(0)).to_contain_text("koreaherald.com")
    expect(sources.nth(2)).to_contain_text("bloomberg.com")

    # The evidence card names the source; Gemini sends none of its words, and the answer's
    # own segment is never shown as one (the site reads the page when SOURCE_FETCH_ENABLED).
    answer.locator("sup.footnote-ref a").first.hover()
    expect(page.locator(".evidence-popover")).to_contain_text("koreaherald.com")
    expect(page.locator(".evidence-popover .evidence-passage")).to_have_count(0)
    expect(page.locator(".evidence-popover .evidence-none")).to_have_text(
        "This source sent no passage to show."
    )

    page.reload()
    again = wait_for_answer(page).locator(".answer.cited")
    expect(again.locator("p").first).to_have_text(EXPECTED_TEXT)
    expect(again.locator(".footnotes li")).to_have_count(3)
    assert gemini.requests[0].headers["x-goog-api-key"] == "gemini-test-key-not-secret"
    assert "gemini-test-key-not-secret" not in page.content()
    assert page.js_errors == []
