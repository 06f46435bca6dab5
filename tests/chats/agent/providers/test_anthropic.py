"""Anthropic: the Messages adapter's cited blocks, documents and searches, and the SDK client
against a real stand-in HTTP server speaking the Messages wire."""

import io
import json
import logging
from datetime import date
from pathlib import Path

import pytest
from django.core.management import call_command

from chats.agent import AgentError
from chats.agent.events import (
    ActionEvent,
    AuditEvent,
    CompleteEvent,
    ErrorEvent,
    ToolErrorEvent,
)
from chats.agent.providers.anthropic import AnthropicAdapter, AnthropicClient
from chats.agent.providers.sdk import wire_document
from chats.agent.request import AgentRequest, AgentSettings, ConversationTurn
from chats.agent.sse import StreamMessage
from chats.agent.transcript import Transcript
from citations.render import render_markdown
from citations.resolve import resolve_citations
from demo_agent.scripted import Drop, Reply, Sleep
from tests.servers import free_port, serve_asgi
from tests.standins.anthropic import (
    anthropic_error,
    message_end,
    message_start,
    messages_standin,
    search_blocks,
    sse,
    text_block,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "providers"
KEY = "sk-ant-test-secret-9999"

WEB = {
    "type": "web_search_result_location",
    "url": "https://www.stats.example/cpi",
    "title": "CPI October",
    "cited_text": "Inflation eased to 2.4%.",
    "encrypted_index": "Eo8B",
}
DOCUMENT = {
    "type": "char_location",
    "cited_text": "Revenue rose 12%.",
    "document_index": 0,
    "document_title": "Annual report",
    "start_char_index": 100,
    "end_char_index": 117,
}
PAGE = {
    "type": "page_location",
    "cited_text": "Margins widened.",
    "document_index": 1,
    "document_title": None,
    "start_page_number": 3,
    "end_page_number": 4,
}
RESULTS = [
    {
        "type": "web_search_result",
        "url": "https://www.stats.example/cpi",
        "title": "CPI October",
        "page_age": "November 12, 2025",
        "encrypted_content": "EqgfCio",
    },
    {
        "type": "web_search_result",
        "url": "https://news.example/cpi",
        "title": "Prices cool",
        "page_age": None,
        "encrypted_content": "Eq",
    },
]


def cited_answer():
    return [
        message_start(),
        *search_blocks(0, "CPI October 2025", RESULTS),
        *text_block(2, ["The report says "]),
        *text_block(3, ["inflation eased ", "to 2.4% 🙂"], [WEB]),
        *text_block(4, [" and revenue rose 12%"], [DOCUMENT, PAGE]),
        *text_block(5, ["."]),
        *message_end(),
    ]


def feed_all(lines):
    adapter = AnthropicAdapter()
    events = []
    for line in "".join(lines).splitlines():
        if line.startswith("data: "):
            document = json.loads(line[6:])
            message = StreamMessage(event=document["type"], document=document, text=line[6:])
            events.extend(adapter.feed(message) or [])
    return events + adapter.close()


def cited(events):
    transcript = Transcript.from_events(events)
    return transcript, resolve_citations(
        answer=transcript.answer, citations=transcript.citations, tool_calls=transcript.tool_calls
    )


def test_capture_renders_to_its_markdown():
    out = io.StringIO()
    path = str(FIXTURES / "anthropic.sse")
    call_command("render_stream", path, "--provider", "anthropic", stdout=out)
    assert out.getvalue() == (FIXTURES / "anthropic.md").read_text()


def test_a_cited_block_is_the_span_and_each_location_is_a_source():
    events = feed_all(cited_answer())
    transcript, result = cited(events)
    assert transcript.answer == "The report says inflation eased to 2.4% 🙂 and revenue rose 12%."
    assert render_markdown(result) == (
        "The report says inflation eased to 2.4% 🙂[^1] and revenue rose 12%[^2][^3].\n\n"
        "[^1]: [CPI October](https://www.stats.example/cpi)\n"
        "[^2]: Annual report\n"
        "[^3]: Document 2\n"
    )
    web, document, page = transcript.citations
    assert (web.start, web.end) == (16, 41)  # code points: the emoji is one
    assert [p.text for p in web.passages] == ["Inflation eased to 2.4%."]
    assert (document.source.type, document.source.key, document.source.url) == (
        "DOCUMENT",
        "document:0:Annual report",
        "",
    )
    assert page.source.key == "document:1:"
    assert "encrypted_index" not in web.source.data


def test_search_use_and_results_become_action_and_audit():
    events = feed_all(cited_answer())
    actions = [e for e in events if isinstance(e, ActionEvent)]
    assert [(a.tool_name, a.tool_arguments) for a in actions] == [
        ("web_search", {"query": "CPI October 2025"})
    ]
    (audit,) = [e for e in events if isinstance(e, AuditEvent)]
    (call,) = audit.tool_calls
    assert (call.tool_id, call.kind, call.title) == ("srvtoolu_1", "web_search", "CPI October 2025")
    assert [(r.url, r.label) for r in call.results] == [
        ("https://www.stats.example/cpi", "CPI October - 2025-11-12"),
        ("https://news.example/cpi", "Prices cool"),
    ]
    assert call.results[0].published_on == date(2025, 11, 12)


def test_usage_and_completion():
    events = feed_all(cited_answer())
    complete = events[-1]
    assert isinstance(complete, CompleteEvent)
    assert complete.consumption == (
        {"type": "claude-x", "input_tokens": 25, "output_tokens": 40, "cached_tokens": 0},
    )
    assert all(e.raw for e in events)


def test_cache_reads_count_within_the_input_tokens():
    """Anthropic counts cache reads apart from input_tokens; consumption counts them within, as
    every other agent does (chats/usage/tokens.py)."""
    start = message_start().replace(
        '"input_tokens": 25,', '"input_tokens": 25, "cache_read_input_tokens": 900,'
    )
    complete = feed_all([start, *text_block(0, ["Hi."]), *message_end()])[-1]
    assert complete.consumption == (
        {"type": "claude-x", "input_tokens": 925, "output_tokens": 40, "cached_tokens": 900},
    )


def test_a_search_error_is_a_tool_error():
    result = {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_1",
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
    }
    events = feed_all([sse("content_block_start", index=0, content_block=result)])
    assert events == [
        ToolErrorEvent(tool_name="web_search", error="Web search failed: max_uses_exceeded")
    ]


@pytest.mark.parametrize(
    ("ending", "message"),
    [
        (
            message_end("refusal"),
            "Claude declined to answer this request (a safety refusal).",
        ),
        (
            [sse("error", error={"type": "overloaded_error", "message": "Overloaded"})],
            "Anthropic is overloaded right now; try again in a moment.",
        ),
        (
            [sse("error", error={"type": "invalid_request_error", "message": "Bad thing"})],
            "Anthropic reported an error: Bad thing",
        ),
    ],
)
def test_refusals_and_error_events_end_the_turn(ending, message):
    events = feed_all([message_start(), *text_block(0, ["Par"]), *ending])
    assert events[-1] == ErrorEvent(error=message)
    assert not Transcript.from_events(events).completed


def test_a_stream_cut_before_message_stop_has_no_completion():
    transcript = Transcript.from_events(feed_all([message_start(), *text_block(0, ["Par"])]))
    assert transcript.answer == "Par"
    assert not transcript.completed


# --- the SDK client against the stand-in ------------------------------------------------------


@pytest.fixture
def standin():
    app = messages_standin()
    with serve_asgi(app) as url:
        app.url = url
        yield app


def client(url, request=None, *, notices=None, **config):
    config.setdefault("max_retries", 2)
    config.setdefault("backoff_base", 0.01)
    return AnthropicClient(
        request or AgentRequest(message="How is inflation?"),
        AgentSettings(api_key=KEY, url=url, model="claude-x", **config),
        on_retry=(lambda message, delay: _note(notices, message, delay))
        if notices is not None
        else None,
    )


async def _note(notices, message, delay):
    notices.append((message, delay))


async def run(stream):
    return [event async for event in stream.events()]


async def test_the_sdk_streams_the_capture_to_its_exact_markdown(standin):
    standin.queue(Reply.capture(FIXTURES / "anthropic.sse"))
    events = await run(client(standin.url))
    _, result = cited(events)
    assert render_markdown(result) == (FIXTURES / "anthropic.md").read_text()
    assert standin.paths == ["POST /v1/messages"]
    body = standin.payloads[0]
    assert body["model"] == "claude-x"
    assert body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "How is inflation?"}]
    assert body["tools"] == [{"type": "web_search_20250305", "name": "web_search"}]
    headers = standin.requests[0].headers
    assert KEY in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )


