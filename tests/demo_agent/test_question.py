"""Working out what a question is about, including follow-ups."""

from __future__ import annotations

from demo_agent.question import understand
from demo_agent.tokens import BranchContext, PastTurn
from demo_agent.turn import load_library

LIBRARY = load_library()
AFTER_NVIDIA = BranchContext().after(PastTurn("How did NVIDIA do last quarter?", ("nvidia",), None))


FRESH = BranchContext()


def _understand(text: str, context: BranchContext = FRESH):
    return understand(
        text, context=context, corpus=LIBRARY.corpus, vocabulary=LIBRARY.index.vocabulary
    )


def test_companies_are_found_by_name_ticker_or_product_in_order():
    question = _understand("Compare Google with MSFT and JP Morgan")
    assert [c.key for c in question.companies] == ["alphabet", "microsoft", "jpmorgan"]
    assert not question.carried_over


def test_a_pronoun_refers_to_the_most_recent_company():
    question = _understand("What about its margins?", AFTER_NVIDIA)
    assert [c.key for c in question.companies] == ["nvidia"]
    assert question.carried_over
    assert question.topic.key == "margins"
    assert question.focus == "margins"


def test_a_question_about_something_else_is_not_pinned_to_the_last_company():
    assert _understand("What about inflation?", AFTER_NVIDIA).companies == ()
    walmart = _understand("What about Walmart?", AFTER_NVIDIA)
    assert walmart.companies == ()
    assert walmart.unknown_names == ("Walmart",)


def test_and_another_company_repeats_the_previous_question():
    context = BranchContext().after(
        PastTurn("When does Microsoft report?", ("microsoft",), "calendar")
    )
    question = _understand("And Apple?", context)
    assert [c.key for c in question.companies] == ["apple"]
    assert question.wants_calendar


def test_earnings_calendar_intent():
    assert _understand("When does Tesla report earnings?").wants_calendar
    assert _understand("What is the consensus for Meta?").wants_calendar
    assert not _understand("When did Tesla report earnings?").wants_calendar
    assert not _understand("How were Tesla's earnings?").wants_calendar
