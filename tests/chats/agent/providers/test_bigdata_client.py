"""The Research Agent's client against a real HTTP stand-in: payloads, HTTP errors, retries,
stalls, drops."""

import time

import pytest

from chats.agent import AgentError
from chats.agent.providers.bigdata import AgentStream
from chats.agent.request import AgentRequest, AgentSettings
from chats.agent.transcript import Transcript
from demo_agent.scripted import Drop, Reply, ScriptedAgent, Sleep, Stall, answer_stream
from tests.servers import free_port, serve_asgi


@pytest.fixture
def upstream():
    app = ScriptedAgent()
    with serve_asgi(app) as url:
        app.url = url
        yield app


def make_stream(url, request=None, *, notices=None, **settings):
    settings.setdefault("backoff_base", 0.01)
    return AgentStream(
        request or AgentRequest(message="How did NVIDIA do?"),
        AgentSettings(url=url, api_key="secret-key-123", **settings),
        on_retry=(lambda message, delay: _record(notices, message, delay))
        if notices is not None
        else None,
    )


async def _record(notices, message, delay):
    notices.append((message, delay))


async def collect(stream):
    return Transcript.from_events([event async for event in stream.events()])


async def test_posts_the_documented_payload_and_key(upstream):
    upstream.queue(Reply.events(*answer_stream("Fine.")))
    request = AgentRequest(
        message="Follow up", research_effort="lite", chat_id="chat-9", from_checkpoint_id="ckpt-3"
    )
    transcript = await collect(make_stream(upstream.url, request))
    assert transcript.answer == "Fine."
    assert upstream.payloads == [
        {
            "message": "Follow up",
            "research_effort": "lite",
            "chat_id": "chat-9",
            "from_checkpoint_id": "ckpt-3",
            "persistence_mode": "enabled",
        }
    ]
    headers = upstream.requests[0].headers
    assert headers["x-api-key"] == "secret-key-123"
    assert headers["accept"] == "text/event-stream"


async def test_first_question_sends_no_continuity_fields(upstream):
    upstream.queue(Reply.events(*answer_stream("x")))
    await collect(make_stream(upstream.url))
    assert "chat_id" not in upstream.payloads[0]
    assert "from_checkpoint_id" not in upstream.payloads[0]


@pytest.mark.parametrize(
    ("status", "detail", "expected"),
    [
        (400, "message too long", "rejected the request: message too long"),
        (401, "Invalid API key", "did not accept the API key"),
        (403, "model tier pro not entitled", "not allowed to make this request: model tier pro"),
        (404, "Not Found", "could not find"),
        (
            422,
            [{"loc": ["body", "research_effort"], "msg": "Input should be 'lite' or 'standard'"}],
            "research_effort: Input should be 'lite' or 'standard'",
        ),
    ],
)
async def test_http_errors_become_clear_messages_without_retry(upstream, status, detail, expected):
    upstream.queue(Reply.error(status, detail))
    with pytest.raises(AgentError) as caught:
        await collect(make_stream(upstream.url))
    assert expected in caught.value.user_message
    assert caught.value.status == status
    assert "secret-key-123" not in caught.value.user_message
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    ("status", "detail"),
    [(404, "Cannot follow up: chat expired"), (400, "persistence_mode mismatch")],
)
async def test_continuity_refusals_are_recognised(upstream, status, detail):
    upstream.queue(Reply.error(status, detail))
    request = AgentRequest(message="More", chat_id="chat-1", from_checkpoint_id="ckpt-1")
    with pytest.raises(AgentError) as caught:
        await collect(make_stream(upstream.url, request))
    assert caught.value.kind == "cannot_continue"
    assert detail in caught.value.user_message


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_transient_statuses_are_retried_then_succeed(upstream, status):
    upstream.queue(
        Reply.error(status, "busy"), Reply.error(status, "busy"), Reply.events(*answer_stream("ok"))
    )
    notices = []
    transcript = await collect(make_stream(upstream.url, notices=notices))
    assert transcript.answer == "ok"
    assert len(upstream.requests) == 3
    assert len(notices) == 2


async def test_retry_after_is_honoured(upstream):
    upstream.queue(Reply.error(429, "slow down", retry_after=1), Reply.events(*answer_stream("ok")))
    notices = []
    started = time.monotonic()
    await collect(make_stream(upstream.url, notices=notices))
    assert time.monotonic() - started >= 0.9
    assert notices[0][1] == 1.0


async def test_retries_give_up_with_the_last_error(upstream):
    upstream.queue(*[Reply.error(503, "down for maintenance")] * 3)
    with pytest.raises(AgentError) as caught:
        await collect(make_stream(upstream.url, max_retries=2))
    assert "HTTP 503" in caught.value.user_message
    assert "down for maintenance" in caught.value.user_message
    assert len(upstream.requests) == 3


async def test_connect_failure_is_retried_and_explained():
    url = f"http://127.0.0.1:{free_port()}/v1/research-agent"  # nothing listens there
    notices = []
    with pytest.raises(AgentError) as caught:
        await collect(make_stream(url, notices=notices, max_retries=2))
    assert caught.value.kind == "unreachable"
    assert "Could not reach the research agent" in caught.value.user_message
    assert len(notices) == 2


async def test_never_retries_once_events_have_started(upstream):
    upstream.queue(
        Reply(body=[Reply.events({"type": "ANSWER", "content": "part"}).body[0], Drop()])
    )
    upstream.queue(Reply.events(*answer_stream("should not be fetched")))
    stream = make_stream(upstream.url)
    seen = []
    with pytest.raises(AgentError) as caught:
        async for event in stream.events():
            seen.append(event)
    assert caught.value.kind == "dropped"
    assert [e.type for e in seen] == ["ANSWER"]
    assert len(upstream.requests) == 1


async def test_a_retry_reads_its_body_afresh_after_one_cut_mid_line(upstream):
    cut = Reply(body=['data: {"chat_id": "c1", "message": {"type": "ANSW', Drop()])
    upstream.queue(cut, Reply.events(*answer_stream("whole")))
    stream = make_stream(upstream.url)
    transcript = await collect(stream)
    assert transcript.answer == "whole"
    assert stream.malformed_lines == 0  # the cut line did not run into the retry's first one
    assert len(upstream.requests) == 2


async def test_a_stalled_stream_times_out_with_what_arrived(upstream):
    upstream.queue(
        Reply(body=[Reply.events({"type": "ANSWER", "content": "partial"}).body[0], Stall()])
    )
    stream = make_stream(upstream.url, idle_timeout=0.5)
    seen = []
    with pytest.raises(AgentError) as caught:
        async for event in stream.events():
            seen.append(event)
    assert caught.value.kind == "stalled"
    assert "sent nothing for 0.5 s" in caught.value.user_message
    assert seen[0].content == "partial"


async def test_heartbeats_keep_a_slow_stream_alive(upstream):
    body = [": ping\n", Sleep(0.3), ": ping\n", Sleep(0.3), ": ping\n", Sleep(0.3)]
    body += Reply.events(*answer_stream("slow but fine")).body
    upstream.queue(Reply(body=body))
    transcript = await collect(make_stream(upstream.url, idle_timeout=0.5))
    assert transcript.answer == "slow but fine"


async def test_garbage_lines_are_counted_not_fatal(upstream):
    good = Reply.events(*answer_stream("fine")).body
    upstream.queue(Reply(body=["data: {broken\n", "garbage line\n", *good]))
    stream = make_stream(upstream.url)
    transcript = await collect(stream)
    assert transcript.answer == "fine"
    assert stream.malformed_lines == 1