async def test_sdk_event_objects_dump_back_to_the_wire_json(standin):
    lines = cited_answer()
    wire = [json.loads(line.split("data: ", 1)[1]) for line in lines]
    standin.queue(Reply(body=lines))
    runner = client(standin.url)
    sdk = runner._client()
    try:
        dumped = [wire_document(item) async for item in await runner._open(sdk)]
    finally:
        await sdk.close()
    assert dumped == wire


async def test_the_sdk_streams_a_cited_answer(standin):
    standin.queue(Reply(body=cited_answer()))
    _, result = cited(await run(client(standin.url)))
    assert render_markdown(result).startswith(
        "The report says inflation eased to 2.4% 🙂[^1] and revenue rose 12%[^2][^3]."
    )


async def test_a_follow_up_sends_the_history(standin):
    standin.queue(Reply(body=[message_start(), *text_block(0, ["Yes."]), *message_end()]))
    history = (
        ConversationTurn(question="Q1", answer="A1"),
        ConversationTurn(question="Q2", answer="A2"),
    )
    await run(client(standin.url, AgentRequest(message="Q3", history=history)))
    assert standin.payloads[0]["messages"] == [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2"},
        {"role": "user", "content": "Q3"},
    ]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (
            anthropic_error(401, "authentication_error", f"invalid x-api-key {KEY}"),
            "Anthropic did not accept the API key (check ANTHROPIC_API_KEY).",
        ),
        (
            anthropic_error(403, "permission_error", f"Key {KEY} may not use claude-x"),
            "The Anthropic API key is not allowed to make this request: "
            "Key [redacted] may not use claude-x.",
        ),
        (
            anthropic_error(400, "invalid_request_error", "max_tokens: Field required"),
            "Anthropic rejected the request: max_tokens: Field required.",
        ),
    ],
)
async def test_refused_requests_become_clear_errors_without_the_key(
    standin, caplog, reply, message
):
    standin.queue(reply)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AgentError) as raised:
        await run(client(standin.url))
    assert raised.value.user_message == message
    assert len(standin.requests) == 1
    assert KEY not in caplog.text


