"""Display strings: one rule each, shared by the live frames and the templates."""

from __future__ import annotations

import pytest

from chats.answer import display


def test_a_chat_is_titled_after_its_first_question_on_one_line():
    assert display.chat_title("  How did\nNVIDIA   do?  ") == "How did NVIDIA do?"
    assert display.chat_title("x" * 200) == "x" * 80
    assert display.chat_heading("") == "Untitled chat"
    assert display.page_title("Q") == "Q · ResearchSite"


@pytest.mark.parametrize(
    ("status", "label", "css"),
    [
        ("IN_PROGRESS", "in progress", "step-in_progress"),
        ("COMPLETED", "completed", "step-completed"),
        ("", "", "step-"),
    ],
)
def test_plan_step_statuses(status, label, css):
    assert display.step_status_label(status) == label
    assert display.step_status_class(status) == css


def test_a_tool_call_reads_in_the_present_while_running_and_the_past_after():
    assert (
        display.action_label("search", {"query": "NVIDIA margins"}) == "Searching: NVIDIA margins"
    )
    assert display.trace_label("SearchAuditV1", "NVIDIA margins") == "Searched: NVIDIA margins"
    assert display.action_label("earnings_calendar", {"ticker": "NVDA", "n": 2}) == (
        "Earnings calendar: NVDA, 2"
    )
    assert display.action_label("", {}) == "Using a tool"
    assert display.trace_label("MarkdownAuditV1", "Earnings calendar") == "Earnings calendar"
    assert display.trace_label("MarkdownAuditV1", "") == "MarkdownAuditV1"
    assert display.trace_label("", "") == "A tool call"


def test_notices_and_limits(settings):
    assert display.retry_notice("The agent is busy.", 2.4) == "The agent is busy. Retrying in 2 s."
    settings.MESSAGE_MAX_CHARS = 123
    assert display.page_limits() == {"message_max_chars": 123}
