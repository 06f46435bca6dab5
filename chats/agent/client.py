"""The HTTP client for the Research Agent: one POST, one long SSE response
(docs/PROTOCOL.md, "Research Agent").

HTTP errors only happen before the first event, so that is the only time we retry (429, 5xx,
connection failures), honouring Retry-After. Once events have flowed a failure ends the run:
replaying a research request would bill and answer twice. That policy is `providers.attempts`,
which every provider's client shares.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, fields
from typing import Any

import httpx

from chats.agent._http import (
    AgentError,
    Upstream,
    error_detail,
    host_of,
    http_transport,
    redact,
    refused,
    stream_timeout,
)
from chats.agent.events import AgentEvent
from chats.agent.providers.attempts import RetryNotice, refusal, response_events, with_retries
from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.sse import DEFAULT_MAX_LINE_CHARS, StreamAdapter, StreamReader

logger = logging.getLogger(__name__)

__all__ = ["AgentError", "AgentRequest", "AgentSettings", "AgentStream", "redact"]

RESEARCH_AGENT = Upstream("the research agent", brand="Bigdata", variable="BIGDATA_API_KEY")


@dataclass(frozen=True)
class AgentRequest:
    """The request body (docs/PROTOCOL.md, "Request")."""

    message: str
    research_effort: str = "standard"
    chat_id: str | None = None
    from_checkpoint_id: str | None = None
    persistence_mode: str = "enabled"
    # Question options (chats/agent/options.py): each sent only when set.
    model_name: str | None = None
    expected_output: str | None = None
    structured_output_schema: dict[str, Any] | None = None
    tools_configs: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        # Not `asdict`, which deep-copies every value (the schema, the tools) only to be encoded.
        values = ((field.name, getattr(self, field.name)) for field in fields(self))
        return {name: value for name, value in values if value is not None}

    def entitled_options(self) -> list[tuple[str, tuple[str, ...]]]:
        """The options this request uses that a key may lack, with words a 403 may name them by."""
        tools = self.tools_configs or {}
        used = [
            ("the pro model", ("pro", "model"), self.model_name == "pro"),
            ("charts", ("chart", "python", "code"), "python_code_execution" in tools),
            ("structured output", ("structured", "schema"), bool(self.structured_output_schema)),
            ("search filters", ("filter", "search", "tools"), "search" in tools),
            ("expected output", ("expected",), bool(self.expected_output)),
        ]
        return [(label, words) for label, words, on in used if on]


@dataclass(frozen=True)
class AgentSettings:
    url: str
    api_key: str = ""
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    max_retries: int = 3
    backoff_base: float = 0.5
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS


class AgentStream:
    """Open one run of the agent and iterate its events.

    `on_retry(message, delay)` is awaited before each retry so the page can say what is going on.
    """

    def __init__(
        self,
        request: AgentRequest,
        settings: AgentSettings,
        *,
        on_retry: RetryNotice | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        adapter: StreamAdapter | None = None,
    ) -> None:
        self.request = request
        self.settings = settings
        self.reader = StreamReader(
            adapter or BigdataAdapter(), max_line_chars=settings.max_line_chars
        )
        self._on_retry = on_retry
        self._transport = transport

    @property
    def malformed_lines(self) -> int:
        return self.reader.malformed_lines

    async def events(self) -> AsyncIterator[AgentEvent]:
        # Between two chunks: the agent's heartbeats keep a long run alive.
        timeout = stream_timeout(
            connect=self.settings.connect_timeout, idle=self.settings.idle_timeout
        )
        headers = {"Content-Type": "application/json"}
        if self.settings.api_key:
            headers["X-API-KEY"] = self.settings.api_key
        async with httpx.AsyncClient(
            timeout=timeout, transport=self._transport or http_transport()
        ) as client:
            attempts = with_retries(
                functools.partial(self._attempt, client, headers),
                max_retries=self.settings.max_retries,
                backoff_base=self.settings.backoff_base,
                on_retry=self._on_retry,
            )
            async with contextlib.aclosing(attempts):
                async for event in attempts:
                    yield event

    def _attempt(
        self, client: httpx.AsyncClient, headers: dict[str, str]
    ) -> AsyncIterator[AgentEvent]:
        """One POST; the retry policy is `with_retries`, shared by every provider's client."""
        opening = client.stream(
            "POST",
            self.settings.url,
            json=self.request.payload(),
            headers={**headers, "Accept": "text/event-stream", "Cache-Control": "no-store"},
        )
        return response_events(
            opening,
            self.reader,
            refuse=self._refusal,
            agent="the research agent",
            host=host_of(self.settings.url),
            timeouts=self.settings,
        )

    def _refusal(self, response: httpx.Response) -> Exception:
        error = _http_error(response, self.request, self.settings.api_key)
        return refusal(error, response.headers)


def _http_error(response: httpx.Response, request: AgentRequest, api_key: str) -> AgentError:
    """Build the user-facing error for a refused request from the body's `detail`."""
    status = response.status_code
    detail = redact(error_detail(response), api_key)
    continuing = bool(request.chat_id or request.from_checkpoint_id)
    lowered = detail.lower()
    if continuing and ((status == 404) or (status in {400, 409} and "persistence_mode" in lowered)):
        message = (
            "The research agent can no longer continue this conversation"
            f" ({detail or 'not found'}). You can start a fresh agent conversation from here;"
            " this chat's history stays."
        )
        error = AgentError(message, kind="cannot_continue", status=status)
    elif status == 403 and (option := _not_entitled_option(request, lowered)):
        message = f"Your API key is not entitled to {option}."
        error = AgentError(message, kind="http", status=status)
    else:
        error = refused(RESEARCH_AGENT, status, detail)
    return error


def _not_entitled_option(request: AgentRequest, detail: str) -> str:
    """Name the option a 403 refers to: the one its detail names, else the only one in use."""
    used = request.entitled_options()
    named = [label for label, words in used if any(word in detail for word in words)]
    if named:
        return named[0]
    return used[0][0] if len(used) == 1 else ""
