"""Retry a provider's streaming call only before its first event, as the Bigdata client does.

HTTP errors only happen before the first event, so that is the only time a call is repeated
(429, 5xx, connection failures), honouring Retry-After. Once events have flowed a failure ends
the run: replaying the request would bill and answer twice (`chats.agent.client`).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import AsyncIterator, Callable, Mapping

from ..client import MAX_RETRY_AFTER, AgentError, RetryNotice
from ..events import AgentEvent

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


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

    A failure after the first event is never retried: it is re-raised as its AgentError.
    """
    tries = 0
    while True:
        started = False
        try:
            async for event in attempt():
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
