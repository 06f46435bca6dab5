"""The demo agent over real HTTP: wire protocol, grounding, continuity, errors, disconnects."""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass
from http import HTTPStatus
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from chats.agent.events import AgentEvent
from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from demo_agent import DemoAgentApp, conversation
from demo_agent import app as demo_agent_app
from demo_agent.corpus import Document, load_corpus, split_sentences
from demo_agent.wire import MAX_BODY_BYTES
from tests.servers import serve_asgi
from tests.waiting import wait_until_sync

from .conftest import SECRET

CORPUS = load_corpus()
DOCUMENTS_BY_KEY = {d.key: d for d in CORPUS.documents}
PLAN_STATUSES = {"NOT_STARTED", "IN_PROGRESS", "COMPLETED"}


@dataclass(frozen=True)
class WireEvent:
    """One message as the demo agent wrote it (these tests check its wire format)."""

    type: str
    chat_id: str | None
    message_id: str | None
    data: dict[str, Any]

    @classmethod
    def of(cls, event: AgentEvent) -> WireEvent:
        envelope = json.loads(event.raw)
        message = envelope["message"]
        return cls(message["type"], envelope.get("chat_id"), message.get("message_id"), message)


@dataclass
class Reply:
    raw: str
    events: list[WireEvent]
    transcript: Transcript

    @property
    def references(self) -> list[Any]:
        return [r for e in self.events if e.type == "GROUNDING" for r in e.data["references"]]

    @property
    def audit_traces(self) -> list[Any]:
        return [t for e in self.events if e.type == "AUDIT" for t in e.data["audit_traces"]]

    @property
    def types(self) -> list[str]:
        return [e.type for e in self.events]

    @property
    def chat_id(self) -> str:
        return self.events[0].chat_id

    def cited_documents(self) -> list[Document]:
        return [_document(r["source"]) for r in self.references if r["source"]]

    def cited_companies(self) -> set[str | None]:
        return {d.company for d in self.cited_documents()}


def post(url: str, body: Any = None, **kwargs: Any) -> httpx.Response:
    headers = {"X-API-KEY": "not-a-real-key"}
    return httpx.post(url, json=body, headers=headers, timeout=30, **kwargs)


def ask(url: str, message: str, effort: str = "standard", **fields: Any) -> Reply:
    response = post(url, {"message": message, "research_effort": effort, **fields})
    assert response.status_code == HTTPStatus.OK, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    events, malformed = parse_sse_text(response.text, BigdataAdapter())
    assert malformed == 0
    reply = Reply(response.text, [WireEvent.of(e) for e in events], Transcript.from_events(events))
    assert reply.transcript.completed
    return reply


def _document(source: dict[str, Any]) -> Document:
    return DOCUMENTS_BY_KEY[source.get("id") or source["action"]["url"]]


def assert_grounding_is_exact(reply: Reply) -> None:
    """Each span is in range and quotes, verbatim, the document or tool output it cites."""
    answer = reply.transcript.answer
    traces = {t["tool_id"]: t for t in reply.audit_traces}
    assert reply.references
    for reference in reply.references:
        start, end = reference["start"], reference["end"]
        assert 0 <= start < end <= len(answer)
        span = answer[start:end]
        trace = traces[reference["audit_id"]]
        if reference["tool_name"] == "search":
            assert trace["audit_type"] == "SearchAuditV1"
            assert span in _document(reference["source"]).text
            listed = {v.get("id") or v["action"]["url"] for v in trace["results"][0]["values"]}
            assert _document(reference["source"]).key in listed
        else:
            assert reference["tool_name"] == "earnings_calendar"
            assert reference["source"] is None
            assert trace["audit_type"] == "MarkdownAuditV1"
            assert span in trace["content"]


def claim_sentences(answer: str) -> list[tuple[int, int]]:
    """Return the (start, end) of every sentence after the intro line, bullets and labels aside."""
    spans = []
    offset = answer.index("\n")  # the first line introduces the answer
    for line in answer[offset:].split("\n"):
        body = re.sub(r"^- (\*\*[^*]+:\*\* )?", "", line)
        position = answer.index(line, offset) + len(line) - len(body)
        for sentence in split_sentences(body):
            start = answer.index(sentence, position)
            spans.append((start, start + len(sentence)))
            position = start + len(sentence)
        offset += len(line) + 1
    return spans