async def test_overloaded_529_is_retried_after_retry_after(standin):
    standin.queue(
        anthropic_error(529, "overloaded_error", "Overloaded", **{"Retry-After": "0.1"}),
        anthropic_error(429, "rate_limit_error", "Too many", **{"Retry-After": "0.2"}),
        Reply(body=[message_start(), *text_block(0, ["Fine."]), *message_end()]),
    )
    notices = []
    events = await run(client(standin.url, notices=notices))
    assert Transcript.from_events(events).answer == "Fine."
    assert notices == [
        ("Anthropic is overloaded; retried and gave up: Overloaded.", 0.1),
        ("Anthropic is rate limiting requests; retried and gave up: Too many.", 0.2),
    ]


async def test_an_error_event_mid_stream_reaches_the_turn(standin):
    error = sse("error", error={"type": "overloaded_error", "message": "Overloaded"})
    standin.queue(Reply(body=[message_start(), *text_block(0, ["Par"]), error]))
    events = await run(client(standin.url))
    assert events[-1] == ErrorEvent(
        error="Anthropic is overloaded right now; try again in a moment."
    )
    assert len(standin.requests) == 1


async def test_unreachable_stalled_dropped_and_cut(standin):
    with pytest.raises(AgentError) as raised:
        await run(client(f"http://127.0.0.1:{free_port()}", max_retries=0))
    assert raised.value.kind == "unreachable"

    standin.queue(Reply(body=[message_start(), *text_block(0, ["Par"]), Sleep(1.5)]))
    with pytest.raises(AgentError) as raised:
        await run(client(standin.url, idle_timeout=0.5))
    assert raised.value.kind == "stalled"

    standin.queue(Reply(body=[message_start(), *text_block(0, ["Par"]), Drop()]))
    with pytest.raises(AgentError) as raised:
        await run(client(standin.url))
    assert raised.value.user_message == "The connection to Anthropic dropped mid-answer."

    standin.queue(Reply(body=[message_start(), *text_block(0, ["Par"])]))
    with pytest.raises(AgentError) as raised:
        await run(client(standin.url))
    assert raised.value.kind == "dropped"
    assert len(standin.requests) == 3  # the cut streams were never replayed


