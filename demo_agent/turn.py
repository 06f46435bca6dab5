"""One research turn as a script: the messages to send, in order, and the pauses between them.

The script knows nothing about HTTP, clocks or tokens. The app sends each message, sleeps each
`Pause` (scaled by its pace) and turns `Finished` into the COMPLETE event with a fresh checkpoint
id, so a turn can be stopped between any two steps when the client goes away.
"""

from __future__ import annotations

import random
import re
import secrets
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

import demo_agent.earnings_calendar as earnings_calendar
import demo_agent.narration as narration
from demo_agent.charts import revenue_chart
from demo_agent.compose import Answer, Citation, Claim, Found, compose, nothing_found, pick_claims
from demo_agent.corpus import Company, Corpus, load_corpus
from demo_agent.options import (
    RequestOptions,
    SearchScope,
    answer_shape,
    facts_of,
    structured_output,
)
from demo_agent.question import TOPICS_BY_KEY, Question, Topic, understand
from demo_agent.request import ResearchRequest
from demo_agent.search import SearchIndex, tokenize
from demo_agent.tokens import BranchContext, PastTurn

SEARCH_RESULTS = 6
_CHUNK = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class Pause:
    seconds: float  # at human pace; the app scales it


@dataclass(frozen=True)
class Heartbeat:
    """An SSE comment line, as long-running streams send to keep proxies from timing out."""


@dataclass(frozen=True)
class Finished:
    turn: PastTurn
    consumption: list[dict[str, Any]]


Step = dict[str, Any] | Pause | Heartbeat | Finished


@dataclass(frozen=True)
class Library:
    corpus: Corpus
    index: SearchIndex


@cache
def load_library() -> Library:
    corpus = load_corpus()
    return Library(corpus, SearchIndex(corpus.documents))


@dataclass(frozen=True)
class Effort:
    max_claims: int
    calendar_rows: int | None  # rows of the all-companies calendar; None for all
    understand_step: bool  # a separate "work out the question" plan step
    second_search: bool  # search a second angle (guidance, or risks)
    bullets: bool


EFFORTS = {
    "lite": Effort(
        max_claims=3, calendar_rows=3, understand_step=False, second_search=False, bullets=False
    ),
    "standard": Effort(
        max_claims=6, calendar_rows=None, understand_step=True, second_search=True, bullets=True
    ),
}
CLAIMS_PER_DOCUMENT = 2
SYNONYM_WEIGHT = 0.4
OVERVIEW_WEIGHTS = {"reported": 1.0, "revenue": 1.0, "sale": SYNONYM_WEIGHT}


@dataclass(frozen=True)
class _Call:
    tool: str  # "search" | "earnings_calendar"
    description: str
    query: str = ""
    companies: tuple[Company, ...] = ()
    expansion: tuple[str, ...] = ()


@dataclass
class _Plan:
    """The full plan, resent whole at each change as the protocol requires (docs/PROTOCOL.md,
    "Events")."""

    title: str
    descriptions: list[str]

    def at(self, index: int) -> dict[str, Any]:
        """Return the plan with the steps before `index` done and step `index` under way."""
        return self._message(
            lambda i: "COMPLETED" if i < index else "IN_PROGRESS" if i == index else "NOT_STARTED"
        )

    def finished(self) -> dict[str, Any]:
        return self._message(lambda i: "COMPLETED")

    def _message(self, status: Callable[[int], str]) -> dict[str, Any]:
        steps = [{"description": d, "status": status(i)} for i, d in enumerate(self.descriptions)]
        return {"type": "PLANNING", "plan": {"title": self.title, "steps": steps}}


@dataclass
class _Usage:
    tool_calls: int = 0
    retrieved_chars: int = 0
    written_chars: int = 0