def assert_every_sentence_grounded(reply: Reply) -> None:
    answer = reply.transcript.answer
    spans = {(r["start"], r["end"]) for r in reply.references}
    sentences = claim_sentences(answer)
    assert sentences
    for start, end in sentences:
        assert (start, end) in spans, f"ungrounded: {answer[start:end]!r}"


# --- The stream ------------------------------------------------------------------------------


def test_lifecycle_follows_the_documented_order(agent_url):
    reply = ask(agent_url, "How did NVIDIA do last quarter?")
    types = reply.types

    assert types[0] == "PLANNING"
    assert types[-1] == "COMPLETE"
    answers = [i for i, t in enumerate(types) if t == "ANSWER"]
    assert answers == list(range(answers[0], answers[-1] + 1)), "ANSWER chunks are contiguous"
    assert max(i for i, t in enumerate(types) if t == "GROUNDING") < answers[0]
    for kind in ("THINKING", "ACTION", "AUDIT"):
        assert max(i for i, t in enumerate(types) if t == kind) < answers[0]
    tools = [t for t in types if t in ("ACTION", "AUDIT")]
    assert tools == ["ACTION", "AUDIT"] * (len(tools) // 2)
    assert {e.chat_id for e in reply.events} == {reply.chat_id}
    assert reply.chat_id.startswith("chat_")


def test_each_event_is_one_data_line_with_heartbeats_between(agent_url):
    reply = ask(agent_url, "How did NVIDIA do last quarter?")
    blocks = reply.raw.split("\n\n")
    assert blocks[-1] == ""
    assert all(b.startswith("data: {") or b == ": keep-alive" for b in blocks[:-1])
    assert ": keep-alive" in blocks
    assert sum(b.startswith("data: ") for b in blocks) == len(reply.events)


def test_plan_is_resent_whole_as_steps_progress(agent_url):
    reply = ask(agent_url, "How did NVIDIA do last quarter?")
    plans = [e.data["plan"] for e in reply.events if e.type == "PLANNING"]
    assert len(plans) >= 3
    assert len({len(p["steps"]) for p in plans}) == 1
    for plan in plans:
        assert plan["title"]
        assert {s["status"] for s in plan["steps"]} <= PLAN_STATUSES
    assert [s["status"] for s in plans[0]["steps"]][:2] == ["IN_PROGRESS", "NOT_STARTED"]
    assert any("IN_PROGRESS" in {s["status"] for s in p["steps"]} for p in plans[1:-1])
    assert {s["status"] for s in reply.transcript.plan["steps"]} == {"COMPLETED"}


def test_chunks_share_message_ids_and_answer_arrives_a_few_words_at_a_time(agent_url):
    reply = ask(agent_url, "How did NVIDIA do last quarter?")
    answers = [e for e in reply.events if e.type == "ANSWER"]
    assert len({e.message_id for e in answers}) == 1
    assert len(answers) > 20
    assert all(1 <= len(e.data["content"].split()) <= 3 for e in answers)
    thinking = [e for e in reply.events if e.type == "THINKING"]
    assert thinking and all(e.message_id for e in thinking)
    # Consecutive THINKING chunks are one block: they share their message_id.
    for before, after in zip(reply.events, reply.events[1:], strict=False):
        if before.type == after.type == "THINKING":
            assert before.message_id == after.message_id


def test_actions_and_audit_traces_have_the_documented_shape(agent_url):
    reply = ask(agent_url, "NVIDIA data center revenue")
    actions = [e.data for e in reply.events if e.type == "ACTION"]
    assert actions[0]["tool_name"] == "search"
    assert actions[0]["tool_arguments"] == {"query": "NVIDIA data center revenue"}
    trace = reply.audit_traces[0]
    assert trace["audit_type"] == "SearchAuditV1"
    assert trace["query"] == {"text": "NVIDIA data center revenue"}
    assert trace["results"][0]["type"] == "CQS"
    assert all(v["hd"] for v in trace["results"][0]["values"])
    assert len({t["tool_id"] for t in reply.audit_traces}) == len(actions)


def test_complete_carries_a_checkpoint_and_consumption(agent_url):
    reply = ask(agent_url, "How did NVIDIA do last quarter?")
    assert reply.transcript.checkpoint_id.startswith("ckpt_")
    base, pro = reply.transcript.consumption
    assert base["type"] == "base"
    assert base["input_tokens"] > 0 and base["output_tokens"] > 0
    assert base["cached_tokens"] >= 0
    assert pro == {"type": "pro", "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
    assert ask(agent_url, "How did NVIDIA do last quarter?").transcript.checkpoint_id != (
        reply.transcript.checkpoint_id
    )


def test_lite_does_less_than_standard(agent_url):
    lite = ask(agent_url, "How did NVIDIA do last quarter?", "lite")
    standard = ask(agent_url, "How did NVIDIA do last quarter?", "standard")
    assert lite.types.count("ACTION") < standard.types.count("ACTION")
    assert len(lite.transcript.plan["steps"]) < len(standard.transcript.plan["steps"])
    assert len(claim_sentences(lite.transcript.answer)) < len(
        claim_sentences(standard.transcript.answer)
    )


# --- Grounding -------------------------------------------------------------------------------

QUESTIONS = [
    ("How did NVIDIA do last quarter?", "standard"),
    ("How did NVIDIA do last quarter?", "lite"),
    ("NVIDIA data center revenue", "standard"),
    ("Tell me about Apple", "lite"),
    ("Compare Microsoft and Alphabet cloud growth", "standard"),
    ("What's happening with inflation?", "standard"),
    ("Is Meta facing regulatory problems?", "standard"),
    ("What are the risks for Tesla?", "lite"),
    ("How are JPMorgan's margins?", "standard"),
    ("When does Microsoft report earnings next?", "standard"),
    ("What is on the earnings calendar?", "lite"),
    ("Compare NVIDIA with AMD", "standard"),
]


@pytest.mark.parametrize(("question", "effort"), QUESTIONS)
def test_every_span_quotes_its_source_and_every_sentence_is_grounded(agent_url, question, effort):
    reply = ask(agent_url, question, effort)
    assert_grounding_is_exact(reply)
    assert_every_sentence_grounded(reply)


def test_answers_are_about_the_company_asked(agent_url):
    reply = ask(agent_url, "How are JPMorgan's margins?")
    assert reply.cited_companies() == {"jpmorgan"}
    assert "margin" in reply.transcript.answer


def test_a_sentence_can_cite_two_documents(agent_url):
    reply = ask(agent_url, "NVIDIA data center revenue")
    by_span: dict[tuple[int, int], set[str]] = {}
    for reference in reply.references:
        span = (reference["start"], reference["end"])
        by_span.setdefault(span, set()).add(_document(reference["source"]).key)
    assert max(len(keys) for keys in by_span.values()) == 2
    assert len({key for keys in by_span.values() for key in keys}) >= 3


def test_sources_have_the_bigdata_and_external_shapes(agent_url):
    sources = [
        r["source"]
        for question in ("How did NVIDIA do last quarter?", "Tell me about Tesla")
        for r in ask(agent_url, question).references
    ]
    bigdata = [s for s in sources if s["type"] == "BIGDATA"]
    external = [s for s in sources if s["type"] == "EXTERNAL"]
    assert bigdata and external
    assert all({"id", "hd", "src_name", "ts"} <= s.keys() for s in bigdata)
    assert all({"hd", "ts"} <= s.keys() and s["action"]["name"] for s in external)
    assert all(s["action"]["url"].startswith("https://") for s in external)


def test_earnings_questions_use_the_calendar_tool(agent_url):
    reply = ask(agent_url, "When does Microsoft report earnings next?")
    actions = [e.data for e in reply.events if e.type == "ACTION"]
    assert actions[0] == {
        "type": "ACTION",
        "tool_name": "earnings_calendar",
        "tool_arguments": {"company": "Microsoft"},
    }
    (calendar,) = [t for t in reply.audit_traces if t["audit_type"] == "MarkdownAuditV1"]
    assert calendar["title"] == "Earnings calendar: Microsoft"
    tool_level = [r for r in reply.references if r["source"] is None]
    assert len(tool_level) == 2
    assert {r["audit_id"] for r in tool_level} == {calendar["tool_id"]}
    assert {r["tool_name"] for r in tool_level} == {"earnings_calendar"}
    assert "January 27, 2027" in reply.transcript.answer
    assert "$92.8 billion" in reply.transcript.answer


def test_a_question_the_corpus_cannot_answer_gets_an_honest_answer(agent_url):
    reply = ask(agent_url, "What is the weather in Paris?")
    assert reply.transcript.answer.startswith("I found nothing in the demo corpus about Paris.")
    assert reply.references == []
    assert "GROUNDING" not in reply.types
    assert ask(agent_url, "walmart revenue", "lite").references == []


# --- Continuity ------------------------------------------------------------------------------


def test_follow_up_resolves_its_pronoun_from_the_checkpoint(agent_url):
    first = ask(agent_url, "How did NVIDIA do last quarter?")
    follow_up = ask(
        agent_url,
        "What about its margins?",
        chat_id=first.chat_id,
        from_checkpoint_id=first.transcript.checkpoint_id,
    )
    assert follow_up.chat_id == first.chat_id
    assert follow_up.cited_companies() == {"nvidia"}
    assert "margin" in follow_up.transcript.answer
    assert "NVIDIA's margins" in follow_up.transcript.answer.split("\n")[0]


def test_follow_up_with_chat_id_alone_continues_the_latest_turn(agent_url):
    first = ask(agent_url, "Tell me about Tesla")
    follow_up = ask(agent_url, "What about its margins?", chat_id=first.chat_id)
    assert follow_up.cited_companies() == {"tesla"}


def test_another_process_with_the_same_secret_can_continue_the_chat(agent_url):
    first = ask(agent_url, "Tell me about Amazon")
    with serve_asgi(DemoAgentApp(SECRET, pace=0)) as other:
        follow_up = ask(
            f"{other}/v1/research-agent",
            "What about its guidance?",
            chat_id=first.chat_id,
            from_checkpoint_id=first.transcript.checkpoint_id,
        )
    assert follow_up.cited_companies() == {"amazon"}


def test_branch_from_turn_one_knows_nothing_of_turn_two(agent_url):
    turn1 = ask(agent_url, "How did NVIDIA do last quarter?")
    chat = {"chat_id": turn1.chat_id}
    turn2 = ask(agent_url, "Tell me about Tesla", **chat)
    checkpoint1 = turn1.transcript.checkpoint_id
    checkpoint2 = turn2.transcript.checkpoint_id

    branch = ask(agent_url, "What about its margins?", from_checkpoint_id=checkpoint1, **chat)
    assert branch.cited_companies() == {"nvidia"}
    assert ask(
        agent_url, "What about its margins?", from_checkpoint_id=checkpoint2, **chat
    ).cited_companies() == {"tesla"}
    # The branch's own checkpoint carries turn 1 and the branch question, not turn 2.
    again = ask(
        agent_url,
        "And its guidance?",
        from_checkpoint_id=branch.transcript.checkpoint_id,
        **chat,
    )
    assert again.cited_companies() == {"nvidia"}


def test_ids_stay_short_over_twenty_follow_ups_and_branches_still_work(agent_url):
    # They grew with every turn (263, 406, 551 characters) and overflowed Turn.checkpoint_id.
    first = ask(agent_url, "How did NVIDIA do last quarter?", effort="lite")
    chat = {"chat_id": first.chat_id}
    checkpoints = [first.transcript.checkpoint_id]
    for i in range(20):
        question = "What about its margins?" if i % 2 else f"And its guidance, take {i}?"
        reply = ask(agent_url, question, effort="lite", from_checkpoint_id=checkpoints[-1], **chat)
        assert reply.chat_id == first.chat_id
        assert reply.cited_companies() == {"nvidia"}
        checkpoints.append(reply.transcript.checkpoint_id)
    assert len(first.chat_id) <= 120
    assert max(len(c) for c in checkpoints) <= 120
    assert len({len(c) for c in checkpoints}) == 1
    # Branch from the first turn after all that: still NVIDIA's branch, and a new id of its own.
    branch = ask(
        agent_url,
        "What about its margins?",
        effort="lite",
        from_checkpoint_id=checkpoints[0],
        **chat,
    )
    assert branch.cited_companies() == {"nvidia"}
    assert branch.transcript.checkpoint_id not in checkpoints


def test_initial_checkpoint_starts_the_branch_with_no_history(agent_url):
    first = ask(agent_url, "How did NVIDIA do last quarter?")
    reply = ask(
        agent_url, "What about its margins?", chat_id=first.chat_id, from_checkpoint_id="INITIAL"
    )
    assert reply.chat_id == first.chat_id
    assert len(reply.cited_companies()) > 1


def test_a_market_question_is_not_pinned_to_the_last_company(agent_url):
    first = ask(agent_url, "How did NVIDIA do last quarter?")
    reply = ask(
        agent_url,
        "What about inflation?",
        chat_id=first.chat_id,
        from_checkpoint_id=first.transcript.checkpoint_id,
    )
    assert "nvidia" not in reply.cited_companies()
    assert "inflation" in reply.transcript.answer.lower()


# --- HTTP errors -----------------------------------------------------------------------------


def _tamper(token: str) -> str:
    position = token.index("_") + 5
    return token[:position] + ("A" if token[position] != "A" else "B") + token[position + 1 :]


def test_tampered_or_foreign_ids_are_not_found(agent_url):
    first = ask(agent_url, "How did NVIDIA do last quarter?")
    other_chat = ask(agent_url, "Tell me about Apple")
    question = {"message": "And its guidance?", "research_effort": "lite"}
    with serve_asgi(DemoAgentApp("another-deployment", pace=0)) as foreign_url:
        foreign = ask(f"{foreign_url}/v1/research-agent", "Tell me about Apple")
    checkpoint = first.transcript.checkpoint_id

    for bad_checkpoint in (
        _tamper(checkpoint),
        checkpoint[:-2],
        foreign.transcript.checkpoint_id,
        other_chat.transcript.checkpoint_id,  # a real checkpoint, of another chat
        first.chat_id,  # a chat id is not a checkpoint id
        "ckpt-789",
    ):
        body = {**question, "chat_id": first.chat_id, "from_checkpoint_id": bad_checkpoint}
        response = post(agent_url, body)
        assert response.status_code == HTTPStatus.NOT_FOUND, bad_checkpoint
        assert response.json() == {"detail": "Checkpoint not found"}

    for bad_chat in (_tamper(first.chat_id), foreign.chat_id, checkpoint, "chat-h1"):
        response = post(agent_url, {**question, "chat_id": bad_chat})
        assert response.status_code == HTTPStatus.NOT_FOUND, bad_chat
        assert response.json() == {"detail": "Chat not found"}


def test_persistence_mode_cannot_change_within_a_chat(agent_url):
    first = ask(agent_url, "Tell me about Meta", persistence_mode="enabled")
    follow_up = {
        "message": "What about its margins?",
        "research_effort": "lite",
        "chat_id": first.chat_id,
        "from_checkpoint_id": first.transcript.checkpoint_id,
    }
    response = post(agent_url, follow_up)  # persistence_mode defaults to "disabled"
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json() == {"detail": "persistence_mode mismatch"}
    assert post(agent_url, {**follow_up, "persistence_mode": "enabled"}).status_code == 200


def test_without_persistence_follow_ups_expire(monkeypatch):
    clock = SimpleNamespace(now=1000.0)  # the conversations' clock, moved by the test
    monkeypatch.setattr(conversation, "time", SimpleNamespace(time=lambda: clock.now))
    with serve_asgi(DemoAgentApp(SECRET, pace=0, chat_ttl_seconds=60)) as url:
        url = f"{url}/v1/research-agent"
        kept = ask(url, "Tell me about Apple", persistence_mode="enabled")
        first = ask(url, "Tell me about Apple")
        fresh = {"chat_id": first.chat_id, "from_checkpoint_id": first.transcript.checkpoint_id}
        clock.now += 59  # within the TTL
        assert ask(url, "What about its margins?", **fresh).cited_companies() == {"apple"}
        clock.now += 61  # past the TTL of the chat's last answer

        question = {"message": "What about its margins?", "research_effort": "lite"}
        for continuation in (
            fresh,
            {"chat_id": first.chat_id},
            {"from_checkpoint_id": first.transcript.checkpoint_id},
        ):
            response = post(url, {**question, **continuation})
            assert response.status_code == HTTPStatus.NOT_FOUND
            assert response.json() == {"detail": "Cannot follow up: chat expired"}
        persisted = ask(
            url,
            "What about its margins?",
            chat_id=kept.chat_id,
            from_checkpoint_id=kept.transcript.checkpoint_id,
            persistence_mode="enabled",
        )
        assert persisted.cited_companies() == {"apple"}


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"research_effort": "lite"}, ["body", "message"]),
        ({"message": "", "research_effort": "lite"}, ["body", "message"]),
        ({"message": 42, "research_effort": "lite"}, ["body", "message"]),
        ({"message": "Hi"}, ["body", "research_effort"]),
        ({"message": "Hi", "research_effort": "deep"}, ["body", "research_effort"]),
        (
            {"message": "Hi", "research_effort": "lite", "persistence_mode": "on"},
            ["body", "persistence_mode"],
        ),
        ({"message": "Hi", "research_effort": "lite", "chat_id": 7}, ["body", "chat_id"]),
        (["a", "list"], ["body"]),
    ],
)
def test_schema_problems_are_422_with_a_located_detail(agent_url, body, loc):
    response = post(agent_url, body)
    assert response.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
    detail = response.json()["detail"]
    assert [error["loc"] for error in detail] == [loc]
    assert all(error["msg"] for error in detail)


