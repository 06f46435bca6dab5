"""Every string the chat page shows that is derived from data, written once.

The templates (through `chats_display` filters) and the live event views of `protocol.py` both
call these functions, so a streaming turn and the same turn after a reload read the same:
"in progress", "Searching: X" while it runs and "Searched: X" in its record afterwards.
`chat.js` has no copy of any of these rules; it places what the server sends.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

CHAT_TITLE_MAX_CHARS = 80
UNTITLED_CHAT = "Untitled chat"
DEFAULT_PLAN_TITLE = "Research plan"
SITE_NAME = "ResearchSite"

# The live status line under a streaming answer, by the event that sets it.
THINKING_STATUS = "Thinking…"
WRITING_STATUS = "Writing the answer…"
CITING_STATUS = "Adding citations…"


def chat_title(question: str) -> str:
    """Return the title a chat takes from its first question: one line, at most 80 characters."""
    return " ".join(question.split())[:CHAT_TITLE_MAX_CHARS]


def chat_heading(title: str) -> str:
    return title or UNTITLED_CHAT


def page_title(title: str) -> str:
    """Return the browser tab's title for a chat page."""
    return f"{chat_heading(title)} · {SITE_NAME}"


def plan_title(title: str) -> str:
    return title or DEFAULT_PLAN_TITLE


def step_status_label(status: str) -> str:
    """Return a plan step's status as shown: "IN_PROGRESS" reads "in progress"."""
    return status.replace("_", " ").strip().lower()


def step_status_class(status: str) -> str:
    """Return the CSS class of a plan step: "step-in_progress"."""
    return f"step-{status.strip().lower()}"


def tool_call_label(tool: str, detail: str, *, finished: bool = False) -> str:
    """Return the line for one tool call: "Searching: X" while it runs, "Searched: X" after.

    `tool` is the tool's name ("search", "earnings_calendar"), or "" when only a description is
    known; `detail` is what the call was about (the query, its arguments, a trace's title).
    """
    if tool == "search" and detail:
        return f"{'Searched' if finished else 'Searching'}: {detail}"
    readable = tool.replace("_", " ").strip().capitalize()
    if readable and detail:
        return f"{readable}: {detail}"
    return readable or detail or "A tool call"


def action_label(tool_name: str, arguments: dict[str, Any]) -> str:
    """Return the live line for an ACTION event: "Searching: NVIDIA Q2 FY26 earnings"."""
    query = arguments.get("query") or arguments.get("text")
    if tool_name == "search" and isinstance(query, str):
        return tool_call_label("search", query)
    detail = ", ".join(str(v) for v in arguments.values() if isinstance(v, str | int | float))
    return tool_call_label(tool_name or "Using a tool", detail)


def trace_label(audit_type: str, title: str) -> str:
    """Return the line for a finished tool call, from its audit trace."""
    if audit_type.startswith("Search") and title:
        return tool_call_label("search", title, finished=True)
    return tool_call_label("", title or audit_type, finished=True)


def tool_error_label(tool_name: str, error: str) -> str:
    return f"{tool_name or 'A tool'} failed: {error}"


def llm_retry_label(message: str) -> str:
    return message or "Retrying the language model"


def retry_notice(message: str, delay: float) -> str:
    """Return the notice shown while the agent's request is retried after a refusal."""
    return f"{message} Retrying in {delay:.0f} s."


def page_limits() -> dict[str, int]:
    """Return the limits the page shows or applies, as the server enforces them."""
    return {"message_max_chars": settings.MESSAGE_MAX_CHARS}


def degraded_notice(tool_errors: int) -> str:
    """Return the quiet note on an answer researched with failing tools (TOOL_ERROR)."""
    calls = "call" if tool_errors == 1 else "calls"
    return (
        f"{tool_errors} tool {calls} failed while this answer was researched, so it may be"
        " less complete than usual."
    )


def turn_notices(
    *,
    skipped: list[str],
    skipped_lines: int,
    malformed_lines: int,
    dropped_citations: int,
    citations_past_the_cut: int = 0,
) -> list[str]:
    """Return what of the agent's stream the turn could not show, one sentence each: lines
    over a limit (said by the reader), unreadable lines, citations that could not be read or
    placed, and those of an answer cut short (stopped, interrupted, over a limit) that point
    past where it stops. Stored with the turn, so nothing is lost in silence."""
    notices = list(skipped)
    unreadable = malformed_lines - skipped_lines
    if unreadable > 0:
        lines, verb = ("line", "was") if unreadable == 1 else ("lines", "were")
        notices.append(
            f"{unreadable:,} {lines} of the agent's stream could not be read and {verb} skipped."
        )
    if dropped_citations:
        verb = "was" if dropped_citations == 1 else "were"
        notices.append(
            f"{dropped_citations:,} of the agent's citations {verb} malformed or did not fit"
            " the answer, and not shown."
        )
    if citations_past_the_cut:
        point, verb = ("points", "is") if citations_past_the_cut == 1 else ("point", "are")
        notices.append(
            f"{citations_past_the_cut:,} of the agent's citations {point} past where this"
            f" answer stops, and {verb} not shown."
        )
    return notices


def duration_text(seconds: float) -> str:
    """Return a duration as people say it: "30 minutes", "1 minute", "90 seconds", "1 second"."""
    value, unit = (
        (seconds / 60, "minute") if seconds >= 60 and seconds % 60 == 0 else (seconds, "second")
    )
    return f"{value:g} {unit}{'' if value == 1 else 's'}"
