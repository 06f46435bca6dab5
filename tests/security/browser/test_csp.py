"""The Content-Security-Policy in real Chromium: the chat streams, tables align, admin works."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from chats.models import Chat, Turn
from tests.browser.conftest import ask, log_in, new_chat, wait_for_answer

pytestmark = pytest.mark.browser

TABLE = (
    '<table><thead><tr><th>Quarter</th><th style="text-align:right">Revenue</th></tr></thead>'
    '<tbody><tr><td>Q2</td><td style="text-align:right" id="aligned">46.7</td></tr>'
    '<tr><td style="color:rgb(255, 0, 0)" id="injected">red?</td><td>0</td></tr></tbody></table>'
)


@pytest.fixture
def violations(page):
    """CSP violations Chromium reports on the page's console."""
    seen: list[str] = []
    page.on(
        "console",
        lambda message: (
            seen.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return seen


def test_the_chat_page_connects_and_streams_under_the_policy(page, site, analyst, violations):
    response = page.goto(f"{site}/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    log_in(page, site)
    new_chat(page)
    ask(page, "How did NVIDIA's data center business do?")
    # The question goes out and the answer comes back only over the websocket (no reload).
    answer = wait_for_answer(page)
    expect(answer.locator(".answer.cited")).to_contain_text("NVIDIA")
    assert violations == []
    assert page.js_errors == []


def test_table_alignment_is_allowed_and_any_other_inline_style_is_not(
    page, site, analyst, violations
):
    chat = Chat.objects.create(owner=analyst, title="Table")
    turn = Turn.objects.create(
        chat=chat, question="Revenue?", status="complete", answer_text="t", answer_html=TABLE
    )
    chat.active_turn = turn
    chat.save()
    log_in(page, site)
    page.goto(f"{site}/chats/{chat.pk}/")

    aligned = page.locator("#aligned")
    expect(aligned).to_have_css("text-align", "right")
    expect(page.locator("#injected")).not_to_have_css("color", "rgb(255, 0, 0)")
    assert any("style" in text for text in violations)  # the injected one, and only it
    assert all("color" not in text or "style-src-attr" in text for text in violations)


def test_the_admin_works_under_the_policy(page, site, violations, django_user_model):
    django_user_model.objects.create_superuser("boss", password="boss-pass-77")
    log_in(page, site, "boss", "boss-pass-77")
    page.goto(f"{site}/admin/chats/turn/")
    expect(page.locator("#changelist")).to_be_visible()
    page.locator("#toggle-nav-sidebar").click()  # the admin's own script runs
    expect(page.locator("#nav-sidebar")).to_be_hidden()
    page.goto(f"{site}/admin/auth/user/add/")
    expect(page.locator("input[name=username]")).to_be_visible()
    assert violations == []
    assert page.js_errors == []
