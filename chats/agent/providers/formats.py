"""How `render_stream --provider NAME` reads a saved body: every provider's adapter, by name.

Imported by that command only: it imports every provider's module, and with them their SDKs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from chats.agent.providers.anthropic import AnthropicAdapter
from chats.agent.providers.bigdata import BigdataAdapter
from chats.agent.providers.gemini import GeminiAdapter
from chats.agent.providers.llm_sdk import LlmSdkAdapter
from chats.agent.providers.responses import ResponsesAdapter
from chats.agent.sse import StreamAdapter


@dataclass(frozen=True, slots=True)
class StreamFormat:
    """How `render_stream` reads a provider's saved body."""

    adapter: Callable[[], StreamAdapter]
    json_lines: bool = False  # llm-sdk agents may write bare JSON lines instead of SSE


STREAM_FORMATS = {
    "bigdata": StreamFormat(BigdataAdapter),
    "gemini": StreamFormat(GeminiAdapter),
    "xai": StreamFormat(lambda: ResponsesAdapter("xai")),
    "openai": StreamFormat(lambda: ResponsesAdapter("openai")),
    "anthropic": StreamFormat(AnthropicAdapter),
    "llm-sdk": StreamFormat(LlmSdkAdapter, json_lines=True),
}