# --- pause_turn: a long search paused, sent back and read on ---------------------------------


def paused_reply(message_id, text, stop="pause_turn"):
    return Reply(
        body=[
            message_start(message_id),
            *search_blocks(0, "CPI October 2025", RESULTS),
            *text_block(2, [text], [WEB] if stop != "pause_turn" else []),
            *message_end(stop, output_tokens=7),
        ]
    )


async def test_a_paused_turn_is_sent_back_and_the_answer_read_to_its_end(standin):
    standin.queue(
        paused_reply("msg_1", "Now continuing with the remaining searches:"),
        paused_reply("msg_2", " Inflation eased to 2.4%.", stop="end_turn"),
    )
    events = await run(client(standin.url))
    transcript, result = cited(events)
    assert transcript.answer == (
        "Now continuing with the remaining searches: Inflation eased to 2.4%."
    )
    assert transcript.completed and not transcript.failed
    assert render_markdown(result).startswith(
        "Now continuing with the remaining searches: Inflation eased to 2.4%.[^1]"
    )
    assert transcript.consumption[0]["output_tokens"] == 14  # both responses
    assert len(standin.payloads) == 2
    first, second = standin.payloads
    assert second["messages"][:-1] == first["messages"]
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "CPI October 2025"},
            },
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": RESULTS},
            {"type": "text", "text": "Now continuing with the remaining searches:"},
        ],
    }
    assert (second["tools"], second["model"]) == (first["tools"], first["model"])
    assert "container" not in second  # no container tool was used


async def test_a_paused_text_ending_in_blanks_is_sent_back_as_the_api_accepts_it(standin):
    standin.queue(
        paused_reply("msg_1", "Searching more:\n\n"),
        paused_reply("msg_2", "Inflation eased to 2.4%.", stop="end_turn"),
    )
    transcript, _ = cited(await run(client(standin.url)))
    assert (transcript.completed, transcript.error) == (True, "")
    assert transcript.answer == "Searching more:\n\nInflation eased to 2.4%."
    assert standin.payloads[1]["messages"][-1]["content"][-1]["text"] == "Searching more:"


async def test_the_stand_in_refuses_what_the_messages_api_refuses(standin):
    broken = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": [{"type": "server_tool_use", "id": "srvtoolu_9",
                                           "name": "web_search", "input": {}}]},
    ]  # fmt: skip
    request = type("Request", (), {"json": {"messages": broken}})()
    assert standin.refuse(request).status == 400


async def test_a_paused_turn_reuses_its_container(standin):
    paused = paused_reply("msg_1", "Searching on:")
    container = {"id": "container_011CRx", "expires_at": "2026-11-27T23:00:00Z"}
    paused.body[-2] = sse(
        "message_delta",
        delta={"stop_reason": "pause_turn", "stop_sequence": None, "container": container},
        usage={"output_tokens": 7},
    )
    standin.queue(paused, paused_reply("msg_2", " Done.", stop="end_turn"))
    transcript, _ = cited(await run(client(standin.url)))
    assert transcript.completed
    assert standin.payloads[1]["container"] == "container_011CRx"


async def test_a_turn_that_keeps_pausing_ends_after_the_cap_with_a_clear_message(standin):
    from chats.agent.providers.anthropic import MAX_PAUSES, PAUSED_TOO_OFTEN

    standin.queue(*(paused_reply(f"msg_{n}", f"Part {n}.") for n in range(MAX_PAUSES + 1)))
    events = await run(client(standin.url))
    transcript, _ = cited(events)
    assert len(standin.payloads) == MAX_PAUSES + 1
    assert transcript.error == PAUSED_TOO_OFTEN
    assert transcript.answer == "".join(f"Part {n}." for n in range(MAX_PAUSES + 1))
    # Each continuation sends every block so far: the last carries all the earlier texts.
    last = standin.payloads[-1]["messages"][-1]["content"]
    assert [b["text"] for b in last if b["type"] == "text"] == [
        f"Part {n}." for n in range(MAX_PAUSES)
    ]