class ResearchTurn:
    """Answer one question from the demo corpus, in the Research Agent's event lifecycle."""

    def __init__(
        self,
        *,
        message: str,
        research_effort: str,
        context: BranchContext,
        library: Library,
        rng: random.Random | None = None,
        charts: bool = False,
        options: RequestOptions | None = None,
    ) -> None:
        self._library = library
        self._charts = charts  # the request asked for charts (python_code_execution)
        self._corpus = library.corpus
        self._options = options or RequestOptions()
        self._scope = SearchScope(self._options, library.corpus)
        self._shape = answer_shape(self._options)
        self._effort = _shaped(EFFORTS[research_effort], self._shape)
        self._context = context
        self._rng = rng or random.Random()
        self._usage = _Usage()
        self.question: Question = understand(
            message, context=context, corpus=library.corpus, vocabulary=library.index.vocabulary
        )

    @classmethod
    def for_request(
        cls, request: ResearchRequest, *, context: BranchContext, library: Library
    ) -> ResearchTurn:
        """The turn that answers a research request; `context` is the branch it continues."""
        return cls(
            message=request.message,
            research_effort=request.research_effort,
            context=context,
            library=library,
            charts=request.charts,
            options=request.options,
        )

    def steps(self) -> Iterator[Step]:
        question, effort = self.question, self._effort
        calls = self._calls()
        descriptions = [call.description for call in calls]
        if effort.understand_step:
            descriptions.insert(0, "Work out what the question is about")
        descriptions.append("Write the answer with a citation for every sentence")
        plan = _Plan(narration.plan_title(question), descriptions)

        yield plan.at(0)
        yield Pause(0.15)
        yield from self._think(narration.understanding(question))
        position = 1 if effort.understand_step else 0
        results: list[tuple[_Call, Any]] = []
        for call in calls:
            if position:
                yield plan.at(position)
                yield Pause(0.1)
            result = yield from (
                self._search(call) if call.tool == "search" else self._calendar(call)
            )
            results.append((call, result))
            position += 1
        yield plan.at(position)

        answer = self._answer(results)
        yield from self._think(narration.before_writing(answer))
        if answer.references:
            yield {"type": "GROUNDING", "references": answer.references}
        yield from self._write(answer.text)
        if self._charts and (chart := self._chart(answer)):
            yield chart
        if self._shape.note:  # after the cited text, so the references' offsets still hold
            yield from self._write(f"\n\n{self._shape.note}")
        if self._options.schema is not None:
            facts = facts_of(answer.documents, self._corpus)
            content = structured_output(self._options.schema, facts, self._corpus)
            yield {"type": "STRUCTURED_OUTPUT", "content": content}
        yield Pause(0.1)
        yield plan.finished()
        yield Finished(question.as_past_turn(), self._consumption())

    # --- Tools ---------------------------------------------------------------------------------

    def _calls(self) -> list[_Call]:
        question, effort = self.question, self._effort
        companies = question.companies
        if question.wants_calendar:
            if not companies:
                if question.unknown_names:
                    return []
                return [
                    _Call("earnings_calendar", "Look up upcoming reports in the earnings calendar")
                ]
            calls = [
                _Call(
                    "earnings_calendar",
                    f"Look up {c.name} in the earnings calendar",
                    companies=(c,),
                )
                for c in companies
            ]
            if effort.second_search:
                guidance = TOPICS_BY_KEY["guidance"]
                calls += [
                    self._search_call(f"{c.name} guidance", (c,), guidance) for c in companies
                ]
            return calls
        focus = question.focus
        if not companies:
            if not question.terms and question.topic is None:
                return []
            calls = [self._search_call(focus, (), question.topic)]
            topic = question.topic
            # A second angle on a market topic ("fed" -> "interest rates"), but only when every
            # word of the question is known: "walmart revenue" must not become "revenue".
            known = all(term in self._library.index.vocabulary for term in question.terms)
            different = topic is not None and topic.label.lower() != focus.lower()
            if effort.second_search and different and topic.macro and known:
                calls.append(self._search_call(topic.label, (), topic))
            return calls
        if len(companies) > 1:
            if not effort.second_search:
                query = f"{question.company_names} {focus}".strip()
                return [self._search_call(query, companies, question.topic)]
            return [
                self._search_call(f"{c.name} {focus}".strip(), (c,), question.topic)
                for c in companies
            ]
        company = companies[0]
        calls = [self._search_call(f"{company.name} {focus}".strip(), companies, question.topic)]
        if effort.second_search:
            angle = TOPICS_BY_KEY[
                "risks" if question.topic is TOPICS_BY_KEY["guidance"] else "guidance"
            ]
            calls.append(self._search_call(f"{company.name} {angle.label}", companies, angle))
        return calls

    @staticmethod
    def _search_call(query: str, companies: tuple[Company, ...], topic: Topic | None) -> _Call:
        expansion = topic.expansion if topic else ()
        return _Call("search", f'Search the demo corpus for "{query}"', query, companies, expansion)

    def _search(self, call: _Call) -> Generator[Step, None, list[Found]]:
        tool_id = _new_id("search")
        yield Heartbeat()
        yield {"type": "ACTION", "tool_name": "search", "tool_arguments": {"query": call.query}}
        yield Pause(self._rng.uniform(0.4, 0.8))
        hits = self._library.index.search(
            tokenize(call.query),
            expansion=call.expansion,
            companies={c.key for c in call.companies},
            limit=SEARCH_RESULTS * 4,
        )
        hits = [hit for hit in hits if self._scope.admits(hit.document)][:SEARCH_RESULTS]
        top = hits[0].score if hits else 1.0
        values = [{**hit.document.source, "relevance": round(hit.score / top, 3)} for hit in hits]
        trace = {
            "audit_type": "SearchAuditV1",
            "tool_id": tool_id,
            "query": {"text": call.query},
            "results": [{"type": "CQS", "values": values}],
        }
        yield {"type": "AUDIT", "audit_traces": [trace]}
        self._usage.tool_calls += 1
        self._usage.retrieved_chars += sum(len(hit.document.text) for hit in hits)
        return [Found(hit.document, tool_id) for hit in hits]

    def _calendar(self, call: _Call) -> Generator[Step, None, list[Claim]]:
        tool_id = _new_id("calendar")
        keys = [c.key for c in call.companies]
        arguments = (
            {"company": call.companies[0].name} if call.companies else {"period": "upcoming"}
        )
        yield Heartbeat()
        yield {
            "type": "ACTION",
            "tool_name": earnings_calendar.TOOL_NAME,
            "tool_arguments": arguments,
        }
        yield Pause(self._rng.uniform(0.25, 0.4))
        entries = earnings_calendar.lookup(self._corpus, keys)
        if not call.companies and self._effort.calendar_rows:
            entries = entries[: self._effort.calendar_rows]
        title = f"Earnings calendar: {arguments.get('company', 'upcoming reports')}"
        trace = earnings_calendar.audit_trace(tool_id, title, entries, self._corpus)
        yield {"type": "AUDIT", "audit_traces": [trace]}
        self._usage.tool_calls += 1
        self._usage.retrieved_chars += len(trace["content"])

        citation = Citation(earnings_calendar.TOOL_NAME, tool_id, None)
        claims = []
        for entry in entries:
            name = self._corpus.company(entry.company).name
            claims.append(Claim(earnings_calendar.report_sentence(entry, name), [citation]))
            if call.companies:
                claims.append(Claim(earnings_calendar.consensus_sentence(entry, name), [citation]))
        return claims

    # --- The answer ----------------------------------------------------------------------------

    def _answer(self, results: list[tuple[_Call, Any]]) -> Answer:
        question = self.question
        calendar_claims = [c for call, r in results if call.tool != "search" for c in r]
        found: dict[str, Found] = {}
        for call, result in results:
            if call.tool == "search":
                for f in result:
                    found.setdefault(f.document.key, f)
        wanted = {c.key for c in question.companies}
        answerable = [f for f in found.values() if not wanted or f.document.company in wanted]

        if question.wants_calendar:
            if not calendar_claims:
                return nothing_found(narration.missing_subject(question), narration.COVERAGE)
            extra = self._guidance_claims(answerable)
            intro = narration.calendar_intro(question)
            return compose(intro, calendar_claims + extra, bullets=self._effort.bullets)
        if not answerable:
            return nothing_found(narration.missing_subject(question), narration.COVERAGE)

        if question.terms or question.topic:
            weights = self._term_weights(question.terms, question.topic)
        else:
            weights = OVERVIEW_WEIGHTS  # "How did NVIDIA do?": lead with the results
        claims, specific = pick_claims(
            answerable,
            weights,
            max_claims=self._effort.max_claims,
            per_document=CLAIMS_PER_DOCUMENT,
            group_by_company=len(question.companies) > 1,
        )
        if len({self._subject_of(c) for c in claims}) > 1:
            for claim in claims:
                claim.label = self._subject_of(claim)
        return compose(narration.intro(question, specific), claims, bullets=self._effort.bullets)

    def _guidance_claims(self, answerable: list[Found]) -> list[Claim]:
        weights = self._term_weights((), TOPICS_BY_KEY["guidance"])
        claims: list[Claim] = []
        for company in self.question.companies:
            own = [f for f in answerable if f.document.company == company.key]
            picked, specific = pick_claims(own, weights, max_claims=1, per_document=1)
            if specific:
                claims += picked
        return claims

    def _term_weights(self, terms: Sequence[str], topic: Topic | None) -> dict[str, float]:
        """Weigh the question's own words over its topic's synonyms; rarity only breaks ties.

        A sentence matching "data center revenue" word for word must beat one that matches
        "data center" and a synonym of revenue, however rare the synonym.
        """
        index = self._library.index
        weights = {term: SYNONYM_WEIGHT for term in (topic.expansion if topic else ())}
        weights.update({term: 1 + index.idf(term) / 10 for term in terms})
        return weights

    def _subject_of(self, claim: Claim) -> str | None:
        """Return who a claim is about: its document's company, or "Markets" for a market piece."""
        key = claim.citations[0].document_key
        document = next((d for d in self._corpus.documents if d.key == key), None)
        if document is None:
            return None
        company = self._corpus.company(document.company) if document.company else None
        return company.name if company else "Markets"

    def _chart(self, answer: Answer) -> dict[str, Any] | None:
        by_key = {d.key: d.company for d in self._corpus.documents}
        cited = [by_key.get(key) for key in answer.documents]
        companies = [c for c in cited if c] or [c.key for c in self.question.companies]
        return revenue_chart(self._corpus, companies, answer.text)

    def _think(self, text: str) -> Iterator[Step]:
        return self._type_out("THINKING", "think", text, words=(3, 6), pause=(0.03, 0.06))

    def _write(self, text: str) -> Iterator[Step]:
        return self._type_out("ANSWER", "answer", text, words=(1, 3), pause=(0.025, 0.06))

    def _type_out(
        self,
        kind: str,
        id_prefix: str,
        text: str,
        *,
        words: tuple[int, int],
        pause: tuple[float, float],
    ) -> Iterator[Step]:
        """One message of `kind`, a few words at a time, each followed by a short random pause."""
        message_id = _new_id(id_prefix)
        self._usage.written_chars += len(text)
        for chunk in _chunks(text, self._rng, *words):
            yield {"type": kind, "message_id": message_id, "content": chunk}
            yield Pause(self._rng.uniform(*pause))

    def _consumption(self) -> list[dict[str, Any]]:
        # Rough figures of the right shape: about four characters per token.
        system_prompt = 2048
        context = self._context
        history_chars = context.question_chars + 200 * context.turns
        input_tokens = (
            system_prompt
            + (len(self.question.text) + history_chars + self._usage.retrieved_chars) // 4
            + 120 * self._usage.tool_calls
        )
        output_tokens = self._usage.written_chars // 4 + 40 * self._usage.tool_calls
        cached = system_prompt if context.turns else 0
        used = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cached_tokens": cached,
        }
        unused = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
        pro = self._options.pro  # the tier that answered reports the tokens
        return [
            {"type": "base", **(unused if pro else used)},
            {"type": "pro", **(used if pro else unused)},
        ]


def _shaped(effort: Effort, shape) -> Effort:
    """Return the effort as the expected output and the model tier adjust it."""
    bullets = effort.bullets if shape.bullets is None else shape.bullets
    max_claims = max(1, effort.max_claims + shape.max_claims_delta)
    return replace(effort, bullets=bullets, max_claims=max_claims)


def _chunks(text: str, rng: random.Random, fewest: int, most: int) -> Iterator[str]:
    """Split text into runs of a few words; joined, they give back the text exactly."""
    pieces = _CHUNK.findall(text)
    while pieces:
        size = rng.randint(fewest, most)
        yield "".join(pieces[:size])
        del pieces[:size]


def _new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"
