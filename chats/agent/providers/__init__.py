"""Every agent the site can talk to, by name: which are offered, and opening a run of one.

Each provider has one module here with an adapter (its wire format → typed events, see
`chats.agent.sse.StreamAdapter`) and a client that calls it, with the provider's official SDK
where one exists: the Research Agent's is `bigdata`, its Workflows' `workflows`. Every client
takes the same request and settings (`chats.agent.request`: `AgentRequest`, `AgentSettings`),
read here from the site's settings. `render_stream --provider NAME` reads a saved body with the
adapters `formats` names.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from importlib import import_module
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings

from chats.agent._http import AgentError
from chats.agent.events import AgentEvent
from chats.agent.providers.attempts import RetryingClient, RetryNotice
from chats.agent.providers.bigdata import RESEARCH_AGENT, AgentStream
from chats.agent.providers.workflows import WorkflowStream
from chats.agent.request import AgentRequest, AgentSettings


class ProviderStream(Protocol):
    """One run against a provider: its events, how many lines had to be skipped, and the id
    of a Workflows run once its stream has named it ("" for a question).

    Failures raise `chats.agent.AgentError` with the same kinds for every provider (http,
    unreachable, stalled, dropped, agent, cannot_continue), so every turn ends the same way.
    """

    @property
    def malformed_lines(self) -> int: ...

    @property
    def execution_id(self) -> str: ...

    def events(self) -> AsyncIterator[AgentEvent]: ...


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
    named: str  # mid-sentence in messages: "Gemini", "the llm-sdk agent"
    module: str  # chats.agent.providers.<module>, imported when first used (SDKs are heavy)
    client: str
    api_key_setting: str
    base_url_setting: str
    model_setting: str
    # The setting that turns the provider on: its API key, or llm-sdk's URL (its token is
    # optional).
    enabled_by: str = ""

    def settings(self) -> AgentSettings | None:
        """Return the provider's settings when it is configured (a key, or llm-sdk's URL)."""
        if not getattr(settings, self.enabled_by or self.api_key_setting, ""):
            return None
        return _settings(
            url=getattr(settings, self.base_url_setting, ""),
            api_key=getattr(settings, self.api_key_setting, ""),
            model=getattr(settings, self.model_setting, ""),
        )


def _keyed(name: str, label: str, named: str, module: str, client: str, prefix: str) -> Provider:
    """A provider configured by PREFIX_API_KEY, PREFIX_BASE_URL and PREFIX_MODEL."""
    return Provider(
        name,
        label,
        named,
        module,
        client,
        f"{prefix}_API_KEY",
        f"{prefix}_BASE_URL",
        f"{prefix}_MODEL",
    )


BIGDATA = "bigdata"
PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        _keyed("gemini", "Google Gemini", "Gemini", "gemini", "GeminiClient", "GEMINI"),
        _keyed("xai", "xAI Grok", "xAI", "responses", "XaiClient", "XAI"),
        _keyed("openai", "OpenAI", "OpenAI", "responses", "OpenAIClient", "OPENAI"),
        _keyed(
            "anthropic",
            "Anthropic Claude",
            "Anthropic",
            "anthropic",
            "AnthropicClient",
            "ANTHROPIC",
        ),
        Provider(
            "llm-sdk",
            "llm-sdk agent",
            "the llm-sdk agent",
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
    bigdata = "Bigdata Research Agent" + ("" if settings.BIGDATA_API_KEY else " (demo)")
    return [(BIGDATA, bigdata)] + [
        (p.name, p.label) for p in PROVIDERS.values() if p.settings() is not None
    ]


def agent_label(agent: str) -> str:
    """Return the name the page shows for a chat's agent, configured or not."""
    if agent == BIGDATA:
        return dict(agent_choices())[BIGDATA]
    return PROVIDERS[agent].label if agent in PROVIDERS else agent


