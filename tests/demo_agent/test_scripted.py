"""The scripted stand-in over real HTTP: what it records, and every kind of reply it can play."""

from __future__ import annotations

import itertools
import threading
import time
from http import HTTPStatus

import httpx
import pytest

from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import parse_sse_text
from demo_agent.scripted import Drop, Reply, ScriptedAgent, Sleep, Stall, answer_stream
from demo_agent.wire import sse_event
from tests.servers import serve_asgi
from tests.waiting import wait_until_sync


@pytest.fixture
def agent():
    app = ScriptedAgent()
    with serve_asgi(app) as url:
        app.url = f"{url}/v1/research-agent"
        yield app


def post(url: str, **kwargs) -> httpx.Response:
    return httpx.post(url, json={"message": "Hi"}, trust_env=False, timeout=10, **kwargs)


def test_each_request_is_recorded_with_its_json_and_headers(agent):
    agent.queue(Reply.events(*answer_stream("ok")), Reply.events(*answer_stream("ok")))
    post(agent.url, headers={"X-API-KEY": "k-1"})
    httpx.post(agent.url, content=b"not json", trust_env=False)
    assert agent.payloads == [{"message": "Hi"}, None]
    assert agent.requests[0].path == "/v1/research-agent"
    assert agent.requests[0].headers["x-api-key"] == "k-1"


def test_events_are_written_as_the_demo_agent_writes_them(agent):
    messages = answer_stream("Fine.", checkpoint="ckpt-7")
    agent.queue(Reply.events(*messages, chat_id="chat-7"))
    response = post(agent.url)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.content == b"".join(sse_event("chat-7", m) for m in messages)
    events, malformed = parse_sse_text(response.text, BigdataAdapter())
    assert [e.type for e in events][-1] == "COMPLETE"
    assert malformed == 0


def test_an_error_reply_is_json_with_its_status_and_retry_after(agent):
    agent.queue(Reply.error(429, "slow down", retry_after=2.5))
    response = post(agent.url)
    assert response.status_code == HTTPStatus.TOO_MANY_REQUESTS
    assert response.headers["content-type"] == "application/json"
    assert response.headers["retry-after"] == "2.5"
    assert response.json() == {"detail": "slow down"}


def test_with_nothing_queued_it_asks_respond_else_answers_500(agent):
    assert post(agent.url).status_code == HTTPStatus.INTERNAL_SERVER_ERROR
    agent.respond = lambda request: Reply.error(418, request.json["message"])
    assert post(agent.url).json() == {"detail": "Hi"}


def test_rate_paces_steps_on_a_schedule_and_takes_each_only_when_due(agent):
    sent_at: list[float] = []

    def stamped():
        for i in range(5):
            sent_at.append(time.monotonic())
            yield f": step {i}\n"

    agent.queue(Reply(body=stamped(), rate=20))
    started = time.monotonic()
    post(agent.url)
    assert time.monotonic() - started >= 0.2
    # A generator step is taken after its wait, so each stamp is at least 1/rate after the last.
    gaps = [b - a for a, b in itertools.pairwise(sent_at)]
    assert min(gaps) >= 0.04


def test_sleep_pauses_between_lines(agent):
    agent.queue(Reply(body=[": a\n", Sleep(0.3), ": b\n"]))
    started = time.monotonic()
    assert post(agent.url).text == ": a\n: b\n"
    assert time.monotonic() - started >= 0.3


def test_a_sleep_ends_when_the_client_leaves_and_nothing_more_is_sent(agent):
    """A stand-in whose client gave up (a read timeout, a stopped turn) is done: its server
    shuts down without waiting out the sleep."""
    went_on, ended = threading.Event(), threading.Event()

    def body():
        try:
            yield ": first\n"
            yield Sleep(60)
            went_on.set()
            yield ": second\n"
        finally:
            ended.set()  # the reply is over: its steps are dropped

    agent.queue(Reply(body=body()))
    with httpx.stream("POST", agent.url, json={}, trust_env=False) as response:
        assert next(response.iter_bytes()) == b": first\n"
    wait_until_sync(ended.is_set, timeout=30, what="the reply to end")
    assert not went_on.is_set()


def test_drop_cuts_the_body_after_what_was_sent(agent):
    agent.queue(Reply(body=[sse_event("c", {"type": "ANSWER", "content": "part"}), Drop()]))
    received = b""
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", agent.url, json={}, trust_env=False) as response,
    ):
        for chunk in response.iter_bytes():
            received += chunk
    assert b"part" in received


def test_stall_sends_nothing_more_and_keeps_the_connection_open(agent):
    agent.queue(Reply(body=[": first\n", Stall()]))
    received = b""
    with (
        pytest.raises(httpx.ReadTimeout),
        httpx.stream("POST", agent.url, json={}, trust_env=False, timeout=0.5) as response,
    ):
        for chunk in response.iter_bytes():
            received += chunk
    assert received == b": first\n"


def test_a_provider_stand_in_answers_only_its_route_and_types_by_status():
    app = ScriptedAgent(
        answers=lambda method, path: method == "POST" and path == "/v1/messages",
        not_found=Reply.json(404, {"error": "no such route"}),
        content_type="application/x-ndjson",
    )
    app.queue(Reply(body=['{"a": 1}\n']), Reply(status=503, body=['{"error": "busy"}']))
    with serve_asgi(app) as url:
        missing = post(f"{url}/v1/other?x=1")
        answered = post(f"{url}/v1/messages?alt=sse")
        refused = post(f"{url}/v1/messages")
    assert (missing.status_code, missing.json()) == (404, {"error": "no such route"})
    assert answered.headers["content-type"] == "application/x-ndjson"
    assert answered.text == '{"a": 1}\n'
    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/json"
    assert app.paths == ["POST /v1/other", "POST /v1/messages", "POST /v1/messages"]
    assert [r.query for r in app.requests] == ["x=1", "alt=sse", ""]
