"""Work out what a question is about: companies, topic, earnings-calendar intent, follow-ups.

A question that names no company inherits the most recent companies of its branch ("what about
its margins?" after a question on NVIDIA is about NVIDIA), and an elliptical "And Apple?" inherits
the previous topic. The branch's context comes from the checkpoint, never from process state.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from demo_agent.corpus import Company, Corpus
from demo_agent.search import stem, words
from demo_agent.tokens import BranchContext, PastTurn


@dataclass(frozen=True)
class Topic:
    key: str
    label: str
    keywords: frozenset[str]  # stems that signal the topic in a question
    expansion: tuple[str, ...]  # stems that signal it in a document sentence
    macro: bool = False  # a market-wide topic: a question about it is not about the last company


def _topic(key: str, label: str, keywords: str, expansion: str = "", macro: bool = False) -> Topic:
    return Topic(
        key=key,
        label=label,
        keywords=frozenset(stem(w) for w in keywords.split()),
        expansion=tuple(stem(w) for w in expansion.split()),
        macro=macro,
    )


CALENDAR = _topic("calendar", "earnings date", "calendar")
TOPICS = (
    CALENDAR,
    _topic(
        "margins", "margins", "margin profitability profitable profit", "margin gross operating"
    ),
    _topic(
        "guidance", "guidance", "guidance outlook forecast guide expect", "expects guided forecast"
    ),
    _topic("revenue", "revenue", "revenue sales grow growth result", "revenue sales"),
    _topic(
        "regulation",
        "legal and regulatory issues",
        "regulation regulatory regulator antitrust lawsuit probe court legal fine",
        "regulators review lawsuit antitrust court fined appeal",
    ),
    _topic(
        "risks",
        "risks",
        "risk headwind threat concern worry",
        "risk warned restrictions review pressure hurt weigh",
    ),
    _topic("ai", "AI", "ai artificial intelligence gpu", "ai artificial intelligence"),
    _topic("cloud", "cloud", "cloud", "cloud"),
    _topic(
        "capex",
        "capital spending",
        "capex spending investment expenditure infrastructure",
        "capital expenditures data centers",
    ),
    _topic("returns", "shareholder returns", "buyback dividend repurchase", "dividend buybacks"),
    _topic("rates", "interest rates", "fed federal reserve rate interest", "rate", macro=True),
    _topic("inflation", "inflation", "inflation cpi price", "inflation prices", macro=True),
    _topic("semiconductors", "semiconductors", "semiconductor chip", "semiconductor", macro=True),
    _topic("consumer", "consumer spending", "consumer holiday retail shopper", "sales", macro=True),
    _topic("banks", "banks", "bank banking lending", "banks", macro=True),
    _topic("energy", "energy prices", "oil crude energy", "oil", macro=True),
)
TOPICS_BY_KEY = {topic.key: topic for topic in TOPICS}


def _word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _word_set(
    """a about after again all also am an and any are as at be been before being between both but
    by can could describe did do does doing done explain for from get give go going had has have
    how i in is it its itself just latest let like list me more most much my new news next now of
    on or our please recent recently say said says should show so some summarise summarize summary
    tell than that the their them then there these they this those to up update us was we were
    what when where which who why will with would you your compare versus vs overview happening
    last quarter company firm stock face faces facing problem problems issue issues well"""
)
# Words that make a question refer back to something said earlier.
PRONOUNS = _word_set("it its they them their theirs company firm stock")
# Queries and headings quote at most this many words of the question.
MAX_FOCUS_WORDS = 8
FOLLOW_UP_OPENERS = ("and ", "what about", "how about", "same for", "now ")


@dataclass(frozen=True)
class Question:
    text: str
    companies: tuple[Company, ...]
    carried_over: bool  # the companies come from earlier in the branch, not from this question
    topic: Topic | None
    terms: tuple[str, ...]  # content stems, company names excluded
    focus_words: tuple[str, ...]  # the same words as written, for queries and headings
    unknown_names: tuple[str, ...]  # capitalised names the corpus has never heard of
    wants_calendar: bool

    @property
    def focus(self) -> str:
        """What the question asks about the companies, in a few words."""
        topic = self.topic
        if topic is not None and set(self.terms) <= topic.keywords:
            return topic.label  # "regulatory" reads better as "legal and regulatory issues"
        return " ".join(self.focus_words[:MAX_FOCUS_WORDS])

    @property
    def company_names(self) -> str:
        """Return the companies as a phrase: "Microsoft and Alphabet"."""
        names = [c.name for c in self.companies]
        return " and ".join(filter(None, [", ".join(names[:-1]), *names[-1:]]))

    def as_past_turn(self) -> PastTurn:
        return PastTurn(
            question=self.text,
            companies=tuple(c.key for c in self.companies),
            topic=self.topic.key if self.topic else None,
        )


def understand(
    text: str, *, context: BranchContext, corpus: Corpus, vocabulary: Collection[str]
) -> Question:
    """Return what the question asks, resolved against the branch's earlier turns."""
    written = words(text)
    lowered = [w.lower() for w in written]
    companies, company_positions = _find_companies(lowered, corpus)
    content = [
        (word, stem(word))
        for position, word in enumerate(written)
        if position not in company_positions and word.lower() not in STOPWORDS
    ]
    stems = {s for _, s in content}
    unknown_names = tuple(word for word, s in content if word[:1].isupper() and s not in vocabulary)
    if companies:
        # "Compare NVIDIA with AMD" is about NVIDIA; AMD is reported as missing, not searched.
        content = [(w, s) for w, s in content if w not in unknown_names]
    wants_calendar = _asks_for_calendar(set(lowered) | stems)
    topic = CALENDAR if wants_calendar else _find_topic(stems)
    if wants_calendar:
        content = [(w, s) for w, s in content if s not in _CALENDAR_WORDS]

    carried_over = False
    if not companies and context.companies:
        refers_back = any(w in PRONOUNS for w in lowered)
        about_something_else = bool(unknown_names) or any(s not in vocabulary for _, s in content)
        if refers_back or not (about_something_else or (topic is not None and topic.macro)):
            companies = tuple(c for key in context.companies if (c := corpus.company(key)))
            carried_over = bool(companies)
    elif companies and not content and context.turns and not wants_calendar:
        # "And Apple?" asks the previous question again about another company.
        previous = context.topic
        if text.strip().lower().startswith(FOLLOW_UP_OPENERS) and previous in TOPICS_BY_KEY:
            topic = TOPICS_BY_KEY[previous]
            wants_calendar = topic is CALENDAR

    return Question(
        text=text,
        companies=companies,
        carried_over=carried_over,
        topic=topic,
        terms=tuple(dict.fromkeys(s for _, s in content)),
        focus_words=tuple(dict.fromkeys(w for w, _ in content)),
        unknown_names=unknown_names,
        wants_calendar=wants_calendar,
    )