@pytest.mark.parametrize("body", [b"{not json", b"[" * 200_000 + b"]" * 200_000])
def test_invalid_json_is_400(agent_url, body):
    response = httpx.post(agent_url, content=body, timeout=10)
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "Invalid JSON" in response.json()["detail"]


def test_other_methods_are_405(agent_url):
    response = httpx.get(agent_url, timeout=10)
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert response.json() == {"detail": "Method Not Allowed"}
    assert response.headers["allow"] == "POST"


# --- Pace and disconnects --------------------------------------------------------------------


def test_pace_zero_answers_at_once(agent_url):
    started = time.monotonic()
    ask(agent_url, "Compare Microsoft and Alphabet cloud growth")
    assert time.monotonic() - started < 1.0


def test_a_disconnect_stops_the_turn():
    app = DemoAgentApp(SECRET, pace=1.0)  # a whole answer takes seconds at this pace
    with serve_asgi(app) as url:
        body = {"message": "How did NVIDIA do last quarter?", "research_effort": "standard"}
        with httpx.stream("POST", f"{url}/v1/research-agent", json=body, timeout=10) as response:
            # Not `for ... break`: leaving iter_lines early would itself close the connection.
            lines = response.iter_lines()
            while not next(lines).startswith("data: "):
                pass
            assert app.active_turns == 1
        wait_until_sync(lambda: app.active_turns == 0)  # the disconnect stops it


def test_an_internal_failure_mid_stream_ends_with_an_error_event(monkeypatch):
    class FailingTurn(demo_agent_app.ResearchTurn):
        def steps(self):
            yield from itertools.islice(super().steps(), 3)
            raise RuntimeError("boom")

    monkeypatch.setattr(demo_agent_app, "ResearchTurn", FailingTurn)
    with serve_asgi(DemoAgentApp(SECRET, pace=0)) as url:
        response = post(f"{url}/v1/research-agent", {"message": "Hi", "research_effort": "lite"})
    events, _ = parse_sse_text(response.text, BigdataAdapter())
    assert response.status_code == HTTPStatus.OK
    assert events[-1].type == "ERROR"
    assert "COMPLETE" not in [e.type for e in events]


def test_an_oversized_body_is_refused(agent_url):
    message = "x" * (MAX_BODY_BYTES + 1)
    response = post(agent_url, {"message": message, "research_effort": "lite"})
    assert response.status_code == HTTPStatus.REQUEST_ENTITY_TOO_LARGE
