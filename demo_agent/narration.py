"""What the agent says around the facts: plan titles, intros, its thinking, "nothing found".

None of it is a claim, so none of it is cited; the claims come from compose.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from demo_agent.compose import Answer
from demo_agent.question import Question

COVERAGE = (
    "It covers NVIDIA, Microsoft, Apple, Amazon, Alphabet, Tesla, Meta and JPMorgan Chase, "
    "plus a few market topics such as interest rates, inflation and semiconductors."
)


def plan_title(question: Question) -> str:
    """Return the PLANNING title."""
    if question.wants_calendar:
        names = question.company_names if question.companies else "upcoming reports"
        return f"Earnings calendar: {names}"
    return f"Research: {about(question)}"


def about(question: Question) -> str:
    """Return what the question is about: "NVIDIA's margins", "inflation"."""
    if not question.companies:
        return question.focus or "your question"
    if not question.focus:
        return question.company_names
    if len(question.companies) == 1:
        return f"{question.company_names}'s {question.focus}"
    return f"{question.company_names} on {question.focus}"


def intro(question: Question, specific: bool) -> str:
    """Return the answer's first line, which frames the cited sentences below it."""
    if question.companies and question.focus and not specific:
        names = question.company_names
        text = (
            f"the demo corpus has nothing specific on {question.focus} for {names}; "
            f"here is what it says about {names} in general:"
        )
    else:
        text = f"here is what the demo corpus says about {about(question)}:"
    if question.unknown_names and question.companies:
        return f"The demo corpus has nothing on {_join(question.unknown_names)}; {text}"
    return text[0].upper() + text[1:]


def calendar_intro(question: Question) -> str:
    """Return the first line of an earnings calendar answer."""
    if question.companies:
        return f"Here is what the demo earnings calendar says about {question.company_names}:"
    return "Here are the next scheduled reports in the demo earnings calendar:"


def missing_subject(question: Question) -> str:
    """Return what to name in "I found nothing in the demo corpus about ..."."""
    if question.unknown_names:
        return _join(question.unknown_names)
    return question.focus or "that"


# --- Thinking ---------------------------------------------------------------------------------


def understanding(question: Question) -> str:
    """Return the first THINKING block: how the question was read."""
    parts = []
    if question.carried_over:
        parts.append(
            f"The question does not name a company, so I read it as being about "
            f"{question.company_names}, from earlier in this conversation."
        )
    elif question.companies:
        parts.append(f"The question is about {about(question)}.")
    if question.unknown_names:
        parts.append(
            f"I do not recognise {_join(question.unknown_names)} among the companies "
            f"and topics of the demo corpus."
        )
    if question.wants_calendar:
        parts.append("This is an earnings calendar question, so I will look up report dates.")
    elif question.companies:
        parts.append("I will search the demo corpus for recent reporting on this.")
    elif question.terms or question.topic:
        parts.append(
            f"It names no company, so I will search the whole demo corpus for {question.focus}."
        )
    else:
        parts.append("I cannot tell what to search for.")
    return " ".join(parts)


def before_writing(answer: Answer) -> str:
    """Return the last THINKING block, before the answer."""
    if not answer.references:
        return "Nothing I found answers this, so I will say so plainly."
    sources = []
    if documents := len(answer.documents):
        sources.append(f"{documents} document{'s' if documents > 1 else ''}")
    if any(reference["source"] is None for reference in answer.references):
        sources.append("the earnings calendar")
    return f"I will answer with sentences taken from {' and '.join(sources)}, and cite each one."


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
