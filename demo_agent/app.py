"""The demo agent as a plain ASGI application speaking the Research Agent's wire protocol.

POST a research request (any path) and get `text/event-stream`: one `data: <json>` line per event,
each in the `{"chat_id", "message"}` envelope (docs/PROTOCOL.md), with `: keep-alive` comments
between. Request errors are answered before any event, as JSON `{"detail": ...}` (docs/PROTOCOL.md,
"HTTP errors").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from demo_agent.conversation import Conversation, Conversations
from demo_agent.errors import HttpError
from demo_agent.question import TOPICS
from demo_agent.request import parse_request
from demo_agent.tokens import TokenSigner
from demo_agent.turn import Finished, Heartbeat, Library, Pause, ResearchTurn, load_library
from demo_agent.wire import (
    HEARTBEAT,
    Receive,
    Scope,
    Send,
    answered_if_not_http,
    end_stream,
    read_body,
    send_chunk,
    send_json,
    sse_event,
    start_stream,
)
from demo_agent.workflows import PATH_SUFFIX as WORKFLOW_PATH_SUFFIX
from demo_agent.workflows import DemoWorkflows

logger = logging.getLogger(__name__)


class DemoAgentApp:
    """An ASGI app that answers research questions from the bundled demo corpus."""

    def __init__(
        self,
        secret: str,
        pace: float = 1.0,
        chat_ttl_seconds: float = 3600.0,
        *,
        pro_entitled: bool = True,
    ) -> None:
        self.pace = max(0.0, float(pace))
        self.pro_entitled = pro_entitled  # False answers `model_name: pro` with a 403
        self._library = load_library()
        signer = TokenSigner(
            secret,
            companies=[company.key for company in self._library.corpus.companies],
            topics=[topic.key for topic in TOPICS],
        )
        self._conversations = Conversations(signer, chat_ttl_seconds=chat_ttl_seconds)
        self.active_turns = 0  # streams being generated now; tests watch it fall on disconnect
        self._workflows = DemoWorkflows(self)

    @property
    def library(self) -> Library:
        return self._library

    async def sleep(self, seconds: float, disconnected: asyncio.Event) -> None:
        await self._sleep(seconds, disconnected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await answered_if_not_http(scope, receive, send):
            return
        if scope["method"] != "POST":
            await send_json(send, 405, {"detail": "Method Not Allowed"}, [(b"allow", b"POST")])
            return
        if scope["path"].endswith(WORKFLOW_PATH_SUFFIX):
            await self._serve_workflow(receive, send)
            return
        try:
            body = await read_body(receive)
            if body is None:
                return  # the client left before sending its question
            request = parse_request(body)
            if request.options.pro and not self.pro_entitled:
                raise HttpError(403, "This API key is not entitled to the pro model tier.")
            conversation = self._conversations.resolve(request)
        except HttpError as error:
            await send_json(send, error.status, {"detail": error.detail})
            return
        turn = ResearchTurn.for_request(
            request, context=conversation.context, library=self._library
        )
        await self._stream(turn, conversation, receive, send)

    async def _stream(
        self, turn: ResearchTurn, conversation: Conversation, receive: Receive, send: Send
    ) -> None:
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, disconnected))
        self.active_turns += 1
        started = False
        try:
            await start_stream(send)
            started = True
            for step in turn.steps():
                if disconnected.is_set():
                    return
                if isinstance(step, Pause):
                    await self._sleep(step.seconds, disconnected)
                    continue
                if isinstance(step, Heartbeat):
                    chunk = HEARTBEAT
                elif isinstance(step, Finished):
                    checkpoint_id = self._conversations.checkpoint(conversation, step.turn)
                    complete = {
                        "type": "COMPLETE",
                        "checkpoint_id": checkpoint_id,
                        "consumption": step.consumption,
                    }
                    chunk = sse_event(conversation.chat_id, complete)
                else:
                    chunk = sse_event(conversation.chat_id, step)
                await send_chunk(send, chunk)
            await end_stream(send)
        except OSError:
            return  # servers that raise when writing to a closed connection (uvicorn drops it)
        except Exception:
            logger.exception("The demo agent failed while answering")
            if started and not disconnected.is_set():
                error = {"type": "ERROR", "error": "The demo agent failed: internal error"}
                with contextlib.suppress(OSError):
                    await send_chunk(send, sse_event(conversation.chat_id, error))
                    await end_stream(send)
        finally:
            watcher.cancel()
            self.active_turns -= 1

    async def _serve_workflow(self, receive: Receive, send: Send) -> None:
        try:
            body = await read_body(receive)
        except HttpError as error:
            await send_json(send, error.status, {"detail": error.detail})
            return
        if body is None:
            return
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch_disconnect(receive, disconnected))
        try:
            await self._workflows.serve(body, receive, send, disconnected)
        except OSError:
            return
        finally:
            watcher.cancel()

    async def _sleep(self, seconds: float, disconnected: asyncio.Event) -> None:
        """Sleep at the configured pace, waking at once if the client disconnects."""
        delay = seconds * self.pace
        if delay <= 0:
            await asyncio.sleep(0)  # no sleeping, but let the disconnect watcher run
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(disconnected.wait(), delay)


async def _watch_disconnect(receive: Receive, disconnected: asyncio.Event) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    disconnected.set()
