"""Retrying a provider call only before its first event."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from chats.agent import AgentError
from chats.agent.events import AnswerEvent
from chats.agent.providers.attempts import (
    RetryableFailure,
    retry_after_seconds,
    transport_failure,
    with_retries,
)
from chats.agent.request import AgentSettings


def test_retry_after_in_seconds_or_as_an_http_date():
    assert retry_after_seconds({"Retry-After": "2.5"}) == 2.5
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    later = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 15 < retry_after_seconds({"retry-after": later}) <= 20


async def test_a_failure_after_the_first_event_is_not_retried():
    calls = []

    async def attempt():
        calls.append(1)
        yield AnswerEvent(content="Hi")
        raise RetryableFailure(AgentError("dropped", kind="dropped"))

    with pytest.raises(AgentError, match="dropped"):
        _ = [event async for event in with_retries(attempt, max_retries=3, backoff_base=0)]
    assert len(calls) == 1


async def test_failures_before_the_first_event_are_retried_then_given_up():
    notices = []

    async def attempt():
        raise RetryableFailure(AgentError("busy", kind="http", status=503), retry_after=0)
        yield  # pragma: no cover

    async def notice(message, delay):
        notices.append((message, delay))

    with pytest.raises(AgentError, match="busy"):
        _ = [e async for e in with_retries(attempt, max_retries=2, on_retry=notice)]
    assert notices == [("busy", 0), ("busy", 0)]


@pytest.mark.parametrize(
    ("error", "started", "retried", "kind", "message"),
    [
        (httpx.ConnectError("x"), False, True, "unreachable", "Could not reach Gemini at h:1."),
        (httpx.ConnectTimeout("x"), False, True, "unreachable", "Gemini at h:1 did not answer"),
        (httpx.ReadTimeout("x"), False, False, "stalled", "Gemini sent nothing for 9 s"),
        (httpx.ReadError("x"), False, True, "dropped", "dropped before it answered."),
        (httpx.RemoteProtocolError("x"), True, False, "dropped", "dropped mid-answer."),
    ],
)
def test_transport_errors_become_the_user_message_and_only_early_ones_are_retried(
    error, started, retried, kind, message
):
    timeouts = AgentSettings(url="http://h:1", connect_timeout=2, idle_timeout=9)
    failure = transport_failure(error, started, "Gemini", "h:1", timeouts)
    assert isinstance(failure, RetryableFailure) is retried
    agent_error = failure.error if retried else failure
    assert agent_error.kind == kind
    assert message in agent_error.user_message