_CALENDAR_WORDS = frozenset(
    map(stem, _word_set("calendar consensus earnings report reporting date scheduled results"))
)


def _asks_for_calendar(terms: set[str]) -> bool:
    if "did" in terms:  # "when did it report?" asks about the past
        return False
    return bool(
        terms & {"calendar", "consensus", "scheduled"}
        or ("when" in terms and terms & {"report", "reporting", "earning", "result"})
        or ("next" in terms and terms & {"report", "earning", "result"})
        or ({"earning", "date"} <= terms)
    )


def _find_companies(lowered: list[str], corpus: Corpus) -> tuple[tuple[Company, ...], set[int]]:
    """Return the companies named, in order of first mention, and the word positions used."""
    found: dict[str, tuple[int, Company]] = {}
    positions: set[int] = set()
    for company in corpus.companies:
        for alias in company.aliases:
            alias_words = alias.split()
            size = len(alias_words)
            for start in range(len(lowered) - size + 1):
                if lowered[start : start + size] == alias_words:
                    positions.update(range(start, start + size))
                    if company.key not in found or start < found[company.key][0]:
                        found[company.key] = (start, company)
    ordered = sorted(found.values(), key=lambda item: item[0])
    return tuple(company for _, company in ordered), positions


def _find_topic(stems: set[str]) -> Topic | None:
    best = max(TOPICS, key=lambda topic: len(topic.keywords & stems))
    return best if best.keywords & stems else None
