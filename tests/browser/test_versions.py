"""Re-run an answer, compare the two versions, and watch the question, in real Chromium."""

from __future__ import annotations

import re

from django.core.management import call_command
from playwright.sync_api import expect

from demo_agent.scripted import Reply, cited_answer_stream
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer

FIRST = [("Revenue rose 12% to $4.1 billion.", "Reuters"), ("Demand was strong.", "Bloomberg")]
SECOND = [("Revenue rose 14% to $4.2 billion.", "Reuters"), ("Demand was strong.", "Nikkei")]


def test_rerun_then_compare_shows_what_changed(page, site, analyst, upstream):
    upstream.queue(
        Reply.events(*cited_answer_stream(FIRST), pause=0.05),
        Reply.events(*cited_answer_stream(SECOND), pause=0.05),
    )
    log_in(page, site)
    new_chat(page)
    ask(page, "How did revenue do?")
    first = wait_for_answer(page)
    expect(first.locator(".answer.cited")).to_contain_text("12%")
    expect(first.get_by_role("link", name="Compare")).to_have_count(0)  # one version only

    first.get_by_role("button", name="Re-run").click()
    rerun = page.locator(".turn").first
    expect(rerun.locator(".answer.cited")).to_contain_text("14%")  # streamed in live
    expect(page.locator(".turn")).to_have_count(1)
    expect(rerun.locator(".branch-position")).to_have_text("2 / 2")
    expect(rerun.locator(".question-text")).to_have_text("How did revenue do?")

    rerun.get_by_role("link", name="Compare").click()
    page.wait_for_url(re.compile(r".*/compare/$"))
    expect(page.locator(".compare-summary")).to_contain_text(
        "2 figures changed, 1 source added, 1 dropped"
    )
    figures = page.locator(".compare-figures li")
    expect(figures.nth(0)).to_contain_text("12% → 14%")
    expect(figures.nth(1)).to_contain_text("$4.1 billion → $4.2 billion")
    expect(page.locator(".source-added")).to_have_text("Added: Nikkei - 2026-04-15")
    expect(page.locator(".source-dropped")).to_have_text("Dropped: Bloomberg - 2026-04-15")
    expect(page.locator(".compare-text ins").first).to_have_text("14% ")
    expect(page.locator(".compare-text del").first).to_have_text("12% ")

    # Both versions are choosable: comparing the newer with the older reverses the arrows.
    page.get_by_label("Older").select_option(index=1)
    page.get_by_label("Newer").select_option(index=0)
    page.get_by_role("button", name="Compare").click()
    expect(page.locator(".compare-figures li").first).to_contain_text("14% → 12%")
    assert page.js_errors == []


def test_watch_a_question_and_see_its_change_in_the_header(page, site, analyst, upstream):
    upstream.queue(
        Reply.events(*cited_answer_stream(FIRST)), Reply.events(*cited_answer_stream(SECOND))
    )
    log_in(page, site)
    new_chat(page)
    ask(page, "How did revenue do?")
    wait_for_answer(page).get_by_role("link", name="Watch").click()
    page.get_by_label("Every").select_option("week")
    page.get_by_label("Time of day").fill("08:15")
    page.get_by_role("button", name="Watch").click()
    page.wait_for_url(re.compile(r".*/changes/$"))
    expect(page.locator(".watch-item")).to_contain_text("Every week on Monday at 08:15")
    expect(page.locator(".changes-link")).to_have_text("Changes")

    call_command("run_watches", "--all")
    page.goto(f"{site}/")
    expect(page.locator(".changes-link")).to_have_text("Changes 1")
    page.locator(".changes-link").click()
    item = page.locator(".watch-item")
    expect(item).to_contain_text("2 figures changed, 1 source added, 1 dropped")
    expect(item).to_contain_text("12% → 14%, $4.1 billion → $4.2 billion")
    item.get_by_role("link", name="Compare").click()
    expect(page.locator(".compare-figures li").first).to_contain_text("12% → 14%")
    expect(page.locator(".changes-link")).to_have_text("Changes")  # seen
    assert page.js_errors == []


def test_a_refused_rerun_says_why_and_gives_its_button_back(
    page, site, analyst, upstream, settings
):
    upstream.queue(Reply.events(*cited_answer_stream(FIRST)))
    log_in(page, site)
    new_chat(page)
    ask(page, "How did revenue do?")
    answer = wait_for_answer(page)
    settings.AGENT_MAX_CONCURRENT_TURNS = 0  # any new answer is refused
    answer.get_by_role("button", name="Re-run").click()
    expect(page.locator("#connection")).to_contain_text("answers being written")
    expect(answer.get_by_role("button", name="Re-run")).to_be_enabled()
    assert len(upstream.requests) == 1  # the first answer only
