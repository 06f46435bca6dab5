"""Export answers as one Markdown document: each question a heading, each answer its footnotes."""

from __future__ import annotations

from collections.abc import Iterable

from chats.answer.charts import markdown_table, markdown_tables, table_cut_text
from chats.answer.structured_output import structured_table
from chats.models import Turn
from citations.evidence import checks_summary
from citations.pages import page_problem_line
from citations.render import render_markdown
from citations.resolve import CitedAnswer
from citations.selectors import cited_answers_for_turns


def export_turns_markdown(turns: Iterable[Turn]) -> str:
    """Return the turns as Markdown; footnote labels carry the turn id so answers don't collide."""
    turns = list(turns)
    cited = cited_answers_for_turns(turns)
    sections = []
    for turn in turns:
        question = " ".join(turn.question.split()) or "Untitled question"
        answer = render_markdown(cited[turn.pk], label_prefix=f"t{turn.pk}-")
        sections.append(
            f"## {question}\n\n{answer.rstrip() or '_No answer._'}\n{_checks(cited[turn.pk])}"
            + _charts(turn)
            + _structured_output(turn)
        )
    return "\n".join(sections)


def _charts(turn: Turn) -> str:
    """Each chart as its title, caption and data table (a drawing does not survive Markdown)."""
    return f"\n{markdown_tables(turn.charts)}\n" if turn.charts else ""


def _structured_output(turn: Turn) -> str:
    table = structured_table(turn.structured_output)
    if not table:
        return ""
    columns, rows = table["columns"], table["rows"]
    cut = table_cut_text(table)
    return f"\n**Structured output**\n\n{markdown_table(columns, rows)}\n" + (
        f"\n_{cut}_\n" if cut else ""
    )


def _checks(cited: CitedAnswer) -> str:
    """Return the figure check as a quoted note under the answer: the summary, each claim's
    state (the names the JSON export carries) and why, and each page not read; "" when nothing
    is cited."""
    summary = checks_summary(cited)
    if not summary:
        return ""
    lines = [f"> Figure check: {summary}{'' if summary.endswith('…') else '.'}"]
    for claim in cited.claims:
        if claim.check is not None and not summary.endswith("…"):
            text = " ".join(cited.answer[claim.start : claim.end].split())
            why = f" ({claim.check.message})" if claim.check.message else ""
            lines.append(f"> - {claim.check.status}: “{text}”{why}")
    for source in cited.sources:
        read = cited.pages.get(source.key)
        if read is not None and read.problem:
            lines.append(f"> - [{source.number}] {page_problem_line(read.problem)}")
    return "\n" + "\n".join(lines) + "\n"
