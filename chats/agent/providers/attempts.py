"""The one retry policy of every agent client (Bigdata, Gemini, llm-sdk, OpenAI, xAI, Anthropic).

HTTP errors only happen before the first event, so that is the only time a call is repeated
(429, 5xx, connection failures), honouring Retry-After and otherwise backing off exponentially,
and the page is told through `on_retry`. Once events have flowed a failure ends the run:
replaying the request would bill and answer twice. Every client is a `RetryingClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx

from chats.agent._http import AgentError, host_of, http_transport, stalled, stream_timeout, subject
from chats.agent.aiohttp_transport import aiter_body
from chats.agent.events import AgentEvent
from chats.agent.request import AgentRequest, AgentSettings
from chats.agent.sse import StreamAdapter, StreamReader, aiter_events

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 30.0

RetryNotice = Callable[[str, float], Awaitable[None]]


class RetryableFailure(Exception):
    """Raised by an attempt that failed before its first event and may be tried again."""

    def __init__(self, error: AgentError, retry_after: float | None = None) -> None:
        super().__init__(error.user_message)
        self.error = error
        self.retry_after = retry_after


async def with_retries(
    attempt: Callable[[], AsyncIterator[AgentEvent]],
    *,
    max_retries: int,
    backoff_base: float = 0.5,
    on_retry: RetryNotice | None = None,
) -> AsyncIterator[AgentEvent]:
    """Yield the events of `attempt()`, calling it again after a RetryableFailure.

    An attempt raises its AgentError itself for what is never retried; a RetryableFailure after
    the first event is not retried either: it is re-raised as its AgentError.
    """
    tries = 0
    while True:
        started = False
        try:
            # aclosing: a reader that stops early closes the attempt's response now, not at GC.
            async with contextlib.aclosing(attempt()) as events:
                async for event in events:
                    started = True
                    yield event
            return
        except RetryableFailure as failure:
            if started:
                raise failure.error from failure
            tries += 1
            if tries > max_retries:
                raise failure.error from failure
            delay = backoff(tries, failure.retry_after, backoff_base)
            if on_retry is not None:
                await on_retry(failure.error.user_message, delay)
            await asyncio.sleep(delay)


def backoff(tries: int, retry_after: float | None, base: float) -> float:
    if retry_after is not None:
        return min(max(retry_after, 0.0), MAX_RETRY_AFTER)
    return min(base * 2 ** (tries - 1), MAX_RETRY_AFTER)


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Return Retry-After (seconds or an HTTP date) as seconds from now, or None."""
    value = (headers or {}).get("retry-after") or (headers or {}).get("Retry-After")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


# What `transport_failure` maps: the httpx errors a streamed call meets.
TRANSPORT_ERRORS = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadTimeout,
    httpx.RemoteProtocolError,
    httpx.ReadError,
)


class RetryingClient:
    """One question to a provider: `_attempt()` asks it once and yields the events of the
    answer, and `events()` asks again, by the policy above, while an attempt fails before its
    first event; `on_retry(message, delay)` is awaited before each retry so the page can say
    what is going on.

    Each attempt reads its answer with a reader of its own (`_reader`), so that a body cut
    mid-line cannot run into the next one's; `malformed_lines` counts what they all skipped.
    """

    execution_id = ""  # a Workflows run's id (chats/agent/providers/workflows.py)

    def __init__(
        self, request: AgentRequest, config: AgentSettings, *, on_retry: RetryNotice | None = None
    ) -> None:
        self.request = request
        self.config = config
        self._on_retry = on_retry
        self._readers: list[StreamReader] = []

    @property
    def malformed_lines(self) -> int:
        return sum(reader.malformed_lines for reader in self._readers)

    def events(self) -> AsyncIterator[AgentEvent]:
        return with_retries(
            self._attempt,
            max_retries=self.config.max_retries,
            backoff_base=self.config.backoff_base,
            on_retry=self._on_retry,
        )

    def _attempt(self) -> AsyncIterator[AgentEvent]:
        """Ask once: raise RetryableFailure for a failure that may be tried again."""
        raise NotImplementedError

    def _reader(self, adapter: StreamAdapter, *, json_lines: bool = False) -> StreamReader:
        reader = StreamReader(
            adapter, max_line_chars=self.config.max_line_chars, json_lines=json_lines
        )
        self._readers.append(reader)
        return reader


def transport_failure(
    error: httpx.TransportError, started: bool, agent: str, host: str, timeouts: AgentSettings
) -> Exception:
    """The exception to raise for an httpx transport error of a client that calls httpx itself.

    `agent` names it mid-sentence ("the research agent", "Gemini"). Connecting failures and a
    connection dropped before the first event may be retried; a silence never is.
    """
    named = subject(agent)
    if isinstance(error, httpx.ConnectError):
        logger.warning("%s connect failed: %s", named, type(error).__name__)
        message = f"Could not reach {agent} at {host}."
        return RetryableFailure(AgentError(message, kind="unreachable"))
    if isinstance(error, httpx.ConnectTimeout):
        message = f"{named} at {host} did not answer within {timeouts.connect_timeout:g} s."
        return RetryableFailure(AgentError(message, kind="unreachable"))
    if isinstance(error, httpx.ReadTimeout):
        return stalled(agent, timeouts.idle_timeout)
    if started:
        return AgentError(f"The connection to {agent} dropped mid-answer.", kind="dropped")
    message = f"The connection to {agent} dropped before it answered."
    return RetryableFailure(AgentError(message, kind="dropped"))


def refusal(
    error: AgentError,
    headers: Mapping[str, str] | None,
    *,
    started: bool = False,
    retryable: frozenset[int] = RETRYABLE_STATUS,
) -> Exception:
    """What a client raises for a refused request: a RetryableFailure (honouring Retry-After)
    when the status allows a retry and no event has come yet, else the error itself."""
    if started or error.status not in retryable:
        return error
    return RetryableFailure(error, retry_after_seconds(headers))


async def posted_events(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    reader: StreamReader,
    *,
    refuse: Callable[[httpx.Response], Exception],
    agent: str,
    timeouts: AgentSettings,
) -> AsyncIterator[AgentEvent]:
    """The events of one POST of a JSON `body` whose answer streams, made with httpx over this
    event loop's pool (`http_transport`): a refused request raises `refuse(response)` once its
    body is read, each line of the body goes through `reader`, and a transport failure is
    worded by `transport_failure` (retried only before the first event). `agent` names the
    provider mid-sentence ("the research agent")."""
    timeout = stream_timeout(connect=timeouts.connect_timeout, idle=timeouts.idle_timeout)
    started = False
    try:
        async with (
            httpx.AsyncClient(timeout=timeout, transport=http_transport()) as client,
            client.stream("POST", url, json=body, headers=headers) as response,
        ):
            if response.status_code >= 400:
                await response.aread()
                raise refuse(response)
            async with contextlib.aclosing(aiter_body(response)) as chunks:
                async for event in aiter_events(chunks, reader):
                    started = True
                    yield event
    except TRANSPORT_ERRORS as error:
        raise transport_failure(error, started, agent, host_of(url), timeouts) from error
