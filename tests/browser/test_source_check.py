"""A Gemini answer whose claims are checked against the page it cites, in Chromium: the card
says "Checking 1 source…" once the answer shows, then, over the websocket, flags the figure the
page does not state and shows the page's own sentence; a reload shows the same."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ask, log_in, wait_for_answer
from tests.servers import serve_asgi
from tests.standins.gemini import GeminiStandIn, grounded_answer, serving_as_gemini, stream
from tests.standins.pages import ARTICLE_WITHOUT_MARGINS_HTML, MARGIN_SENTENCE, news_site

SENTENCES = ["Revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]


@pytest.fixture
def gemini(settings):
    with serving_as_gemini(settings, GeminiStandIn()) as stand_in:
        yield stand_in


@pytest.fixture
def news(settings):
    site = news_site()
    # The cited page answers once the test has seen the check going on (`release`).
    site.pages["/2026/11/acme-results"].held = threading.Event()
    with serve_asgi(site) as url:
        site.url = url
        settings.SOURCE_FETCH_ENABLED = True
        settings.SOURCE_FETCH_ALLOWED_HOSTS = [urlsplit(url).netloc]
        try:
            yield site
        finally:
            release(site)


def release(site) -> None:
    site.pages["/2026/11/acme-results"].held.set()


def test_a_gemini_claim_is_flagged_against_its_page_live_and_after_a_reload(
    page, site, analyst, gemini, news
):
    redirect = f"{news.url}/grounding-api-redirect/AbC123"
    gemini.queue(stream(*grounded_answer(SENTENCES, [(redirect, "news.example")])))
    log_in(page, site)
    page.get_by_label("Agent").first.select_option("gemini")
    page.get_by_role("button", name="New chat").first.click()
    page.wait_for_url("**/chats/*/")
    ask(page, "How did Acme do last quarter?")

    answer = wait_for_answer(page).locator(".answer.cited")
    summary = page.locator(".turn .claim-summary")
    expect(summary).to_have_text("Checking 1 source…")
    release(news)
    # The result arrives over the websocket: no reload in between.
    expect(summary).to_have_text("2 cited claims: 1 figure found, 1 not found.", timeout=20_000)
    check_cards(page, page.locator(".turn .answer.cited"), news.url)

    page.reload()
    again = wait_for_answer(page).locator(".answer.cited")
    expect(again.locator(".claim-summary")).to_have_text(
        "2 cited claims: 1 figure found, 1 not found."
    )
    check_cards(page, again, news.url)
    # The source's panel lists both claims, each passage saying where it comes from.
    again.locator("sup.footnote-ref a").nth(1).click()
    panel = page.locator(".evidence-panel")
    expect(panel.locator(".evidence-origin")).to_have_count(2)
    expect(panel.locator(".evidence-check").nth(1)).to_have_text("38% not found in its source")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    assert news.paths == ["/grounding-api-redirect/AbC123", "/2026/11/acme-results"]
    assert answer is not None and page.js_errors == []


def check_cards(page, answer, news_url: str) -> None:
    popover = page.locator(".evidence-popover")
    markers = answer.locator("sup.footnote-ref a")
    markers.nth(1).hover()
    expect(popover.locator(".evidence-check")).to_have_text("38% not found in its source")
    expect(popover.locator(".evidence-passage")).to_have_text(MARGIN_SENTENCE)
    origin = popover.locator(".evidence-origin")
    expect(origin).to_contain_text("From the page, fetched ")
    expect(origin.locator("a")).to_have_attribute("href", f"{news_url}/2026/11/acme-results")
    page.mouse.move(0, 0)
    expect(popover).to_be_hidden()
    markers.nth(0).hover()
    expect(popover.locator(".evidence-check")).to_have_text(
        "12% and $4.1 billion found in its source"
    )
    expect(popover.locator(".evidence-passage")).to_contain_text("rose 12% to $4.1 billion")
    page.mouse.move(0, 0)


def test_a_claim_its_page_never_speaks_of_is_flagged_naming_its_figure_live_and_after_a_reload(
    page, site, analyst, gemini, news
):
    """The page states 12% and $4.1 billion and never mentions margins: the margin claim's card
    says 38% is not found and that no sentence of the page speaks of it; the summary counts the
    two claims apart."""
    news.pages["/2026/11/acme-results"].body = ARTICLE_WITHOUT_MARGINS_HTML
    acme = ["Acme revenue rose 12% to $4.1 billion.", " Gross margin widened to 38%."]
    gemini.queue(stream(*grounded_answer(acme, [(f"{news.url}/2026/11/acme-results", "news")])))
    log_in(page, site)
    page.get_by_label("Agent").first.select_option("gemini")
    page.get_by_role("button", name="New chat").first.click()
    page.wait_for_url("**/chats/*/")
    ask(page, "How did Acme do last quarter?")

    wait_for_answer(page)
    summary = page.locator(".turn .claim-summary")
    expect(summary).to_have_text("Checking 1 source…")
    release(news)
    expect(summary).to_have_text("2 cited claims: 1 figure found, 1 not found.", timeout=20_000)
    for _ in range(2):  # live, then after a reload
        answer = wait_for_answer(page).locator(".answer.cited")
        expect(answer.locator(".claim-summary")).to_have_text(
            "2 cited claims: 1 figure found, 1 not found."
        )
        popover = page.locator(".evidence-popover")
        answer.locator("sup.footnote-ref a").nth(1).hover()
        expect(popover.locator(".evidence-check")).to_have_text("38% not found in its source")
        expect(popover.locator(".evidence-none")).to_have_text(
            "No sentence of the page shares a word with this claim."
        )
        expect(popover.locator(".evidence-passage")).to_have_count(0)
        page.mouse.move(0, 0)
        answer.locator("sup.footnote-ref a").nth(0).hover()
        expect(popover.locator(".evidence-check")).to_have_text(
            "12% and $4.1 billion found in its source"
        )
        page.mouse.move(0, 0)
        page.reload()
    assert page.js_errors == []
