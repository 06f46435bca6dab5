"""One run through a provider's official SDK (openai, anthropic): retries, stalls and failures.

The SDK makes the request and decodes the SSE; each event object it yields is turned back into
its wire JSON and fed to the same adapter `render_stream` uses, so the live path and a saved
capture are read by one piece of code. Failures become `AgentError`s with the kinds and wording
of the Bigdata client. The SDK's own retries are off (`max_retries=0`): we retry with the policy
every client shares (`attempts.RetryingClient`), only before the first event and honouring
Retry-After, and tell the page through `on_retry`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2  # the HTTP library both SDKs are built on; mid-body failures surface as its errors

from chats.agent._http import AgentError, Upstream, error_detail, redact, refused, stalled
from chats.agent.events import AgentEvent
from chats.agent.providers.attempts import (
    RETRYABLE_STATUS,
    RetryableFailure,
    RetryingClient,
    refusal,
)
from chats.agent.sse import EventParser, StreamMessage

logger = logging.getLogger(__name__)

RETRYABLE = RETRYABLE_STATUS | {529}  # 529: Anthropic's "overloaded"


class SdkStream(RetryingClient):
    """Subclasses name the provider and open the SDK's stream; this runs it.

    `vendor` is the SDK module (`openai` or `anthropic`): both generate the same exception
    hierarchy (APIStatusError, APITimeoutError, APIConnectionError, APIError).
    """

    provider = ""  # "OpenAI": what messages call it
    key_variable = ""  # "OPENAI_API_KEY": what a 401 asks to check
    vendor: Any = None
    client_class: Any = None  # the SDK's async client: `openai.AsyncOpenAI`, ...

    # --- what a provider supplies ---

    def _adapter(self) -> Any:
        raise NotImplementedError

    async def _open(self, client: Any) -> Any:
        """Return the SDK's async stream of event objects (the request is made here)."""
        raise NotImplementedError

    def _client(self) -> Any:
        # Both SDKs take the same options.
        return self.client_class(
            api_key=self.config.api_key,
            base_url=self.config.url or None,
            timeout=self._timeout(),
            max_retries=0,  # `with_retries` retries instead, only before the first event
        )

    def _timeout(self) -> Any:
        return self.vendor.Timeout(
            connect=self.config.connect_timeout,
            read=self.config.idle_timeout + 5,  # our own stall check fires first
            write=10.0,
            pool=10.0,
        )

    def _http_error(self, status: int, detail: str) -> AgentError:
        upstream = Upstream(self.provider, brand=self.provider, variable=self.key_variable)
        return refused(upstream, status, detail)

    # --- the run ---

    async def _attempt(self) -> AsyncIterator[AgentEvent]:
        """One request, with an SDK client of its own; the retry policy is `with_retries`."""
        started = False
        adapter = self._adapter()
        # The SDK decodes the stream: its events go straight to the reader's parser.
        parser = self._reader(adapter).parser
        try:
            async with self._client() as client:
                stream = await self._open(client)
                async for item in self._paced(stream):
                    started = True
                    for event in self._feed(parser, wire_document(item)):
                        yield event
            for event in adapter.close():
                yield event
            if not adapter.finished:
                raise self._dropped()
        except self.vendor.APIStatusError as error:
            body = error.body
            if error.status_code < 400 and _is_stream_error(body):
                # The SDK raises an `error` event in the stream; the adapter reads it.
                for event in self._feed(parser, _stream_error(body)):
                    yield event
                return
            failure = self._http_error(error.status_code, self._detail(body))
            headers = error.response.headers
            raise refusal(failure, headers, started=started, retryable=RETRYABLE) from None
        except self.vendor.APITimeoutError:
            failure = AgentError(
                f"{self.provider} did not answer within {self.config.connect_timeout:g} s.",
                kind="unreachable",
            )
            if started:
                raise failure from None
            raise RetryableFailure(failure) from None
        except self.vendor.APIConnectionError as error:
            logger.warning("%s connect failed: %s", self.provider, type(error).__name__)
            if started:
                raise self._dropped() from None
            failure = AgentError(f"Could not reach {self.provider}.", kind="unreachable")
            raise RetryableFailure(failure) from None
        except self.vendor.APIError as error:  # an `error` object in the stream's data
            for event in self._feed(parser, _stream_error({"error": error.body})):
                yield event
        except TimeoutError:
            raise stalled(self.provider, self.config.idle_timeout) from None
        except (httpx2.TransportError, httpx2.StreamError, ValueError) as error:
            # ValueError: the SDK could not decode an event's JSON; the body is broken.
            logger.warning("%s stream broke: %s", self.provider, type(error).__name__)
            if started:
                raise self._dropped() from None
            failure = AgentError(
                f"The connection to {self.provider} dropped before it answered.",
                kind="dropped",
            )
            raise RetryableFailure(failure) from None

    async def _paced(self, stream: Any) -> AsyncIterator[Any]:
        """Yield the SDK's events; raise TimeoutError when none comes for idle_timeout."""
        iterator = stream.__aiter__()
        try:
            while True:
                try:
                    async with asyncio.timeout(self.config.idle_timeout):
                        item = await iterator.__anext__()
                except StopAsyncIteration:
                    return
                yield item
        finally:
            await stream.close()

    def _feed(self, parser: EventParser, document: dict[str, Any]) -> list[AgentEvent]:
        text = json.dumps(document, ensure_ascii=False)
        event = str(document.get("type") or "")
        return parser.feed_message(StreamMessage(event=event, document=document, text=text))

    def _dropped(self) -> AgentError:
        return AgentError(f"The connection to {self.provider} dropped mid-answer.", kind="dropped")

    def _detail(self, body: Any) -> str:
        """The error's message from any provider's error JSON, with the key masked."""
        return redact(error_detail(body), self.config.api_key)


def wire_document(item: Any) -> dict[str, Any]:
    """An SDK event object as the JSON it was built from: only the fields the wire carried."""
    if isinstance(item, dict):
        return item
    return item.model_dump(mode="json", exclude_unset=True, warnings=False)


def _is_stream_error(body: Any) -> bool:
    return isinstance(body, dict) and body.get("type") == "error"


def _stream_error(body: Any) -> dict[str, Any]:
    body = body if isinstance(body, dict) else {}
    return {"type": "error", **body}
