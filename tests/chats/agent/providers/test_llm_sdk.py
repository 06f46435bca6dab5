"""llm-sdk agents: the adapter's reading of PartialModelResponse lines, and the client."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from django.core.management import call_command

from chats.agent import AgentError
from chats.agent.events import AnswerEvent, ThinkingEvent
from chats.agent.providers import PROVIDERS
from chats.agent.providers.llm_sdk import LlmSdkAdapter, LlmSdkClient
from chats.agent.request import AgentRequest, AgentSettings, ConversationTurn
from chats.agent.sse import parse_sse_text
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.resolve import resolve_citations
from demo_agent.scripted import Drop, Reply, Sleep
from tests.servers import free_port, serve_asgi
from tests.standins.llm_sdk import LlmSdkStandIn, error, stream, text, usage

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "providers"
TOKEN = "llmsdk-token-not-a-secret-0123"
STUDY = {
    "source": "https://medical-journal.example/caffeine",
    "title": "Caffeine metabolism study",
    "cited_text": "half-life extends to 8-12 hours",
    "start_index": 4,
    "end_index": 90,
}


def read(body: str):
    events, malformed = parse_sse_text(body, LlmSdkAdapter(), json_lines=True)
    return Transcript.from_events(events), events, malformed


def jsonl(*documents) -> str:
    return "".join(stream(*documents).body)


def markdown(transcript: Transcript) -> str:
    return render_markdown(
        resolve_citations(answer=transcript.answer, citations=transcript.citations)
    )


def test_capture_renders_to_its_markdown():
    out = io.StringIO()
    call_command(
        "render_stream",
        str(FIXTURES / "llm-sdk.jsonl"),
        provider="llm-sdk",
        fmt="markdown",
        stdout=out,
    )
    assert out.getvalue() == (FIXTURES / "llm-sdk.md").read_text(encoding="utf-8")


def test_a_parts_citations_cite_its_whole_text_and_keep_the_evidence():
    transcript, events, malformed = read(
        jsonl(
            text(0, "Intro. "),
            text(1, "Sensitive people "),
            text(1, "", STUDY),
            text(1, "metabolise it slowly."),
            text(1, "", {"source": "doc-7", "title": "Internal memo", "start_index": 0}),
            usage(10, 4),
            usage(0, 3),
        )
    )
    assert malformed == 0
    assert [e.content for e in events if isinstance(e, AnswerEvent)] == [
        "Intro. ",
        "Sensitive people ",
        "metabolise it slowly.",
    ]
    study, memo = transcript.citations
    assert (study.start, study.end) == (7, 45)  # the whole of part 1, text after its citation too
    assert study.source.key == "url:https://medical-journal.example/caffeine"
    assert study.passages[0].text == "half-life extends to 8-12 hours"
    assert (study.data["start_index"], study.data["end_index"]) == (4, 90)
    assert memo.source.key == "source:doc-7" and memo.source.url == ""
    assert markdown(transcript) == (
        "Intro. Sensitive people metabolise it slowly.[^1][^2]\n\n"
        "[^1]: [Caffeine metabolism study](https://medical-journal.example/caffeine)\n"
        "[^2]: Internal memo\n"
    )
    assert transcript.completed
    assert transcript.consumption == [{"type": "llm-sdk", "input_tokens": 10, "output_tokens": 7}]


def test_a_url_without_title_is_labelled_by_its_host():
    transcript = read(jsonl(text(0, "Claim."), text(0, "", {"source": "https://www.x.example/p"})))[
        0
    ]
    assert markdown(transcript).endswith("[^1]: [x.example](https://www.x.example/p)\n")


def test_interleaved_parts_cite_each_run_of_their_text():
    transcript = read(
        jsonl(
            text(0, "A1 "),
            text(1, "B "),
            text(0, "A2 "),
            text(0, "", {"source": "https://a.example/"}),
        )
    )[0]
    assert transcript.answer == "A1 B A2 "
    assert markdown(transcript).startswith("A1[^1] B A2[^1] \n")


def test_reasoning_is_thinking_and_other_parts_are_not_the_answer():
    transcript, events, _ = read(
        jsonl(
            {"delta": {"index": 0, "part": {"type": "reasoning", "text": "Let me think"}}},
            {"delta": {"index": 1, "part": {"type": "tool-call", "tool_name": "lookup"}}},
            {"delta": {"index": 1, "part": {"type": "text", "text": "mismatched"}}},
            text(2, "Answer."),
        )
    )
    assert [e.content for e in events if isinstance(e, ThinkingEvent)] == ["Let me think"]
    assert transcript.answer == "Answer."


def test_a_citation_without_source_is_refused():
    transcript = read(jsonl(text(0, "Claim."), text(0, "", {"title": "No source"})))[0]
    cited = resolve_citations(answer=transcript.answer, citations=transcript.citations)
    assert [r.problem for r in cited.invalid_references] == ["citation has no source"]


def test_sse_data_lines_read_the_same():
    transcript = read("".join(stream(text(0, "Hi."), sse=True).body))[0]
    assert transcript.answer == "Hi." and transcript.completed


def test_an_error_line_fails_the_turn():
    transcript = read(jsonl(text(0, "Hi"), {"error": {"message": "model overloaded"}}))[0]
    assert transcript.error == "The llm-sdk agent reported an error: model overloaded"
    assert not transcript.completed


# --- the client against the stand-in -------------------------------------------------------


@pytest.fixture
def agent():
    app = LlmSdkStandIn()
    with serve_asgi(app) as url:
        app.url = f"{url}/agent/run"
        yield app


def client(url, request=None, *, notices=None, **config):
    config.setdefault("max_retries", 2)
    config.setdefault("api_key", TOKEN)
    return LlmSdkClient(
        request or AgentRequest(message="How much coffee?"),
        AgentSettings(url=url, **config),
        on_retry=(lambda m, d: _record(notices, m, d)) if notices is not None else None,
    )


async def _record(notices, message, delay):
    notices.append((message, delay))


async def collect(stream_client):
    return Transcript.from_events([e async for e in stream_client.events()])


async def test_streams_a_cited_answer_and_sends_history(agent):
    agent.queue(
        stream(
            text(0, "Drink 1\u20132 cups ☕ before noon."),
            text(0, "", STUDY),
            usage(5, 6),
            pause=0.01,
        )
    )
    request = AgentRequest(
        message="How much coffee?",
        history=(ConversationTurn("Is coffee healthy?", "In moderation."),),
    )
    transcript = await collect(client(agent.url, request, model="my-agent"))
    assert markdown(transcript) == (
        "Drink 1\u20132 cups ☕ before noon.[^1]\n\n"
        "[^1]: [Caffeine metabolism study](https://medical-journal.example/caffeine)\n"
    )
    assert transcript.consumption[0]["type"] == "my-agent"
    (received,) = agent.requests
    assert received.path == "/agent/run"
    assert received.headers["authorization"] == f"Bearer {TOKEN}"
    assert received.json == {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Is coffee healthy?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "In moderation."}]},
            {"role": "user", "content": [{"type": "text", "text": "How much coffee?"}]},
        ],
        "model": "my-agent",
    }


async def test_no_token_no_authorization_header(agent):
    agent.queue(stream(text(0, "Hi.")))
    await collect(client(agent.url, api_key=""))
    assert "authorization" not in agent.requests[0].headers
    assert "model" not in agent.payloads[0]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            error(401, f"bad token {TOKEN}"),
            "The llm-sdk agent did not accept the token (check LLMSDK_AGENT_TOKEN).",
        ),
        (
            error(403, "forbidden"),
            "The llm-sdk agent did not accept the token (check LLMSDK_AGENT_TOKEN).",
        ),
        (
            error(400, f"messages missing; Authorization: Bearer {TOKEN}"),
            "The llm-sdk agent rejected the request: messages missing; "
            "Authorization: [redacted] [redacted].",
        ),
    ],
)
async def test_refusals_become_clear_errors_without_the_token(agent, caplog, reply, message):
    caplog.set_level(logging.DEBUG)
    agent.queue(reply)
    with pytest.raises(AgentError) as failure:
        await collect(client(agent.url))
    assert failure.value.user_message == message
    assert len(agent.requests) == 1
    assert TOKEN not in str(failure.value) and TOKEN not in caplog.text


async def test_429_honours_retry_after_then_answers(agent):
    agent.queue(error(429, "slow down", **{"Retry-After": "0.1"}), stream(text(0, "Ok.")))
    notices = []
    transcript = await collect(client(agent.url, notices=notices))
    assert transcript.answer == "Ok."
    assert notices == [
        ("The llm-sdk agent is rate limiting requests; retried and gave up: slow down.", 0.1)
    ]


async def test_5xx_gives_up_after_the_retries(agent):
    agent.queue(*(error(502, "bad gateway", **{"Retry-After": "0"}) for _ in range(2)))
    with pytest.raises(AgentError) as failure:
        await collect(client(agent.url, max_retries=1))
    assert failure.value.user_message == "The llm-sdk agent failed (HTTP 502): bad gateway."
    assert len(agent.requests) == 2


async def test_unreachable():
    with pytest.raises(AgentError) as failure:
        await collect(client(f"http://127.0.0.1:{free_port()}/run", max_retries=0))
    assert failure.value.kind == "unreachable"


async def test_stall_and_drop(agent):
    agent.queue(Reply(body=[*stream(text(0, "Part")).body, Sleep(2)]))
    with pytest.raises(AgentError) as stalled:
        await collect(client(agent.url, idle_timeout=0.3))
    assert stalled.value.kind == "stalled"
    agent.queue(Reply(body=[*stream(text(0, "Part")).body, Drop()]))
    with pytest.raises(AgentError) as dropped:
        await collect(client(agent.url))
    assert dropped.value.user_message == "The connection to the llm-sdk agent dropped mid-answer."
    assert len(agent.requests) == 2  # neither was retried after text had flowed


async def test_malformed_lines_are_counted(agent):
    agent.queue(Reply(body=["not json\n", '{"other": 1}\n', *stream(text(0, "Hi.")).body]))
    stream_client = client(agent.url)
    transcript = await collect(stream_client)
    assert transcript.answer == "Hi."
    assert stream_client.malformed_lines == 1  # the bare "not json" line is not a data line


def test_settings(settings):
    settings.LLMSDK_AGENT_URL = ""
    assert PROVIDERS["llm-sdk"].settings() is None
    settings.LLMSDK_AGENT_URL = "https://agent.example/run"
    settings.LLMSDK_AGENT_TOKEN = TOKEN
    config = PROVIDERS["llm-sdk"].settings()
    assert (config.url, config.api_key) == ("https://agent.example/run", TOKEN)
    assert TOKEN not in repr(config)


async def test_the_token_is_not_logged_on_an_answered_run(agent, caplog):
    caplog.set_level(logging.DEBUG)
    agent.queue(error(503, f"down, token {TOKEN}"), stream(text(0, "Fine.")))
    notices = []
    assert (await collect(client(agent.url, notices=notices))).completed
    assert TOKEN not in caplog.text and TOKEN not in str(notices)


def test_a_stored_run_reads_back_to_the_same_cited_answer():
    _, events, _ = read((FIXTURES / "llm-sdk.jsonl").read_text(encoding="utf-8"))
    stored = json.loads(json.dumps([e.data for e in events]))
    assert markdown(Transcript.from_log(stored)) == (FIXTURES / "llm-sdk.md").read_text(
        encoding="utf-8"
    )


def test_a_citation_on_a_part_without_text_is_listed_not_placed():
    citation = {"source": "https://pharma.example/label", "title": "Label"}
    body = "\n".join(
        json.dumps(d)
        for d in (
            {"delta": {"index": 0, "part": {"type": "text", "text": "Dose twice daily."}}},
            {"delta": {"index": 1, "part": {"type": "text", "text": "", "citation": citation}}},
        )
    )
    transcript, _, _ = read(body + "\n")
    assert markdown(transcript) == (
        "Dose twice daily.\n\n"
        "[^1]: [Label](https://pharma.example/label) (not placed in the text)\n"
    )