def agent_name(agent: str) -> str:
    """Return how a message names a chat's agent mid-sentence: "the research agent", "Gemini"."""
    if agent == BIGDATA:
        return RESEARCH_AGENT.name
    return PROVIDERS[agent].named if agent in PROVIDERS else agent


def default_agent() -> str:
    """Return DEFAULT_AGENT when it is configured, else the Research Agent."""
    wanted = settings.DEFAULT_AGENT
    return wanted if wanted in dict(agent_choices()) else BIGDATA


# --- opening a run --------------------------------------------------------------------------


def open_stream(
    agent: str, request: AgentRequest, *, on_retry: RetryNotice | None = None
) -> ProviderStream:
    """Return the run of `request` against `agent`: a question, or a Workflows run of the
    Research Agent (`request.workflow`). `on_retry(message, delay)` is awaited before a retry or
    a resume, for the page to say what is going on."""
    if agent == BIGDATA:
        if request.workflow is not None:
            config = replace(bigdata_settings(), url=workflow_url())
            return WorkflowStream(
                request, config, on_retry=on_retry, max_resumes=settings.WORKFLOW_MAX_RESUMES
            )
        return AgentStream(request, bigdata_settings(), on_retry=on_retry)
    provider = PROVIDERS.get(agent)
    config = provider.settings() if provider else None
    if provider is None or config is None:
        return _Unconfigured(provider.label if provider else agent)
    module = import_module(f"{__name__}.{provider.module}")
    client: type[RetryingClient] = getattr(module, provider.client)
    return client(request, config, on_retry=on_retry)


class _Unconfigured:
    """The run of a chat whose agent this site no longer has a key for: it fails at once."""

    malformed_lines = 0
    execution_id = ""

    def __init__(self, label: str) -> None:
        self.label = label

    async def events(self) -> AsyncIterator[AgentEvent]:
        raise AgentError(
            f"{self.label} is not configured on this site any more, so this chat cannot"
            " continue. Start a new chat with another agent.",
            kind="http",
        )
        yield  # an async generator, like every other stream


def _settings(*, url: str, api_key: str, model: str = "") -> AgentSettings:
    """An agent's own address, key and model, with the site's limits of a call (AGENT_*)."""
    return AgentSettings(
        url=url,
        api_key=api_key,
        model=model,
        connect_timeout=settings.AGENT_CONNECT_TIMEOUT,
        idle_timeout=settings.AGENT_IDLE_TIMEOUT,
        max_retries=settings.AGENT_MAX_RETRIES,
        max_line_chars=settings.AGENT_MAX_LINE_BYTES,
    )


def bigdata_settings() -> AgentSettings:
    """Return the Research Agent's settings (the demo's token when no key is set)."""
    return _settings(
        url=settings.RESEARCH_AGENT_URL,
        api_key=settings.BIGDATA_API_KEY or settings.DEMO_AGENT_TOKEN,
    )


def workflow_url() -> str:
    """WORKFLOW_URL, else the Workflows endpoint beside the research agent: RESEARCH_AGENT_URL
    with its last path segment replaced by `workflow/execute` (`…/v1/research-agent` →
    `…/v1/workflow/execute`)."""
    if settings.WORKFLOW_URL:
        return settings.WORKFLOW_URL
    parts = urlsplit(settings.RESEARCH_AGENT_URL)
    beside = parts.path.rstrip("/").rpartition("/")[0]
    return urlunsplit((parts.scheme, parts.netloc, f"{beside}/workflow/execute", "", ""))


def preload_sdks() -> None:
    """Import the SDKs of configured providers (at start-up: google-genai alone takes ~3 s,
    which would otherwise stall the event loop on a chat's first question)."""
    for provider in PROVIDERS.values():
        if provider.settings() is not None:
            module = import_module(f"{__name__}.{provider.module}")
            if provider.name == "gemini":
                module.load_sdk()  # its module imports google-genai only when asked to
