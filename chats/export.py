"""Export answers as one Markdown document: each question a heading, each answer its footnotes."""

from __future__ import annotations

from collections.abc import Iterable

from citations.render import render_markdown
from citations.selectors import cited_answers_for_turns

from .models import Turn


def export_turns_markdown(turns: Iterable[Turn]) -> str:
    """Return the turns as Markdown; footnote labels carry the turn id so answers don't collide."""
    turns = list(turns)
    cited = cited_answers_for_turns(turns)
    sections = []
    for turn in turns:
        question = " ".join(turn.question.split()) or "Untitled question"
        answer = render_markdown(cited[turn.pk], label_prefix=f"t{turn.pk}-")
        sections.append(f"## {question}\n\n{answer.rstrip() or '_No answer._'}\n")
    return "\n".join(sections)
