"""The `earnings_calendar` tool: next report dates and consensus figures from the bundled table.

Its citations are tool-level (docs/PROTOCOL.md, "GROUNDING"): `source` is null and `audit_id` names
the MarkdownAuditV1 trace, whose `content` holds every sentence the answer may quote from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from demo_agent.corpus import CalendarEntry, Corpus

TOOL_NAME = "earnings_calendar"


def report_sentence(entry: CalendarEntry, name: str) -> str:
    when = date.fromisoformat(entry.date)
    day = f"{when:%B} {when.day}, {when.year}"
    return f"{name} is scheduled to report {entry.period} results on {day}, {entry.timing}."


def consensus_sentence(entry: CalendarEntry, name: str) -> str:
    return (
        f"The consensus estimate for {name} is revenue of {entry.consensus_revenue} "
        f"and earnings per share of {entry.consensus_eps}."
    )


def lookup(corpus: Corpus, company_keys: Sequence[str]) -> list[CalendarEntry]:
    """Return the entries for the companies, or every upcoming report, soonest first."""
    if company_keys:
        return [e for key in company_keys if (e := corpus.calendar_entry(key)) is not None]
    return sorted(corpus.calendar, key=lambda entry: (entry.date, entry.company))


def audit_trace(tool_id: str, title: str, entries: Sequence[CalendarEntry], corpus: Corpus) -> dict:
    """Return the MarkdownAuditV1 trace: the table rows, then the sentences they support."""
    rows = ["| Company | Period | Report date | Timing | Consensus revenue | Consensus EPS |"]
    rows.append("|---|---|---|---|---|---|")
    sentences = []
    for entry in entries:
        name = _name(corpus, entry)
        rows.append(
            f"| {name} | {entry.period} | {entry.date} | {entry.timing} "
            f"| {entry.consensus_revenue} | {entry.consensus_eps} |"
        )
        sentences.append(f"{report_sentence(entry, name)} {consensus_sentence(entry, name)}")
    content = "\n".join(rows) + "\n\n" + "\n".join(sentences)
    return {"audit_type": "MarkdownAuditV1", "tool_id": tool_id, "title": title, "content": content}


def _name(corpus: Corpus, entry: CalendarEntry) -> str:
    company = corpus.company(entry.company)
    return company.name if company else entry.company
