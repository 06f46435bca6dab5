"""A reviewer in real Chromium: open a turn, read its cited answer, follow a source, export."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from chats.models import Chat, Turn
from chats.run.finishes import finish_turn
from tests.browser.conftest import log_in
from tests.conftest import REVIEWER_PASSWORD


@pytest.fixture
def answered_turn(analyst, stream_fixtures_dir):
    """A turn finished by the real pipeline from a captured stream."""
    events, _ = parse_sse_text(
        (stream_fixtures_dir / "lifecycle.sse").read_text(), BigdataAdapter()
    )
    chat = Chat.objects.create(owner=analyst, title="NVIDIA earnings")
    # Leased, as a running turn is: the live site's heartbeat sweeps streaming turns without one
    # as orphans, and it may run between these two lines.
    turn = Turn.objects.create(
        chat=chat,
        question="How did NVIDIA do in Q2 FY26?",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    return finish_turn(
        turn_id=turn.pk, transcript=Transcript.from_events(events), status="complete"
    )


def test_a_reviewer_traces_an_answer_to_its_sources_and_exports_it(
    page, site, reviewer, answered_turn
):
    log_in(page, site, "reviewer", REVIEWER_PASSWORD)
    page.goto(f"{site}/admin/chats/turn/")
    page.get_by_role("link", name=re.compile("How did NVIDIA do")).click()

    answer = page.locator(".answer, .cited-answer").first
    expect(answer).to_contain_text("NVIDIA's gross margin was 72.4% in Q2 FY26.")
    expect(answer.locator("sup a").first).to_be_visible()
    expect(answer.get_by_role("heading", name="Sources")).to_be_visible()
    expect(answer.get_by_role("link", name="SEC EDGAR - 2026-04-15")).to_have_attribute(
        "href", "https://www.sec.gov/example-10q"
    )
    expect(page.get_by_text("audit-42").first).to_be_visible()  # the tool call behind a reference

    page.get_by_role("link", name="SEC EDGAR - 2026-04-15").last.click()  # the source's admin page
    expect(page.locator("h1, h2").filter(has_text=re.compile("source", re.I)).first).to_be_visible()
    page.get_by_role("link", name=re.compile(r"1 answer")).click()  # "cited by"
    expect(page).to_have_url(re.compile(r"/admin/chats/turn/\?cites=\d+"))
    expect(page.get_by_role("link", name=re.compile("How did NVIDIA do"))).to_be_visible()

    page.locator("input.action-select").first.check()
    page.locator("select[name=action]").select_option("export_markdown")
    with page.expect_download() as download_info:
        page.get_by_role("button", name="Go").click()
    markdown = Path(download_info.value.path()).read_text()
    assert "How did NVIDIA do in Q2 FY26?" in markdown
    assert "https://www.sec.gov/example-10q" in markdown
    assert "[^" in markdown


def test_a_non_staff_user_is_refused(page, site, analyst, answered_turn):
    log_in(page, site)
    page.goto(f"{site}/admin/chats/turn/{answered_turn.pk}/change/")
    expect(page).to_have_url(re.compile(r"/admin/login/"))
    expect(page.get_by_text("NVIDIA's gross margin")).to_have_count(0)
