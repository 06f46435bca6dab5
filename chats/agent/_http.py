"""What every provider's client shares: the HTTP transport and pool, timeouts, and one way to
turn a refused or failed request into what the user is told.

Private to `chats.agent`: the rest of the site reaches these through `chats.agent`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from chats.agent.aiohttp_transport import AiohttpTransport, new_session
from chats.agent.redaction import redact  # noqa: F401 (the edge's one redaction, re-exported)
from chats.loop.per_loop import PerLoop
from chats.loop.ticks import get_ticks


class AgentError(Exception):
    """A failure the user is told about; `user_message` never contains the API key."""

    def __init__(self, user_message: str, *, kind: str, status: int | None = None) -> None:
        super().__init__(user_message)
        self.user_message = user_message
        self.kind = kind
        self.status = status


# --- The transport ---------------------------------------------------------------------------


@functools.cache
def ssl_context():
    """One TLS context for all runs: building one loads the CA bundle (~17 ms of blocked loop)."""
    return httpx.create_ssl_context()


# This event loop's connections to the agents, shared by every turn it runs.
_sessions = PerLoop(lambda: new_session(ssl_context()))


def http_transport() -> httpx.AsyncBaseTransport:
    """The transport of every streamed call (see aiohttp_transport for why not httpx's own),
    over this event loop's pool of connections, reading paced streams at the relay's ticks."""
    return AiohttpTransport(_sessions(), tick=get_ticks().wait)


async def close_http_sessions() -> None:
    """Close this event loop's connections to the agents. The server's shutdown does; any other
    loop that ran turns must too, or aiohttp logs the pool as unclosed when it is collected."""
    session = _sessions.pop()
    if session is not None:
        await session.close()


def stream_timeout(*, connect: float, idle: float) -> httpx.Timeout:
    """The timeouts of a streamed answer: `idle` is the longest wait between two chunks."""
    return httpx.Timeout(connect=connect, read=idle, write=10.0, pool=10.0)


def host_of(url: str) -> str:
    """The host (and port) an error names: never the path or query, which may carry a key."""
    return urlsplit(url).netloc or url


# --- Failures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    """How the user's messages name one provider and what they ask to check."""

    name: str  # mid-sentence: "the research agent", "OpenAI"
    brand: str  # whose key it is: "Bigdata", "OpenAI"
    variable: str  # the setting to check when the key is refused: "OPENAI_API_KEY"
    credential: str = "API key"
    bad_key_statuses: frozenset[int] = frozenset({401})  # some refuse a bad key with 403 too
    not_found: str = "what was asked for"  # what a 404 could not find

    @property
    def subject(self) -> str:
        return subject(self.name)


def subject(name: str) -> str:
    """A name said mid-sentence ("the research agent", "xAI") as a sentence's start ("The
    research agent"; "xAI" stays as it is)."""
    return "The" + name[3:] if name.startswith("the ") else name


def stalled(name: str, seconds: float) -> AgentError:
    """An agent fell silent mid-answer for `seconds`: one wording, whoever noticed (the client's
    read timeout, an SDK's, the run's own idle limit). `name` is said mid-sentence."""
    return AgentError(
        f"{subject(name)} sent nothing for {seconds:g} s, so the answer was cut off.",
        kind="stalled",
    )


def refused(upstream: Upstream, status: int, detail: str, *, bad_key: bool = False) -> AgentError:
    """The one mapping from a provider's HTTP status to the user's message, for every provider.

    `detail` is the provider's own words (`error_detail`), already redacted; it follows the
    message, except when the key was refused (the detail may quote it). `bad_key`: the provider
    said so in another way (Gemini's 400 `API_KEY_INVALID`).
    """
    who = upstream.subject
    if bad_key or status in upstream.bad_key_statuses:
        message = f"{who} did not accept the {upstream.credential} (check {upstream.variable})"
        detail = ""
    elif status in (400, 422):
        message = f"{who} rejected the request"
    elif status == 403:
        message = f"The {upstream.brand} {upstream.credential} is not allowed to make this request"
    elif status == 404:
        message = f"{who} could not find {upstream.not_found}"
    elif status == 429:
        message = f"{who} is rate limiting requests; retried and gave up"
    elif status == 529:
        message = f"{who} is overloaded; retried and gave up"
    else:
        message = f"{who} failed (HTTP {status})"
    if detail:
        message = f"{message}: {detail}"
    return AgentError(message.rstrip(".") + ".", kind="http", status=status)


def error_detail(body: Any) -> str:
    """The message in any provider's error body, as one line: `{"detail": ...}` (a list of
    `{loc, msg}` for 400 and 422 on the Research Agent), `{"error": {"message"}}` (OpenAI,
    Anthropic's inner object, llm-sdk), `{"error": "..."}` (xAI, llm-sdk), `message`, `code`;
    a response whose body is not JSON gives its text."""
    if isinstance(body, httpx.Response):
        try:
            body = body.json()
        except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
            return body.text.strip()[:2000]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error_detail(error)
        if isinstance(error, str):
            return error
        detail = body.get("detail")
        if isinstance(detail, list):
            return _validation_errors(detail)
        for key in ("detail", "message", "code"):
            if isinstance(body.get(key), str):
                return body[key]
        return str(detail) if detail is not None else ""
    if isinstance(body, list):
        return _validation_errors(body)
    return body if isinstance(body, str) else ""


def _validation_errors(items: list[Any]) -> str:
    parts = []
    for item in items:
        if isinstance(item, dict):
            location = ".".join(str(p) for p in item.get("loc", []) if p != "body")
            parts.append(f"{location}: {item.get('msg', '')}" if location else str(item.get("msg")))
        else:
            parts.append(str(item))
    return "; ".join(parts)
