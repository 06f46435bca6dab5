"""Every agent the site can talk to, by name: how to read its stream and how to call it.

Each provider has one module here with an adapter (its wire format → typed events, see
`chats.agent.sse.StreamAdapter`) and a client that calls it, with the provider's official SDK
where one exists; the Bigdata Research Agent's is `chats.agent.providers.bigdata`.
`render_stream --provider NAME` reads a saved body with the adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, NamedTuple, Protocol

from chats.agent import AgentError
from chats.agent.events import AgentEvent
from chats.agent.sse import DEFAULT_MAX_LINE_CHARS, StreamAdapter


class ConversationTurn(NamedTuple):
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
    backoff_base: float = 0.5
    max_line_chars: int = DEFAULT_MAX_LINE_CHARS


class ProviderStream(Protocol):
    """One run against a provider: its events, and how many lines had to be skipped.

    Failures raise `chats.agent.AgentError` with the same kinds the Bigdata client uses
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
    from chats.agent.providers.anthropic import AnthropicAdapter
    from chats.agent.providers.bigdata import BigdataAdapter
    from chats.agent.providers.gemini import GeminiAdapter
    from chats.agent.providers.llm_sdk import LlmSdkAdapter
    from chats.agent.providers.responses import ResponsesAdapter

    return {
        "bigdata": StreamFormat(BigdataAdapter),
        "gemini": StreamFormat(GeminiAdapter),
        "xai": StreamFormat(lambda: ResponsesAdapter("xai")),
        "openai": StreamFormat(lambda: ResponsesAdapter("openai")),
        "anthropic": StreamFormat(AnthropicAdapter),
        "llm-sdk": StreamFormat(LlmSdkAdapter, json_lines=True),
    }


# --- the agents a chat can be asked of ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Provider:
    """One agent the "Agent" select offers: its label, its client and its settings' names.

    Its settings are read here, by name, so that listing the agents on a page never imports an
    SDK: `openai` and `anthropic` together put ~150,000 objects on the heap for every full
    garbage collection to walk (docs/PERFORMANCE.md, "The garbage collector's settings").
    """

    name: str
    label: str
    module: str  # chats.agent.providers.<module>, imported when first used (SDKs are heavy)
    client: str
    api_key_setting: str
    base_url_setting: str
    model_setting: str
    # The setting that turns the provider on: its API key, or llm-sdk's URL (its token is
    # optional).
    enabled_by: str = ""

    def settings(self) -> ProviderConfig | None:
        """Return the provider's settings when it is configured (a key, or llm-sdk's URL)."""
        from django.conf import settings

        if not getattr(settings, self.enabled_by or self.api_key_setting, ""):
            return None
        return ProviderConfig(
            name=self.name,
            api_key=getattr(settings, self.api_key_setting, ""),
            base_url=getattr(settings, self.base_url_setting, ""),
            model=getattr(settings, self.model_setting, ""),
            connect_timeout=settings.AGENT_CONNECT_TIMEOUT,
            idle_timeout=settings.AGENT_IDLE_TIMEOUT,
            max_retries=settings.AGENT_MAX_RETRIES,
            max_line_chars=settings.AGENT_MAX_LINE_BYTES,
        )


def _keyed(name: str, label: str, module: str, client: str, prefix: str) -> Provider:
    """A provider configured by PREFIX_API_KEY, PREFIX_BASE_URL and PREFIX_MODEL."""
    return Provider(
        name, label, module, client, f"{prefix}_API_KEY", f"{prefix}_BASE_URL", f"{prefix}_MODEL"
    )


BIGDATA = "bigdata"
PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        _keyed("gemini", "Google Gemini", "gemini", "GeminiClient", "GEMINI"),
        _keyed("xai", "xAI Grok", "responses", "XaiClient", "XAI"),
        _keyed("openai", "OpenAI", "responses", "OpenAIClient", "OPENAI"),
        _keyed("anthropic", "Anthropic Claude", "anthropic", "AnthropicClient", "ANTHROPIC"),
        Provider(
            "llm-sdk",
            "llm-sdk agent",
            "llm_sdk",
            "LlmSdkClient",
            api_key_setting="LLMSDK_AGENT_TOKEN",  # sent as a bearer token when set
            base_url_setting="LLMSDK_AGENT_URL",
            model_setting="LLMSDK_AGENT_MODEL",
            enabled_by="LLMSDK_AGENT_URL",
        ),
    )
}


def agent_choices() -> list[tuple[str, str]]:
    """Return (name, label) of every agent this site can ask now, the Bigdata agent first.

    The Research Agent is always offered: with no BIGDATA_API_KEY the built-in demo answers.
    """
    from django.conf import settings

    bigdata = "Bigdata Research Agent" + ("" if settings.BIGDATA_API_KEY else " (demo)")
    return [(BIGDATA, bigdata)] + [
        (p.name, p.label) for p in PROVIDERS.values() if p.settings() is not None
    ]


def agent_label(agent: str) -> str:
    """Return the name the page shows for a chat's agent, configured or not."""
    if agent == BIGDATA:
        return dict(agent_choices())[BIGDATA]
    return PROVIDERS[agent].label if agent in PROVIDERS else agent


def default_agent() -> str:
    """Return DEFAULT_AGENT when it is configured, else the Research Agent."""
    from django.conf import settings

    wanted = settings.DEFAULT_AGENT
    return wanted if wanted in dict(agent_choices()) else BIGDATA


def open_stream(
    agent: str, request: Any, *, on_retry: Callable[[str, float], Awaitable[None]] | None = None
) -> ProviderStream:
    """Return the run of `request` against `agent` (an AgentRequest for the Research Agent,
    a ProviderRequest for the others)."""
    if agent == BIGDATA:
        from chats.agent.providers.bigdata import AgentStream

        return AgentStream(request, bigdata_settings(), on_retry=on_retry)
    provider = PROVIDERS.get(agent)
    config = provider.settings() if provider else None
    if provider is None or config is None:
        return _Unconfigured(provider.label if provider else agent)
    client = getattr(import_module(f"{__name__}.{provider.module}"), provider.client)
    return client(request, config, on_retry=on_retry)


class _Unconfigured:
    """The run of a chat whose agent this site no longer has a key for: it fails at once."""

    malformed_lines = 0

    def __init__(self, label: str) -> None:
        self.label = label

    async def events(self) -> AsyncIterator[AgentEvent]:
        raise AgentError(
            f"{self.label} is not configured on this site any more, so this chat cannot"
            " continue. Start a new chat with another agent.",
            kind="http",
        )
        yield  # an async generator, like every other stream


def bigdata_settings():
    """Return the Research Agent's connection settings (the demo's token when no key is set)."""
    from django.conf import settings

    from chats.agent.providers.bigdata import AgentSettings

    return AgentSettings(
        url=settings.RESEARCH_AGENT_URL,
        api_key=settings.BIGDATA_API_KEY or settings.DEMO_AGENT_TOKEN,
        connect_timeout=settings.AGENT_CONNECT_TIMEOUT,
        idle_timeout=settings.AGENT_IDLE_TIMEOUT,
        max_retries=settings.AGENT_MAX_RETRIES,
        max_line_chars=settings.AGENT_MAX_LINE_BYTES,
    )


def preload_sdks() -> None:
    """Import the SDKs of configured providers (at start-up: google-genai alone takes ~3 s,
    which would otherwise stall the event loop on a chat's first question)."""
    for provider in PROVIDERS.values():
        if provider.settings() is not None:
            import_module(f"{__name__}.{provider.module}")
            if provider.name == "gemini":
                from chats.agent.providers.gemini import load_sdk

                load_sdk()
