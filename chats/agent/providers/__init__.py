"""Every agent the site can talk to, by name: how to read its stream and how to call it.

Each provider has one module here with an adapter (its wire format → typed events, see
`chats.agent.sse.StreamAdapter`) and a client that calls it, with the provider's official SDK
where one exists. The Bigdata Research Agent's adapter and client live in `chats.agent.bigdata`
and `chats.agent.client`. `render_stream --provider NAME` reads a saved body with the adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..events import AgentEvent
from ..sse import StreamAdapter


@dataclass(frozen=True, slots=True)
class ConversationTurn:
    """One earlier question and its answer on the branch, for providers without checkpoints."""

    question: str
    answer: str


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """What the site asks of any provider; each client maps it onto its own request body."""

    message: str
    history: tuple[ConversationTurn, ...] = ()  # oldest first; empty for a first question
    research_effort: str = "standard"
    previous_response_id: str | None = None  # OpenAI/xAI may continue server-side with it


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """A provider's connection settings, read from the environment by `researchsite.settings`."""

    name: str
    api_key: str = field(default="", repr=False)
    base_url: str = ""
    model: str = ""
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    max_retries: int = 3


class ProviderStream(Protocol):
    """One run against a provider: its events, and how many lines had to be skipped.

    Failures raise `chats.agent.client.AgentError` with the same kinds the Bigdata client uses
    (http, unreachable, stalled, dropped, agent), so every provider's turn ends the same way.
    """

    malformed_lines: int

    def events(self) -> AsyncIterator[AgentEvent]: ...


@dataclass(frozen=True, slots=True)
class StreamFormat:
    """How `render_stream` reads a provider's saved body."""

    adapter: Callable[[], StreamAdapter]
    json_lines: bool = False  # llm-sdk agents may write bare JSON lines instead of SSE


def stream_formats() -> dict[str, StreamFormat]:
    """Return the wire format of every provider, by the name `--provider` takes."""
    from ..bigdata import BigdataAdapter
    from .anthropic import AnthropicAdapter
    from .gemini import GeminiAdapter
    from .llm_sdk import LlmSdkAdapter
    from .responses import ResponsesAdapter

    return {
        "bigdata": StreamFormat(BigdataAdapter),
        "gemini": StreamFormat(GeminiAdapter),
        "xai": StreamFormat(lambda: ResponsesAdapter("xai")),
        "openai": StreamFormat(lambda: ResponsesAdapter("openai")),
        "anthropic": StreamFormat(AnthropicAdapter),
        "llm-sdk": StreamFormat(LlmSdkAdapter, json_lines=True),
    }
