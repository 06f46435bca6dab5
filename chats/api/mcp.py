"""The MCP server at /mcp: ResearchSite's research as tools for MCP clients (Claude Desktop, an
agent framework), with the official `mcp` SDK over streamable HTTP.

- `research(question, agent?, chat_id?)`: asks a question in a new chat, or continues one of the
  caller's chats, and waits for the answer: an ordinary turn of the caller's library, started
  by `chats.run.asks.ask_start` as a page's ask is, under the same limits. It returns the cited
  answer as "Export Markdown" writes it (the question, the answer with its footnotes, the
  sources as the footnotes' definitions, the figure check) and the chat to continue.
- `search_chats(query)`: the caller's chats matching every word, as "Search chats" finds them.

The SDK runs statelessly (`stateless_http`): each request stands alone, so any worker behind
the proxy can answer it, and no session holds a user. `McpGate` lets a request through only with
a bearer API token with the `ask` scope (`chats.api.auth`, the API's own check and rate; the
host and the Origin are checked before it, by researchsite/origins.py); the token rides in the
ASGI scope to the tools. researchsite/asgi.py mounts `mcp_app` and runs `mcp_running` in the
site's lifespan (the SDK's session manager must run while requests are served); each event loop
has its own.
"""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import AsyncIterator
from typing import Any

from django.urls import reverse
from django.utils.html import strip_tags
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from ninja.errors import AuthenticationError, HttpError

from chats.agent.providers import agent_choices
from chats.answer.export import export_turns_markdown
from chats.api.auth import token_rates, token_with_scope
from chats.api.models import ApiToken
from chats.api.selectors import api_token_is_usable
from chats.errors import RequestRefused
from chats.library.search import chat_search_for_user
from chats.live.protocol import parse_client_frame
from chats.loop.database_thread import on_database_thread
from chats.loop.per_loop import PerLoop
from chats.models import Chat, Turn
from chats.run.asks import ask_start
from chats.run.registry import run_ended
from chats.selectors import chat_find_readable, turn_get
from chats.services import TurnAsk, chat_create

CALLER = "researchsite.api_token"  # where McpGate leaves the caller's token in the scope
PATH = "/mcp"

server = MCPServer(
    "ResearchSite",
    instructions=(
        "Cited, checked research answers. `research` asks a question (or continues a chat with "
        "chat_id) and returns the answer as Markdown with numbered footnotes, its sources and "
        "a summary of the figure check; `search_chats` finds earlier research."
    ),
)


def _caller(ctx: Context) -> ApiToken:
    return ctx.request_context.request.scope[CALLER]


@server.tool()
async def research(
    question: str, ctx: Context, agent: str | None = None, chat_id: int | None = None
) -> str:
    """Research a question and return the cited answer as Markdown: footnotes, sources, figure
    check. `agent`: an agent id for a new chat (default: the site's). `chat_id`: continue that
    chat of yours instead of starting one (its agent answers). The answer is saved as a chat
    in your ResearchSite library."""
    token = _caller(ctx)
    try:
        asked = parse_client_frame({"type": "ask", "message": question})  # the page's rules
    except RequestRefused as refused:
        raise ToolError(str(refused)) from refused
    chat = await on_database_thread(_chat_for, token.owner, agent, chat_id)
    ask = TurnAsk(chat=chat, question=asked.message, research_effort=asked.research_effort)
    try:
        started = await ask_start(ask, lambda: api_token_is_usable(token_id=token.pk))
    except RequestRefused as refused:  # a limit, as the page is told
        raise ToolError(str(refused)) from refused
    if started is None:
        raise ToolError("This API token was revoked or has expired.")
    turn_id = started.turn.turn.pk
    await run_ended(turn_id)
    return await on_database_thread(_answer, turn_id)


def _chat_for(owner, agent: str | None, chat_id: int | None) -> Chat:
    """The caller's chat to continue, or a new one answered by `agent`."""
    if chat_id is not None:
        chat = chat_find_readable(user=owner, chat_id=chat_id)
        if chat is None:
            raise ToolError(f"You have no chat {chat_id}.")
        if chat.owner_id != owner.pk:
            raise ToolError(f"Chat {chat_id} is shared with you to read: ask in a chat of yours.")
        if agent and agent != chat.provider:
            raise ToolError(f"Chat {chat_id} is answered by {chat.provider!r}, not {agent!r}.")
        return chat
    offered = dict(agent_choices())
    if agent and agent not in offered:
        raise ToolError(f"No available agent {agent!r}; available: {', '.join(offered)}.")
    return chat_create(owner=owner, provider=agent or "")


def _answer(turn_id: int) -> str:
    """The finished turn as the tool returns it (database)."""
    turn = turn_get(turn_id=turn_id)
    if turn.status != Turn.Status.COMPLETE:
        raise ToolError(f"The answer ended {turn.status}: {turn.error or 'no answer'}")
    page = reverse("chat_detail", args=[turn.chat_id])
    return (
        f"{export_turns_markdown([turn]).rstrip()}\n\n"
        f"_Chat {turn.chat_id} ({page}): pass chat_id={turn.chat_id} to ask a follow-up._\n"
    )


@server.tool()
async def search_chats(query: str, ctx: Context) -> list[dict[str, Any]]:
    """Find your earlier research: chats matching every word of `query`, best first, each with
    its id (for research's chat_id), title and the matching passage."""
    owner = _caller(ctx).owner
    results = await on_database_thread(chat_search_for_user, user=owner, query=query[:200])
    return [
        {
            "chat_id": result.chat.pk,
            "title": result.chat.title,
            "snippet": html.unescape(strip_tags(result.snippet_html)),
            "updated_at": result.chat.updated_at.isoformat(),
        }
        for result in results
    ]


class McpEndpoint:
    """This event loop's streamable HTTP app of the SDK and its session manager."""

    def __init__(self) -> None:
        # The site checks hosts and origins itself (McpGate), by Django's rules.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.app = server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, transport_security=security
        )
        self.session_manager = server.session_manager  # the one just made, for this loop


_endpoints = PerLoop(McpEndpoint)


@contextlib.asynccontextmanager
async def mcp_running() -> AsyncIterator[None]:
    """Run this loop's MCP session manager while the site serves (its lifespan)."""
    async with _endpoints().session_manager.run():
        yield


async def mcp_app(scope, receive, send) -> None:
    """/mcp, behind the gate."""
    await McpGate(_endpoints().app)(scope, receive, send)


class McpGate:
    """Let a request through to the MCP app only with a usable API token holding `ask`, within
    its rate (researchsite/asgi.py checks its host and Origin before)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        authorization = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
        )
        try:
            token = await token_with_scope(
                authorization, scope.get("query_string", b"").decode("latin-1"), ApiToken.Scope.ASK
            )
        except AuthenticationError as refused:
            challenge = {"www-authenticate": 'Bearer realm="mcp"'}
            return await _refuse(send, 401, str(refused), challenge)
        except HttpError as refused:
            return await _refuse(send, refused.status_code, str(refused))
        if not token_rates.allow(token):
            return await _refuse(send, 429, "Too many requests.", {"retry-after": "1"})
        await self.app({**scope, CALLER: token}, receive, send)


async def _refuse(send, status: int, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": message}).encode()
    fields = {"content-type": "application/json", "cache-control": "no-store", **(headers or {})}
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.encode(), v.encode()) for k, v in fields.items()],
        }
    )
    await send({"type": "http.response.body", "body": body})
